"""Per-user identity boundaries (issue 42): the explicit Denies every ProfStack identity policy carries, and the
permissions boundary and service control policy that carry them to identities ProfStack does not write.

One source for three places, as plain IAM JSON (no CDK, no AWS call): the stacks put `isolation_statements` into
each user's execution role, report reader role and access policy (stacks/components/user_workspace.py, ARN parts
as CloudFormation tokens); `profstack iam boundary` and `profstack iam scp` print `boundary_document` and
`scp_documents` for an administrator to install (docs/security.md, "What an administrator must not grant").

What "another user's" means, and how each is matched:

* roles: every role under `/<prefix>/users/` carries `<user_tag_key>=<user>` (the stacks tag them); a Deny on that
  path whose `iam:ResourceTag` is not the user's covers `iam:PassRole`, every STS call and every IAM change, for
  users added later too (IAM evaluates a role's tags for PassRole and AssumeRole: `iam:ResourceTag`);
* Studio: a user profile and its apps by ARN (`user-profile/<domain>/<u>`, `app/<domain>/<u>/*`), one entry per
  other configured user (no condition key names the profile an app belongs to), and spaces by
  `sagemaker:OwnerUserProfileArn`;
* training and tuning jobs by their owner tag: the owner tag is never changed after creation, behaviour tags
  (`profstack:actions`, `profstack:live`, the family tag, the job filter's key) only on one's own jobs, and no
  job is created for, stopped or updated as another owner.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from profstack.actions import ACTIONS_TAG, LIVE_TAG

Statement = dict[str, Any]

#: IAM's size limits (characters without whitespace) of what these documents are installed as
MANAGED_POLICY_MAX_CHARS = 6144
SCP_MAX_CHARS = 5120
#: other users' profiles and apps per Deny statement (a policy is split between statements when it grows too large)
OTHERS_PER_STATEMENT = 10
#: the default user tag value of a principal without the tag: no user name (they start with a letter) equals it
UNTAGGED = "_untagged"
#: every IAM action that creates, changes or deletes an identity, its policies or its tags (not PassRole, not reads)
IAM_CHANGES = (
    "iam:Add*",
    "iam:Attach*",
    "iam:Create*",
    "iam:Delete*",
    "iam:Detach*",
    "iam:Put*",
    "iam:Remove*",
    "iam:Set*",
    "iam:Tag*",
    "iam:Untag*",
    "iam:Update*",
)
#: what nobody but the owner (and break-glass) does to a user's Studio profile or app
STUDIO_PROFILE_ACTIONS = ("sagemaker:*",)
#: space operations, and apps in a space, judged by the space's owner profile
SPACE_ACTIONS = (
    "sagemaker:CreateSpace",
    "sagemaker:UpdateSpace",
    "sagemaker:DeleteSpace",
    "sagemaker:CreateApp",
    "sagemaker:DeleteApp",
    "sagemaker:CreatePresignedDomainUrl",
)
JOB_TAG_ACTIONS = ("sagemaker:AddTags", "sagemaker:DeleteTags")
JOB_CREATE_ACTIONS = ("sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob")
JOB_CONTROL_ACTIONS = (
    "sagemaker:StopTrainingJob",
    "sagemaker:UpdateTrainingJob",
    "sagemaker:StopHyperParameterTuningJob",
)
#: the profile and domain of a ProfStack deployment are CloudFormation's: users do not change or retag them
PROFILE_CHANGES = (
    "sagemaker:UpdateUserProfile",
    "sagemaker:DeleteUserProfile",
    "sagemaker:AddTags",
    "sagemaker:DeleteTags",
)
#: the boundary must not be removed or swapped by the principal it binds
BOUNDARY_CHANGES = (
    "iam:DeleteRolePermissionsBoundary",
    "iam:DeleteUserPermissionsBoundary",
    "iam:PutRolePermissionsBoundary",
    "iam:PutUserPermissionsBoundary",
)
#: configuration of the trace bucket that moves, exposes or deletes users' data wholesale
BUCKET_CONFIGURATION = (
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutReplicationConfiguration",
    "s3:PutInventoryConfiguration",
    "s3:PutBucketNotification",
    "s3:PutLifecycleConfiguration",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketAcl",
    "s3:PutBucketLogging",
    "s3:PutAnalyticsConfiguration",
    "s3:PutBucketObjectLockConfiguration",
    "s3:PutBucketVersioning",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketPublicAccessBlock",
    "s3:DeleteBucket",
)


def behaviour_tag_keys(config: Any) -> tuple[str, ...]:
    """Every job tag whose value changes what ProfStack does with the job, besides the owner tag: the consent to
    stops, live analysis off, the history family, and the processing filter's key when one is configured.
    `config` is a profstack.config.ProfStackConfig."""
    keys = {ACTIONS_TAG, LIVE_TAG, config.history.family.tag_key}
    if config.processing.job_tag_filter is not None:
        keys.add(config.processing.job_tag_filter.key)
    keys.discard(config.tensorboard.user_tag_key)
    return tuple(sorted(keys))


@dataclass(frozen=True, kw_only=True)
class Scope:
    """A ProfStack deployment as IAM sees it. ARN parts are literal text or CloudFormation tokens; `*` where the
    document is generic (an SCP covers every region)."""

    prefix: str
    users: tuple[str, ...]
    user_tag_key: str
    behaviour_tags: tuple[str, ...]
    partition: str = "aws"
    region: str = "*"
    account: str = "*"
    domain_id: str = "*"
    #: users[].principals: IAM roles or users (exact ARNs) that are this person alone, besides the principal tag
    principals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    # ---- ARNs --------------------------------------------------------------------------------------------------
    def _iam(self, resource: str) -> str:
        return f"arn:{self.partition}:iam::{self.account}:{resource}"

    def _sagemaker(self, resource: str) -> str:
        return f"arn:{self.partition}:sagemaker:{self.region}:{self.account}:{resource}"

    def users_roles(self) -> str:
        return self._iam(f"role/{self.prefix}/users/*")

    def profstack_identities(self) -> list[str]:
        """Every ProfStack role (its paths) and every customer-managed policy its stacks or this module name."""
        return [self._iam(f"role/{self.prefix}/*"), self._iam(f"policy/{self.prefix}-*")]

    def profile(self, user: str) -> str:
        from profstack.tensorboard.names import user_profile_name

        return self._sagemaker(f"user-profile/{self.domain_id}/{user_profile_name(user)}")

    def profiles(self) -> str:
        return self._sagemaker(f"user-profile/{self.domain_id}/*")

    def apps(self, user: str) -> str:
        from profstack.tensorboard.names import user_profile_name

        return self._sagemaker(f"app/{self.domain_id}/{user_profile_name(user)}/*")

    def any_profile(self, user: str) -> str:
        """The user's profile in the domain, in any region and account (a domain id is unique: shorter, as exact)."""
        return self.profile(user).replace(f":{self.region}:{self.account}:", ":*:*:", 1)

    def any_apps(self, user: str) -> str:
        return self.apps(user).replace(f":{self.region}:{self.account}:", ":*:*:", 1)

    def domain(self) -> str:
        return self._sagemaker(f"domain/{self.domain_id}")

    def spaces_and_apps(self) -> list[str]:
        return [self._sagemaker(f"space/{self.domain_id}/*"), self._sagemaker(f"app/{self.domain_id}/*")]

    def jobs(self) -> list[str]:
        return [self._sagemaker("training-job/*"), self._sagemaker("hyper-parameter-tuning-job/*")]

    def boundary_arn(self, user: str) -> str:
        return self._iam(f"policy/{boundary_policy_name(self.prefix, user)}")


