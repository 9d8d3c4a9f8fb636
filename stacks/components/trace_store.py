"""The trace bucket, its access-log bucket and the lifecycle of every class of stored data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from profstack.config import Legacy, Retention, Storage
from profstack.layout import (
    ATHENA_RESULTS_PREFIX,
    HISTORY_PREFIX,
    LEGACY_RULE_OUTPUT_TAG,
    REPORTS_PREFIX,
    TENSORBOARD_PREFIX,
    TRACES_PREFIX,
)
from stacks.components.nag import acknowledge
from stacks.components.role_paths import (
    READER_SEGMENT,
    analyst_role_path,
    processing_role_path,
    role_arn_pattern,
    users_role_path_root,
)

ABORT_INCOMPLETE_UPLOADS_AFTER = cdk.Duration.days(7)
#: Athena query results of the history workgroup are scratch output: kept a month
ATHENA_RESULTS_EXPIRE_AFTER = cdk.Duration.days(30)


def lifecycle_rules(retention: Retention, legacy: Legacy) -> list[s3.LifecycleRule]:
    """One rule per class of data; prefixes come from profstack.layout."""
    raw = retention.raw_traces

    def tiered(rule_id: str, prefix: str, expire_after_days: int) -> s3.LifecycleRule:
        return s3.LifecycleRule(
            id=rule_id,
            prefix=prefix,
            transitions=[
                s3.Transition(
                    storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                    transition_after=cdk.Duration.days(raw.infrequent_access_after_days),
                ),
                s3.Transition(
                    storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                    transition_after=cdk.Duration.days(raw.glacier_ir_after_days),
                ),
            ],
            expiration=cdk.Duration.days(expire_after_days),
        )

    tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
    return [
        tiered("raw-traces", TRACES_PREFIX, raw.expire_after_days),
        tiered("tensorboard-logs", TENSORBOARD_PREFIX, retention.tensorboard_logs_expire_after_days),
        s3.LifecycleRule(
            id="reports",
            prefix=REPORTS_PREFIX,
            expiration=cdk.Duration.days(retention.reports_expire_after_days),
        ),
        # history rows (issue 16) live as long as the reports they summarise
        s3.LifecycleRule(
            id="history",
            prefix=HISTORY_PREFIX,
            expiration=cdk.Duration.days(retention.reports_expire_after_days),
        ),
        s3.LifecycleRule(id="athena-results", prefix=ATHENA_RESULTS_PREFIX, expiration=ATHENA_RESULTS_EXPIRE_AFTER),
        # A prefix rule cannot match <output>/<job>/rule-output/ (no wildcards, facts A7): expire by tag.
        s3.LifecycleRule(
            id="legacy-rule-output",
            tag_filters={tag_key: tag_value},
            expiration=cdk.Duration.days(legacy.rule_output_expire_after_days),
        ),
        s3.LifecycleRule(
            id="abort-incomplete-uploads",
            abort_incomplete_multipart_upload_after=ABORT_INCOMPLETE_UPLOADS_AFTER,
        ),
        s3.LifecycleRule(
            id="noncurrent-versions",
            noncurrent_version_expiration=cdk.Duration.days(retention.noncurrent_versions_expire_after_days),
            expired_object_delete_marker=True,
        ),
    ]


# The backstop governs actions by FAMILY, not by list (issue 42 item 4): on an object ARN, the read family is every
# `s3:Get*` and `s3:List*` action (the object, its versions, ACL, attributes, tags, legal hold, retention, torrent,
# the parts of an upload: each answers whether a key exists and what it holds), and the write family is everything
# else (NotAction of the read family): put, copy, delete, abort, restore, replicate (ReplicateObject, ReplicateDelete,
# ReplicateTags), ACLs, tags, retention and legal hold, governance bypass, encryption changes, and any verb S3 adds
# later. tests/infra/test_bucket_action_families.py checks S3's whole action list and botocore's object operations.
READ_FAMILY = ("s3:Get*", "s3:List*")
#: tag writes (a tag changes what the lifecycle does, and what a tag-based policy decides)
TAG_WRITE_ACTIONS = ("s3:PutObject*Tagging", "s3:DeleteObject*Tagging", "s3:ReplicateTags")
#: what a user's role may do on the bucket itself: list its own prefixes (and find the bucket's region)
USER_BUCKET_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation")
USER_DATA_PREFIXES = (TRACES_PREFIX, TENSORBOARD_PREFIX, REPORTS_PREFIX)
#: the folders a training job writes: its owner's roles and the pipeline write there (and the configured writers)
TRACE_FOLDERS = (TRACES_PREFIX, TENSORBOARD_PREFIX)
#: every prefix ProfStack keeps in the bucket: key names there are users' data (jobs, hosts, files)
PROFSTACK_PREFIXES = (TRACES_PREFIX, TENSORBOARD_PREFIX, REPORTS_PREFIX, HISTORY_PREFIX, ATHENA_RESULTS_PREFIX)


def _deny(sid: str, **kwargs: Any) -> iam.PolicyStatement:
    """A Deny statement of the bucket policy, for every principal (conditions say whom it spares)."""
    return iam.PolicyStatement(sid=sid, effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], **kwargs)


def _write_family(sid: str, **kwargs: Any) -> iam.PolicyStatement:
    """A Deny of every action but the read family (writes, deletes, aborts, replication, tags, ACLs, retention)."""
    return _deny(sid, not_actions=list(READ_FAMILY), **kwargs)


def _leading_parts(prefixes: tuple[str, ...]) -> list[str]:
    """Every proper beginning of the prefixes ("", "t", "tr", …, "traces"): listing with one of them would list
    the keys under the prefix too."""
    return sorted({p[:i] for p in prefixes for i in range(len(p))})


# A tag value no user can have (user names start with a letter): the policy variable's default.
_UNTAGGED = "_untagged"


@dataclass(frozen=True, kw_only=True)
class BucketBoundary:
    """Who may touch users' data, independent of identity policies (issue 11, item 2; issue 42, items 4-6).

    `prefix` is the deployment prefix (role paths, stacks/components/role_paths.py); `user_tag_key` the tag
    each user's execution role carries with the user's name (the same key as on training jobs)."""

    prefix: str
    user_tag_key: str
    storage: Storage

    def _tag_variable(self) -> str:
        return f"${{aws:PrincipalTag/{self.user_tag_key}, '{_UNTAGGED}'}}"

    def privileged_principals(self) -> list[str]:
        """`aws:PrincipalArn` patterns of the processing roles and the configured break-glass principals."""
        return [role_arn_pattern(processing_role_path(self.prefix)), *self.storage.break_glass_principal_arns]

    def statements(self, bucket: s3.IBucket) -> list[iam.PolicyStatement]:
        return [*self._user_data_statements(bucket), *self._history_statements(bucket)]

    def _user_data_statements(self, bucket: s3.IBucket) -> list[iam.PolicyStatement]:
        privileged = self.privileged_principals()
        # the caller's own user path, from its tag: a changed or missing tag can only narrow access
        own_user_role = role_arn_pattern(f"{users_role_path_root(self.prefix)}{self._tag_variable()}/")
        user_roles = role_arn_pattern(users_role_path_root(self.prefix))
        user_data = [bucket.arn_for_objects(f"{p}*") for p in USER_DATA_PREFIXES]
        own_data = [bucket.arn_for_objects(f"{p}{self._tag_variable()}/*") for p in USER_DATA_PREFIXES]
        analysts = role_arn_pattern(analyst_role_path(self.prefix))
        analyst_prefixes = (HISTORY_PREFIX, ATHENA_RESULTS_PREFIX)
        tag_key = LEGACY_RULE_OUTPUT_TAG[0]
        return [
            # the expiry tag deletes what it is on: only ProfStack's processing roles (they tag a finished job's
            # legacy rule-output/) and break-glass may set it, on any object, in a tagging call or an upload
            _deny(
                "ExpiryTagSetOnlyByProcessingBreakGlass",
                actions=["s3:PutObject", "s3:PutObjectTagging", "s3:PutObjectVersionTagging"],
                resources=[bucket.arn_for_objects("*")],
                conditions={
                    "ForAnyValue:StringEquals": {"s3:RequestObjectTagKeys": [tag_key]},
                    "ArnNotLike": {"aws:PrincipalArn": privileged},
                },
            ),
            # no tag of any kind on ProfStack's data but by processing and break-glass
            _deny(
                "ProfStackDataTaggedOnlyByProcessingBreakGlass",
                actions=list(TAG_WRITE_ACTIONS),
                resources=[bucket.arn_for_objects(f"{p}*") for p in PROFSTACK_PREFIXES],
                conditions={"ArnNotLike": {"aws:PrincipalArn": privileged}},
            ),
            # in-progress uploads name their keys, and ListMultipartUploads takes no s3:prefix condition
            _deny(
                "UploadsListedOnlyByProcessingBreakGlass",
                actions=["s3:ListBucketMultipartUploads"],
                resources=[bucket.bucket_arn],
                conditions={"ArnNotLike": {"aws:PrincipalArn": privileged}},
            ),
            # key names under ProfStack's prefixes are users' data: principals outside ProfStack (a training job's
            # role, an administrator) list none of them, nor the bucket's top level; users list their own (below),
            # the history analysts only history/ and their query results
            *self._listing_statements(bucket, USER_DATA_PREFIXES, [*privileged, user_roles], "UserData"),
            *self._listing_statements(bucket, analyst_prefixes, [*privileged, analysts], "History"),
            _deny(
                "BucketListedWithoutPrefixOnlyByProcessingBreakGlass",
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
                resources=[bucket.bucket_arn],
                conditions={"ArnNotLike": {"aws:PrincipalArn": privileged}, "Null": {"s3:prefix": "true"}},
            ),
            # the read family (GetObjectAcl, GetObjectAttributes, ListMultipartUploadParts, ... answer for a key)
            _deny(
                "UserDataReadOnlyByOwnerProcessingBreakGlass",
                actions=list(READ_FAMILY),
                resources=user_data,
                conditions={"ArnNotLike": {"aws:PrincipalArn": [*privileged, own_user_role]}},
            ),
            # a user's roles: every object action on their own three prefixes only, and on the bucket itself only
            # listing (below: their own prefixes), never its configuration
            _deny(
                "UserRolesOnlyTheirOwnObjects",
                actions=["s3:*"],
                not_resources=[*own_data, bucket.bucket_arn],
                conditions={"ArnLike": {"aws:PrincipalArn": user_roles}},
            ),
            _deny(
                "UserRolesOnlyListTheBucket",
                not_actions=list(USER_BUCKET_ACTIONS),
                resources=[bucket.bucket_arn],
                conditions={"ArnLike": {"aws:PrincipalArn": user_roles}},
            ),
            # key names are data too (job names, hosts, file names): a user's role lists only its own prefixes
            _deny(
                "UserRolesListOnlyTheirOwnPrefixes",
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
                resources=[bucket.bucket_arn],
                conditions={
                    "ArnLike": {"aws:PrincipalArn": user_roles},
                    "StringNotLike": {"s3:prefix": [f"{p}{self._tag_variable()}/*" for p in USER_DATA_PREFIXES]},
                },
            ),
            # the evidence a report is built from: a job's folders are written by its owner's roles (the statement
            # above keeps each to its own folders) and the pipeline; storage.trace_writer_principal_arns widens it
            _write_family(
                "TraceFoldersWrittenOnlyByOwnersPipelineWriters",
                resources=[bucket.arn_for_objects(f"{p}*") for p in TRACE_FOLDERS],
                conditions={
                    "ArnNotLike": {
                        "aws:PrincipalArn": [*privileged, user_roles, *self.storage.trace_writer_principal_arns]
                    }
                },
            ),
            # a user's report reader role reads; it writes nothing, whatever its identity policy says
            _write_family(
                "ReportReadersWriteNothing",
                resources=[bucket.arn_for_objects("*")],
                conditions={
                    "ArnLike": {
                        "aws:PrincipalArn": role_arn_pattern(f"{users_role_path_root(self.prefix)}*/{READER_SEGMENT}/")
                    }
                },
            ),
            _write_family(
                "ReportsWrittenOnlyByProcessingBreakGlass",
                resources=[bucket.arn_for_objects(f"{REPORTS_PREFIX}*")],
                conditions={"ArnNotLike": {"aws:PrincipalArn": privileged}},
            ),
        ]

    def _listing_statements(
        self, bucket: s3.IBucket, prefixes: tuple[str, ...], listers: list[str], name: str
    ) -> list[iam.PolicyStatement]:
        """Listing `prefixes` only by `listers`: with a prefix under them, and with one that begins them (`t` lists
        `traces/`; the empty prefix lists everything)."""
        return [
            _deny(
                f"{name}KeysListedOnlyByTheirReaders",
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
                resources=[bucket.bucket_arn],
                conditions={
                    "ArnNotLike": {"aws:PrincipalArn": listers},
                    "StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]},
                },
            ),
            _deny(
                f"{name}KeysListedOnlyByTheirReadersEvenByTheirBeginning",
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
                resources=[bucket.bucket_arn],
                conditions={
                    "ArnNotLike": {"aws:PrincipalArn": listers},
                    "StringEquals": {"s3:prefix": _leading_parts(prefixes)},
                },
            ),
        ]

    def _history_statements(self, bucket: s3.IBucket) -> list[iam.PolicyStatement]:
        # history rows (every user's, partitioned user=<user>: job names, costs, kernel names) and the Athena
        # results over them: the processing roles write and read the rows (a family's baseline), the history
        # analyst role reads them and owns the query results. Nobody else, whatever identity policies say: a
        # planted row under user=<bob> would be read as bob's baseline and put a Regression in bob's report.
        privileged = self.privileged_principals()
        analysts = role_arn_pattern(analyst_role_path(self.prefix))
        history = bucket.arn_for_objects(f"{HISTORY_PREFIX}*")
        results = bucket.arn_for_objects(f"{ATHENA_RESULTS_PREFIX}*")
        return [
            _deny(
                "HistoryReadOnlyByProcessingAnalystsBreakGlass",
                actions=list(READ_FAMILY),
                resources=[history],
                conditions={"ArnNotLike": {"aws:PrincipalArn": [*privileged, analysts]}},
            ),
            _write_family(
                "HistoryWrittenOnlyByProcessingBreakGlass",
                resources=[history],
                conditions={"ArnNotLike": {"aws:PrincipalArn": privileged}},
            ),
            _deny(
                "QueryResultsOnlyAnalystsBreakGlass",
                actions=["s3:*"],
                resources=[results],
                conditions={"ArnNotLike": {"aws:PrincipalArn": [analysts, *self.storage.break_glass_principal_arns]}},
            ),
        ]


class TraceStore(Construct):
    """KMS-encrypted, versioned trace bucket with server access logs to a separate bucket."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        retention: Retention,
        legacy: Legacy,
        boundary: BucketBoundary | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            # S3 server access logs can only be delivered to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=cdk.Duration.days(retention.access_logs_expire_after_days),
                    noncurrent_version_expiration=cdk.Duration.days(1),
                    abort_incomplete_multipart_upload_after=ABORT_INCOMPLETE_UPLOADS_AFTER,
                )
            ],
        )
        acknowledge(
            self.access_log_bucket,
            "AwsSolutions-S1",
            "This bucket is the server-access-log target; logging it to itself would loop.",
        )
        self.bucket = s3.Bucket(
            self,
            "Traces",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="trace-bucket/",
            removal_policy=cdk.RemovalPolicy.RETAIN,
            lifecycle_rules=lifecycle_rules(retention, legacy),
        )
        if boundary is not None:
            for statement in boundary.statements(self.bucket):
                self.bucket.add_to_resource_policy(statement)
