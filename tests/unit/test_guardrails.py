"""What an administrator must not grant (issue 42 item 3): the permissions boundary and the service control
policies of profstack/guardrails.py, judged by the IAM evaluator against identities that hold what ProfStack cannot
take away (`sagemaker:*`, `iam:PassRole` and `sts:AssumeRole` on `*`, `s3:*`, or everything)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from profstack.guardrails import (
    MANAGED_POLICY_MAX_CHARS,
    SCP_MAX_CHARS,
    PolicyTooLargeError,
    Scope,
    boundary_document,
    document_chars,
    pack,
    scp_documents,
)
from tests.infra.iam_eval import Principal, Request, decision

ACCOUNT = "123456789012"
DOMAIN = "d-guardrail001"
USERS = ("alice", "bob", "al", "a-l")
KEY = "profstack:user"
BEHAVIOUR = ("profstack:actions", "profstack:family", "profstack:live")
BOB_PRINCIPAL = f"arn:aws:iam::{ACCOUNT}:user/bob.smith"
SCOPE = Scope(
    prefix="profstack",
    users=USERS,
    user_tag_key=KEY,
    behaviour_tags=BEHAVIOUR,
    account=ACCOUNT,
    domain_id=DOMAIN,
    principals={"bob": (BOB_PRINCIPAL,)},
)
DEPLOYER = f"arn:aws:iam::{ACCOUNT}:role/cdk-hnb659fds-cfn-exec-role-{ACCOUNT}-us-east-1"
PLATFORM = f"arn:aws:iam::{ACCOUNT}:role/profstack/platform/AppProviderOnEventRole"
PROCESSING = f"arn:aws:iam::{ACCOUNT}:role/profstack/processing/LiveAnalysisAnalyserRole"
EXEMPT = (
    f"arn:aws:iam::{ACCOUNT}:role/cdk-*-cfn-exec-role-*",
    f"arn:aws:iam::{ACCOUNT}:role/profstack/processing/*",
    f"arn:aws:iam::{ACCOUNT}:role/profstack/platform/*",
)
BUCKET = "arn:aws:s3:::profstack-storage-tracestoretraces-abc"
EVERYTHING = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]
FULL_AWS_ACCESS = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]
ALICE = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/DataScientist-alice")
ADMIN = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/Admin")


def _role(user: str, name: str = "ExecutionRole") -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/profstack/users/{user}/User{user}{name}-1A2B"


def _profile(user: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:user-profile/{DOMAIN}/{user}"


def _app(user: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:app/{DOMAIN}/{user}/jupyterserver/default"


JOB = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/resnet-7"


def _attempts(owner: str) -> dict[str, Request]:
    """What one might try on `owner`'s things; each request carries what IAM would see about the resource."""
    # IAM gives a role's tags under both keys, the IAM-specific and the global one
    role_tag = {f"iam:ResourceTag/{KEY}": owner, f"aws:ResourceTag/{KEY}": owner}
    return {
        "pass the execution role": Request(
            "iam:PassRole", _role(owner), {**role_tag, "iam:PassedToService": "sagemaker.amazonaws.com"}
        ),
        "assume the report reader": Request("sts:AssumeRole", _role(owner, "ReportReaderRole"), role_tag),
        "change the execution role's policy": Request("iam:PutRolePolicy", _role(owner), role_tag),
        "open the Studio profile": Request(
            "sagemaker:CreatePresignedDomainUrl", _profile(owner), {f"aws:ResourceTag/{KEY}": owner}
        ),
        "create an app in the profile": Request("sagemaker:CreateApp", _app(owner)),
        "delete the profile's app": Request("sagemaker:DeleteApp", _app(owner)),
        "open an app in the private space": Request(
            "sagemaker:CreateApp",
            f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:app/{DOMAIN}/{owner}-space/jupyterlab/default",
            {"sagemaker:OwnerUserProfileArn": _profile(owner)},
        ),
        "opt the job into stops": Request(
            "sagemaker:AddTags", JOB, {f"aws:ResourceTag/{KEY}": owner, "aws:TagKeys": ["profstack:actions"]}
        ),
        "turn live analysis off": Request(
            "sagemaker:AddTags", JOB, {f"aws:ResourceTag/{KEY}": owner, "aws:TagKeys": ["profstack:live"]}
        ),
        "stop the job": Request("sagemaker:StopTrainingJob", JOB, {f"aws:ResourceTag/{KEY}": owner}),
        "create a job as them": Request(
            "sagemaker:CreateTrainingJob", JOB, {f"aws:RequestTag/{KEY}": owner, "aws:TagKeys": [KEY]}
        ),
    }