def boundary_policy_name(prefix: str, user: str) -> str:
    """The name an administrator gives `user`'s permissions boundary (the boundary protects that name)."""
    return f"{prefix}-boundary-{user}"


def _deny(
    sid: str, actions: Iterable[str], resources: Iterable[str], condition: Mapping[str, Any] | None = None
) -> Statement:
    statement: Statement = {"Sid": sid, "Effect": "Deny", "Action": sorted(set(actions)), "Resource": list(resources)}
    if condition:
        statement["Condition"] = {op: dict(clauses) for op, clauses in condition.items()}
    return statement


def _owner_tag_statements(scope: Scope, owner: str | None, *, spare: Sequence[str] = ()) -> list[Statement]:
    """Job tags and job control, for the policies of `owner` (None: nobody's, e.g. the domain's default role; an
    SCP passes the principal's own tag as a policy variable). `spare`: ARN patterns of principals left out (SCP)."""
    key = scope.user_tag_key
    unspared: dict[str, Any] = {"ArnNotLike": {"aws:PrincipalArn": list(spare)}} if spare else {}
    not_owner = {"StringNotEquals": {f"aws:ResourceTag/{key}": owner}} if owner is not None else {}
    statements = [
        # SageMaker authorises tag-on-create as AddTags with sagemaker:TaggingAction set: the create checks below
        # judge those tags; a standalone AddTags/DeleteTags of the owner key is a retag, which nobody may do
        _deny(
            "OwnerTagNeverChanges",
            JOB_TAG_ACTIONS,
            scope.jobs(),
            {
                "ForAnyValue:StringEquals": {"aws:TagKeys": [key]},
                "Null": {"sagemaker:TaggingAction": "true"},
                **unspared,
            },
        ),
    ]
    if scope.behaviour_tags:
        statements.append(
            _deny(
                "BehaviourTagsOnlyOnOwnJobs",
                JOB_TAG_ACTIONS,
                scope.jobs(),
                {
                    "ForAnyValue:StringEquals": {"aws:TagKeys": list(scope.behaviour_tags)},
                    "Null": {"sagemaker:TaggingAction": "true"},
                    **not_owner,
                    **unspared,
                },
            )
        )
    claims = {"StringNotEquals": {f"aws:RequestTag/{key}": owner}} if owner is not None else {}
    statements += [
        # a job created with an owner tag that is not the caller's (a job without the tag is _unowned)
        _deny(
            "NoJobForAnotherOwner",
            JOB_CREATE_ACTIONS,
            scope.jobs(),
            {**claims, "Null": {f"aws:RequestTag/{key}": "false"}, **unspared},
        ),
        _deny(
            "NoControlOfAnotherOwnersJob",
            JOB_CONTROL_ACTIONS,
            scope.jobs(),
            {**not_owner, "Null": {f"aws:ResourceTag/{key}": "false"}, **unspared},
        ),
    ]
    return statements


