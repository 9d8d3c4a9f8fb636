"""One ProfStack user inside the SageMaker domain: a user profile with its own execution role.

The execution role (what the user's TensorBoard app and their training jobs run as) can only:
- list and read that user's `traces/<user>/`, `tensorboard/<user>/` and `reports/<user>/` prefixes
  (keys from profstack.layout), and write their own `traces/<user>/` and `tensorboard/<user>/` (a job that runs as
  it writes its traces: by default nobody else but the pipeline may, stacks/components/trace_store.py);
- use the trace (data) key through S3 for this bucket;
- DescribeTrainingJob on jobs tagged `<user_tag_key>=<user>`.

The role sits on the IAM path `/<prefix>/users/<user>/` and carries the tag `<user_tag_key>=<user>`;
the trace bucket's policy lets such a role touch only the prefixes of the user its path names
(stacks/components/trace_store.py, BucketBoundary), whatever its identity policy says.

`reader_role` is the person's way to their reports from their own machine (`profstack reports --reader`): below the
execution role's path (`/<prefix>/users/<user>/reader/`) and with the same tag, so the bucket policy holds it to the
same user's prefixes, and lets it write nothing; it may list and read `reports/<user>/` only. Its trust policy
names the person, never the account alone (issue 42 item 1): a principal of this account that carries the
principal tag `<user_tag_key>=<user>` (an IAM user or role tag, or a session tag from the identity provider), or one
of the user's `principals` from the config, and whose own policy allows `sts:AssumeRole` on it (the access policy
does, for that user's role alone).

Every ProfStack identity policy of the user (both roles, the access policy) carries the explicit Denies of
profstack/guardrails.py: nothing of another user (roles, Studio profile, apps, spaces, jobs' tags) whatever an Allow
elsewhere says (issue 42 item 2).

`access_policy` is a customer-managed policy for the *person*: attach it to their IAM identity
(or SSO permission set) so that `profstack tensorboard url|start|stop --user <them>` works for
their own profile and app and for no one else's, and `profstack reports --reader` reads their own reports.
No AWS managed policy is used.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from profstack.config import User
from profstack.guardrails import Scope, Statement, isolation_statements
from profstack.layout import user_reports_prefix, user_tensorboard_prefix, user_traces_prefix
from profstack.tensorboard.names import app_arn_patterns, user_profile_name
from stacks.components.iam import key_use_statement, managed_policies, no_resource_type_statement
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import cross_stack, iam5_resource
from stacks.components.role_paths import reader_role_path


def user_read_prefixes(user: str) -> tuple[str, ...]:
    return (user_traces_prefix(user), user_tensorboard_prefix(user), user_reports_prefix(user))


def user_write_prefixes(user: str) -> tuple[str, ...]:
    """What a job that runs as the user's execution role writes: its traces and TensorBoard logs."""
    return (user_traces_prefix(user), user_tensorboard_prefix(user))


def reader_export_name(prefix: str, user: str) -> str:
    """The CloudFormation export that names `user`'s report reader role (`profstack reports --reader` reads it)."""
    return f"{prefix}-report-reader-{user}"