def _boundary(user: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = boundary_document(SCOPE, user)["Statement"]
    return statements


def _scps() -> list[list[dict[str, Any]]]:
    """One Organizations level: FullAWSAccess and ProfStack's deny-only policies (a request must pass them all)."""
    documents = scp_documents(SCOPE, exempt=EXEMPT, bucket_arn=BUCKET, app_managers=EXEMPT[2:])
    ours = [st for document in documents for st in document["Statement"]]
    return [[*FULL_AWS_ACCESS, *ours]]


def _tagged(user: str | None) -> dict[str, str]:
    return {f"aws:PrincipalTag/{KEY}": user} if user else {}


def _with(request: Request, context: dict[str, Any]) -> Request:
    return Request(request.action, request.resource, {**request.context, **context})


@pytest.mark.parametrize("owner", [u for u in USERS if u != "alice"])
def test_the_boundary_keeps_alice_out_of_every_other_users_things(owner: str) -> None:
    # GIVEN alice's identity with everything allowed, bounded by her ProfStack boundary
    for what, attempt in _attempts(owner).items():
        # THEN none of another user's things (bob, and al and a-l whose names look like hers)
        request = _with(attempt, _tagged("alice"))
        assert not decision(EVERYTHING, ALICE, request, boundary=_boundary("alice")), (owner, what)
        # AND without the boundary the same grants would reach them: the boundary is what stops her
        assert decision(EVERYTHING, ALICE, request), (owner, what)


def test_the_boundary_leaves_alice_her_own_things_and_everything_else() -> None:
    boundary = _boundary("alice")
    for what, request in _attempts("alice").items():
        if what == "change the execution role's policy":
            # her own ProfStack identities change only by deploy too
            assert not decision(EVERYTHING, ALICE, _with(request, _tagged("alice")), boundary=boundary)
            continue
        assert decision(EVERYTHING, ALICE, _with(request, _tagged("alice")), boundary=boundary), what
    # AND roles and services outside ProfStack are hers to use as her identity allows
    assert decision(
        EVERYTHING, ALICE, Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/TeamTraining"), boundary=boundary
    )
    assert decision(EVERYTHING, ALICE, Request("s3:GetObject", "arn:aws:s3:::team-data/x"), boundary=boundary)


def test_the_boundary_cannot_be_left() -> None:
    boundary = _boundary("alice")
    own = f"arn:aws:iam::{ACCOUNT}:policy/profstack-boundary-alice"
    new_role = f"arn:aws:iam::{ACCOUNT}:role/alice-helper"

    def can(action: str, resource: str, **context: Any) -> bool:
        return decision(
            EVERYTHING, ALICE, Request(action, resource, {**_tagged("alice"), **context}), boundary=boundary
        )

    # GIVEN alice with iam:* THEN she cannot remove or replace her boundary
    assert not can("iam:DeleteRolePermissionsBoundary", ALICE.arn)
    assert not can("iam:PutRolePermissionsBoundary", ALICE.arn, **{"iam:PermissionsBoundary": "arn:aws:iam::aws:x"})
    # AND a role she creates carries her boundary, or it is not created
    assert not can("iam:CreateRole", new_role)
    assert not can("iam:CreateRole", new_role, **{"iam:PermissionsBoundary": own.replace("alice", "bob")})
    assert can("iam:CreateRole", new_role, **{"iam:PermissionsBoundary": own})
    # AND not on a ProfStack path (a role on /profstack/users/bob/ tagged bob would read bob's data)
    assert not can("iam:CreateRole", _role("bob"), **{"iam:PermissionsBoundary": own})
    # AND she cannot give any identity, or a session, the user tag (role chaining with profstack:user=bob)
    assert not can("iam:TagRole", new_role, **{"aws:TagKeys": [KEY]})
    assert not can("sts:TagSession", f"arn:aws:iam::{ACCOUNT}:role/Chain", **{"aws:TagKeys": [KEY]})
    # AND she cannot edit the boundary policy itself
    assert not can("iam:CreatePolicyVersion", own)


@pytest.mark.parametrize(
    ("who", "tag"),
    [
        (ALICE, "alice"),  # another user, with everything allowed
        (ADMIN, None),  # an administrator without the user tag
        (Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/PowerUser"), None),
        (Principal(arn=f"arn:aws:iam::{ACCOUNT}:user/al"), "al"),  # a look-alike name
    ],
)
def test_the_scp_keeps_everyone_but_bob_out_of_bobs_things(who: Principal, tag: str | None) -> None:
    for what, attempt in _attempts("bob").items():
        request = _with(attempt, _tagged(tag))
        assert not decision(EVERYTHING, who, request, scps=_scps()), (who.arn, what)
        assert decision(EVERYTHING, who, request), (who.arn, what)  # what the SCP takes away


def test_the_scp_leaves_bob_and_the_platform_what_they_need() -> None:
    bob = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/DataScientist-bob")
    for what, request in _attempts("bob").items():
        allowed = decision(EVERYTHING, bob, _with(request, _tagged("bob")), scps=_scps())
        # bob's own ProfStack identities change only by deploy
        assert allowed is (what != "change the execution role's policy"), what
    # AND bob's configured principal (no tag) reaches bob's roles and profile, and no one else's
    named = Principal(arn=BOB_PRINCIPAL)
    for what in (
        "pass the execution role",
        "assume the report reader",
        "open the Studio profile",
        "create an app in the profile",
    ):
        assert decision(EVERYTHING, named, _attempts("bob")[what], scps=_scps()), what
        assert not decision(EVERYTHING, named, _attempts("alice")[what], scps=_scps()), what
    # AND CloudFormation deploys (passes bob's role to his profile, creates roles on ProfStack's paths)
    deployer = Principal(arn=DEPLOYER)
    assert decision(EVERYTHING, deployer, _attempts("bob")["pass the execution role"], scps=_scps())
    assert decision(EVERYTHING, deployer, Request("iam:CreateRole", _role("bob"), {"aws:TagKeys": [KEY]}), scps=_scps())
    # AND the platform roles start and stop every user's TensorBoard; the actions role stops a consenting job
    for action in ("sagemaker:CreateApp", "sagemaker:DeleteApp"):
        assert decision(EVERYTHING, Principal(arn=PLATFORM), Request(action, _app("bob")), scps=_scps())
    assert decision(EVERYTHING, Principal(arn=PROCESSING), _attempts("bob")["stop the job"], scps=_scps())


def test_the_scp_protects_identities_tags_and_the_trace_bucket() -> None:
    def admin(action: str, resource: str, **context: Any) -> bool:
        return decision(EVERYTHING, ADMIN, Request(action, resource, context), scps=_scps())

    # GIVEN an administrator with everything allowed THEN no role on ProfStack's paths, no edit of its policies
    assert not admin("iam:CreateRole", _role("bob"))
    assert not admin("iam:AttachRolePolicy", _role("bob"))
    assert not admin("iam:CreatePolicyVersion", f"arn:aws:iam::{ACCOUNT}:policy/profstack-tensorboard-Access-1")
    # AND nobody's identity or session gets the user tag but from an exempt identity administrator
    assert not admin("iam:TagUser", f"arn:aws:iam::{ACCOUNT}:user/mallory", **{"aws:TagKeys": [KEY]})
    assert not admin("sts:TagSession", f"arn:aws:iam::{ACCOUNT}:role/Chain", **{"aws:TagKeys": ["team", KEY]})
    assert admin("sts:TagSession", f"arn:aws:iam::{ACCOUNT}:role/Chain", **{"aws:TagKeys": ["team"]})
    # AND the trace bucket's policy, replication, inventory and lifecycle change only by deploy
    for action in (
        "s3:PutBucketPolicy",
        "s3:PutReplicationConfiguration",
        "s3:PutInventoryConfiguration",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketNotification",
    ):
        assert not admin(action, BUCKET), action
        assert decision(EVERYTHING, Principal(arn=DEPLOYER), Request(action, BUCKET), scps=_scps())
    assert admin("s3:PutBucketPolicy", "arn:aws:s3:::another-bucket")


def test_every_document_fits_iams_limits_and_splits_when_users_grow() -> None:
    for user in USERS:
        assert document_chars(boundary_document(SCOPE, user)) <= MANAGED_POLICY_MAX_CHARS
    many = Scope(
        prefix="profstack",
        users=tuple(f"user-{i:03d}" for i in range(60)),
        user_tag_key=KEY,
        behaviour_tags=BEHAVIOUR,
        account=ACCOUNT,
        domain_id=DOMAIN,
    )
    documents = scp_documents(many, exempt=EXEMPT)
    assert len(documents) > 1
    assert all(document_chars(d) <= SCP_MAX_CHARS for d in documents)
    # AND no statement is lost or repeated by the split
    sids = [st["Sid"] for d in documents for st in d["Statement"]]
    assert len(sids) == len(set(sids))
    assert {f"AppsOfuserX{i:03d}" for i in range(60)} <= set(sids)


def test_a_statement_larger_than_the_limit_is_refused_not_cut() -> None:
    huge = {"Sid": "Huge", "Effect": "Deny", "Action": "s3:*", "Resource": ["arn:aws:s3:::x" * 1000]}
    with pytest.raises(PolicyTooLargeError):
        pack([huge], SCP_MAX_CHARS)


NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,14}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(me=NAMES, other=NAMES)
def test_any_two_user_names_stay_apart_under_the_boundary(me: str, other: str) -> None:
    # GIVEN two users whose names may be prefixes or look-alikes of each other ("al", "alice", "a-l", "al-")
    assume(me != other)
    scope = Scope(
        prefix="profstack",
        users=(me, other),
        user_tag_key=KEY,
        behaviour_tags=BEHAVIOUR,
        account=ACCOUNT,
        domain_id=DOMAIN,
    )
    boundary: list[dict[str, Any]] = boundary_document(scope, me)["Statement"]
    caller = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/person-{me}")
    for what in (
        "pass the execution role",
        "open the Studio profile",
        "create an app in the profile",
        "open an app in the private space",
        "stop the job",
    ):
        # THEN with everything allowed, the boundary keeps `me` out of `other`'s things and in its own
        theirs = _with(_attempts(other)[what], _tagged(me))
        mine = _with(_attempts(me)[what], _tagged(me))
        assert not decision(EVERYTHING, caller, theirs, boundary=boundary), (me, other, what)
        assert decision(EVERYTHING, caller, mine, boundary=boundary), (me, other, what)