def isolation_statements(scope: Scope, user: str | None) -> list[Statement]:
    """The explicit Denies of `user`'s ProfStack identity policies (None: a ProfStack identity that belongs to
    nobody, such as the domain's default execution role: every user's things are someone else's)."""
    key = scope.user_tag_key
    others = [u for u in scope.users if u != user]
    statements: list[Statement] = [
        # another user's roles: never passed, assumed, tagged or changed, whatever an Allow elsewhere says
        _deny(
            "OtherUsersRoles",
            ["iam:*", "sts:*"],
            [scope.users_roles()],
            {"StringNotEquals": {f"iam:ResourceTag/{key}": user if user is not None else UNTAGGED}},
        ),
        # ProfStack's own identities (every role path, the stacks' and boundaries' policies) change only by deploy
        _deny("ProfStackIdentitiesChangeOnlyByDeploy", IAM_CHANGES, scope.profstack_identities()),
        # ProfStack's domain and profiles are CloudFormation's, and so is their owner tag
        _deny("ProfStackDomainChangesOnlyByDeploy", PROFILE_CHANGES, [scope.profiles(), scope.domain()]),
    ]
    # a statement per OTHERS_PER_STATEMENT other users, so that a policy with many users can be split between them
    for start in range(0, len(others), OTHERS_PER_STATEMENT):
        group = others[start : start + OTHERS_PER_STATEMENT]
        studio = [arn for other in group for arn in (scope.any_profile(other), scope.any_apps(other))]
        sid = f"OtherUsersProfilesAndApps{start // OTHERS_PER_STATEMENT + 1}"
        statements.append(_deny(sid, STUDIO_PROFILE_ACTIONS, studio))
    own_profile = [scope.profile(user)] if user is not None else []
    owner_condition: dict[str, Any] = {"ArnLike": {"sagemaker:OwnerUserProfileArn": [scope.profiles()]}}
    if own_profile:
        owner_condition["ArnNotEquals"] = {"sagemaker:OwnerUserProfileArn": own_profile}
    statements.append(_deny("OtherUsersSpaces", SPACE_ACTIONS, scope.spaces_and_apps(), owner_condition))
    statements += _owner_tag_statements(scope, user)
    return statements