class UserWorkspace(Construct):
    """Exposes `profile`, `profile_name`, `profile_arn`, `role` (execution), `reader_role` and `access_policy`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        user: User,
        domain_id: str,
        trace_bucket: s3.IBucket,
        data_key: kms.IKey,
        user_tag_key: str,
        role_path: str,
        name_prefix: str,
        isolation: Scope,
        security_group_ids: list[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.user_name = user.name
        self.profile_name = user_profile_name(user.name)
        prefixes = user_read_prefixes(user.name)

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"ProfStack SageMaker execution role of user {user.name}: own prefixes, read only",
            # The path and the tag are what the trace bucket's policy checks (stacks/components/role_paths.py).
            path=role_path,
        )
        cdk.Tags.of(self.role).add(user_tag_key, user.name)
        # Not bucket.grant_read: it allows s3:List* on the whole bucket, i.e. other users' key names.
        bucket_arn = cross_stack(self, trace_bucket, trace_bucket.bucket_arn)
        object_arns = [f"{bucket_arn}/{p}*" for p in prefixes]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListOwnPrefixes",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadOwnObjects",
                actions=["s3:GetObject"],
                resources=object_arns,
            )
        )
        # a training job that runs as this role (the owner the pipeline can verify) writes its own traces and
        # TensorBoard logs; the bucket policy lets no other role of a user write there, and no one else by default
        write_arns = [f"{bucket_arn}/{p}*" for p in user_write_prefixes(user.name)]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteOwnTraces", actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=write_arns
            )
        )
        # the data key only as S3 uses it for this bucket's objects (kms:ViaService + encryption context): decrypt
        # to read, and what an SSE-KMS upload (multipart included) needs to write
        self.role.add_to_principal_policy(
            key_use_statement(
                data_key,
                ["kms:Decrypt", "kms:GenerateDataKey"],
                via="s3",
                context={"aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"]},
            )
        )
        training_jobs = stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DescribeOwnTrainingJobs",
                actions=["sagemaker:DescribeTrainingJob"],
                resources=[training_jobs],
                conditions={"StringEquals": {f"aws:ResourceTag/{user_tag_key}": user.name}},
            )
        )
        for arn in object_arns:
            writes = " and writes (PutObject, AbortMultipartUpload)" if arn in write_arns else ""
            acknowledge(
                self.role,
                iam5_resource(self, arn),
                f"Reads (s3:GetObject){writes} of objects under this user's own prefix only, {user.name}'s "
                "keys from profstack.layout; other users' prefixes are not granted.",
            )
        acknowledge(
            self.role,
            iam5_resource(self, training_jobs),
            "DescribeTrainingJob on training-job/* is limited by an aws:ResourceTag condition to jobs "
            f"tagged {user_tag_key}={user.name}; job names are not known in advance.",
        )

        self.profile = sagemaker.CfnUserProfile(
            self,
            "Profile",
            domain_id=domain_id,
            user_profile_name=self.profile_name,
            user_settings=sagemaker.CfnUserProfile.UserSettingsProperty(
                execution_role=self.role.role_arn,
                security_groups=security_group_ids or None,
            ),
            tags=[cdk.CfnTag(key=user_tag_key, value=user.name)],
        )
        self.profile_arn = stack.format_arn(
            service="sagemaker", resource="user-profile", resource_name=f"{domain_id}/{self.profile_name}"
        )

        self.reader_role = self._reader_role(
            user=user,
            bucket_arn=bucket_arn,
            data_key=data_key,
            user_tag_key=user_tag_key,
            role_path=role_path,
        )
        # the user's explicit Denies (another user's roles, profile, apps, spaces, jobs' tags), on both roles
        denies = isolation_statements(isolation, user.name)
        self.isolation_policies = managed_policies(
            self,
            "Isolation",
            denies,
            description=f"ProfStack: {user.name}'s roles reach nothing of another user (Deny only)",
            roles=[self.role, self.reader_role],
        )
        cdk.CfnOutput(
            self,
            "ReportReaderRoleArn",
            value=self.reader_role.role_arn,
            description=f"{user.name}'s report reader role (profstack reports --reader)",
            export_name=reader_export_name(name_prefix, user.name),
        )

        self.access_policies = managed_policies(
            self,
            "AccessPolicy",
            [
                *self._access_statements(domain_id=domain_id, stack=stack, user=user.name),
                *isolation_statements(isolation, user.name),
            ],
            description=f"Attach to {user.name}'s IAM identity: open, start and stop only their own TensorBoard",
        )
        self.access_policy = self.access_policies[0]
        # cdk-nag judges Allow statements only: the Denies' wildcards need no acknowledgement
        acknowledge(
            self.access_policy,
            "AwsSolutions-IAM5[Resource::*]",
            "Resource '*' only for sagemaker:ListApps, which supports no resource type (docs/platform-facts.md A4); "
            "every other Allow names this user's own profile or app ARN.",
        )

    def _access_statements(self, *, domain_id: str, stack: cdk.Stack, user: str) -> list[Statement]:
        """The person's Allows: their own profile, TensorBoard app and report reader role."""
        app_arns = app_arn_patterns(stack.partition, stack.region, stack.account, domain_id, user)
        statements = [
            iam.PolicyStatement(
                sid="OwnProfile",
                actions=["sagemaker:CreatePresignedDomainUrl", "sagemaker:DescribeUserProfile"],
                resources=[self.profile_arn],
            ),
            iam.PolicyStatement(
                sid="OwnTensorBoardApp",
                actions=["sagemaker:CreateApp", "sagemaker:DeleteApp", "sagemaker:DescribeApp"],
                resources=app_arns,
            ),
            # sagemaker:ListApps supports no resource type (docs/platform-facts.md A4); it shows app status only.
            no_resource_type_statement(["sagemaker:ListApps"]),
            iam.PolicyStatement(
                sid="OwnReportReader", actions=["sts:AssumeRole"], resources=[self.reader_role.role_arn]
            ),
        ]
        return [dict(statement.to_statement_json()) for statement in statements]

    def _reader_role(
        self, *, user: User, bucket_arn: str, data_key: kms.IKey, user_tag_key: str, role_path: str
    ) -> iam.Role:
        """List and read reports/<user>/ only, for the person: a principal of this account tagged as the user (or
        one of the user's configured principals) whose own policy allows sts:AssumeRole on this role."""
        user_name = user.name
        reports = user_reports_prefix(user_name)
        role = iam.Role(
            self,
            "ReportReaderRole",
            # The account's principals, but only the person's: the account alone would let anyone allowed
            # sts:AssumeRole on "*" (PowerUser, most administrators) read this user's reports.
            assumed_by=iam.AccountRootPrincipal().with_conditions(
                {"StringEquals": {f"aws:PrincipalTag/{user_tag_key}": user_name}}
            ),
            description=f"ProfStack report reader of user {user_name}: lists and reads reports/{user_name}/ only",
            path=reader_role_path(role_path),
            max_session_duration=cdk.Duration.hours(1),
        )
        if user.principals:
            role.assume_role_policy.add_statements(  # type: ignore[union-attr]
                iam.PolicyStatement(
                    sid="TheUsersConfiguredPrincipals",
                    actions=["sts:AssumeRole"],
                    principals=[iam.AccountRootPrincipal()],
                    conditions={"ArnEquals": {"aws:PrincipalArn": list(user.principals)}},
                )
            )
        cdk.Tags.of(role).add(user_tag_key, user_name)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListOwnReports",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{reports}*"]}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="ReadOwnReports", actions=["s3:GetObject"], resources=[f"{bucket_arn}/{reports}*"])
        )
        role.add_to_principal_policy(
            key_use_statement(
                data_key, ["kms:Decrypt"], via="s3", context={"aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"]}
            )
        )
        acknowledge(
            role,
            iam5_resource(self, f"{bucket_arn}/{reports}*"),
            f"Read (s3:GetObject) of {user_name}'s own reports only (reports/{user_name}/ from profstack.layout).",
        )
        return role