def boundary_document(scope: Scope, user: str) -> dict[str, Any]:
    """`user`'s permissions boundary: everything their identity policies allow, except what is another user's, and
    no way out of the boundary (no removing it, no new identity without it)."""
    statements: list[Statement] = [
        {"Sid": "EverythingTheIdentityAllows", "Effect": "Allow", "Action": "*", "Resource": "*"}
    ]
    statements += isolation_statements(scope, user)
    own = scope.boundary_arn(user)
    statements += [
        _deny("BoundaryStays", BOUNDARY_CHANGES, [scope._iam("role/*"), scope._iam("user/*")]),
        _deny(
            "NewIdentitiesCarryTheBoundary",
            ["iam:CreateRole", "iam:CreateUser"],
            [scope._iam("role/*"), scope._iam("user/*")],
            {"StringNotEquals": {"iam:PermissionsBoundary": own}},
        ),
        _deny(
            "OwnerTagOfIdentitiesIsTheAdministrators",
            ["iam:TagRole", "iam:TagUser", "iam:UntagRole", "iam:UntagUser", "sts:TagSession"],
            [scope._iam("role/*"), scope._iam("user/*")],
            {"ForAnyValue:StringEquals": {"aws:TagKeys": [scope.user_tag_key]}},
        ),
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _variable(scope: Scope) -> str:
    """The caller's own user, as an IAM policy variable with a default no user name equals."""
    return f"${{aws:PrincipalTag/{scope.user_tag_key}, '{UNTAGGED}'}}"


def scp_statements(
    scope: Scope,
    *,
    exempt: Sequence[str],
    bucket_arn: str | None = None,
    app_managers: Sequence[str] | None = None,
) -> list[Statement]:
    """Service control policy statements (all Deny; install them next to FullAWSAccess). `exempt`: ARN patterns of
    principals that administer identities and deploy ProfStack (the CloudFormation execution role, an identity
    administrator, break-glass) and ProfStack's own processing and platform roles. `app_managers` (default:
    `exempt`): those that start and stop every user's Studio apps (the platform roles, break-glass); the statements
    per user name only them, which keeps each short."""
    managers = list(exempt if app_managers is None else app_managers)
    key = scope.user_tag_key
    mine = _variable(scope)
    spare = {"ArnNotLike": {"aws:PrincipalArn": list(exempt)}}
    named = sorted({arn for arns in scope.principals.values() for arn in arns})
    statements = [
        _deny("ProfStackIdentitiesChangeOnlyByDeploy", IAM_CHANGES, scope.profstack_identities(), spare),
        # the owner tag of identities says who a person is: only identity administrators set it, in any way
        _deny(
            "OwnerTagOfIdentitiesIsTheAdministrators",
            [
                "iam:TagRole",
                "iam:TagUser",
                "iam:UntagRole",
                "iam:UntagUser",
                "iam:CreateRole",
                "iam:CreateUser",
                "sts:TagSession",
            ],
            [scope._iam("role/*"), scope._iam("user/*")],
            {"ForAnyValue:StringEquals": {"aws:TagKeys": [key]}, **spare},
        ),
        # a user's roles and profile, for everyone whose own tag is not that user's (principals named in the
        # config are judged by the statements per user below)
        _deny(
            "OtherUsersRoles",
            ["iam:PassRole", "sts:*"],
            [scope.users_roles()],
            {
                "StringNotEquals": {f"iam:ResourceTag/{key}": mine},
                "ArnNotLike": {"aws:PrincipalArn": [*exempt, *named]},
            },
        ),
        _deny(
            "OtherUsersProfiles",
            ["sagemaker:CreatePresignedDomainUrl", "sagemaker:UpdateUserProfile", "sagemaker:DeleteUserProfile"],
            [scope.profiles()],
            {
                "StringNotEquals": {f"aws:ResourceTag/{key}": mine},
                "ArnNotLike": {"aws:PrincipalArn": [*exempt, *named]},
            },
        ),
        _deny(
            "OtherUsersSpaces",
            SPACE_ACTIONS,
            scope.spaces_and_apps(),
            {
                "ArnLike": {"sagemaker:OwnerUserProfileArn": [scope.profiles()]},
                "ArnNotEquals": {"sagemaker:OwnerUserProfileArn": [scope.profile(mine)]},
                "ArnNotLike": {"aws:PrincipalArn": list(exempt)},
            },
        ),
    ]
    statements += _owner_tag_statements(scope, mine, spare=exempt)
    for user in scope.users:
        own = list(scope.principals.get(user, ()))
        # apps by ARN: nothing in a CreateApp request names the profile it is for
        statements.append(
            _deny(
                f"AppsOf{_sid(user)}",
                ["sagemaker:CreateApp", "sagemaker:DeleteApp"],
                [scope.apps(user)],
                {
                    "StringNotEquals": {f"aws:PrincipalTag/{key}": user},
                    "ArnNotLike": {"aws:PrincipalArn": [*managers, *own]},
                },
            )
        )
        if own:
            # the person's configured identities, whatever tag they carry, reach only their own roles and profile
            statements.append(
                _deny(
                    f"PrincipalsOf{_sid(user)}",
                    [
                        "iam:PassRole",
                        "sts:*",
                        "sagemaker:CreatePresignedDomainUrl",
                        "sagemaker:UpdateUserProfile",
                        "sagemaker:DeleteUserProfile",
                    ],
                    [scope.users_roles(), scope.profiles()],
                    {
                        "ArnLike": {"aws:PrincipalArn": own},
                        "StringNotEquals": {f"aws:ResourceTag/{key}": user},
                    },
                )
            )
    if bucket_arn is not None:
        statements.append(_deny("TraceBucketConfigurationOnlyByDeploy", BUCKET_CONFIGURATION, [bucket_arn], spare))
    return statements


def _sid(user: str) -> str:
    """A statement id for a user name: alphanumeric, and unique (names are lower-case, so "X" marks the dash)."""
    return "".join(c if c.isalnum() else "X" for c in user)


def document_chars(document: Mapping[str, Any]) -> int:
    """Characters IAM counts against a policy's size limit (JSON without whitespace)."""
    return len(json.dumps(document, separators=(",", ":")))


class PolicyTooLargeError(ValueError):
    """A statement alone exceeds the size limit of the document it must go into."""


def pack(
    statements: Sequence[Statement], limit: int, size: Callable[[Mapping[str, Any]], int] = document_chars
) -> list[dict[str, Any]]:
    """Statements into as few documents as fit under `limit` characters each (`size` measures one), in order."""
    documents: list[list[Statement]] = [[]]
    for statement in statements:
        trial = {"Version": "2012-10-17", "Statement": [*documents[-1], statement]}
        if documents[-1] and size(trial) > limit:
            documents.append([])
        single = {"Version": "2012-10-17", "Statement": [statement]}
        if size(single) > limit:
            raise PolicyTooLargeError(f"statement {statement.get('Sid')} alone exceeds {limit} characters")
        documents[-1].append(statement)
    return [{"Version": "2012-10-17", "Statement": list(d)} for d in documents if d]


def scp_documents(
    scope: Scope,
    *,
    exempt: Sequence[str],
    bucket_arn: str | None = None,
    app_managers: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """`scp_statements` packed into service control policies of at most SCP_MAX_CHARS characters each."""
    statements = scp_statements(scope, exempt=exempt, bucket_arn=bucket_arn, app_managers=app_managers)
    return pack(statements, SCP_MAX_CHARS)
