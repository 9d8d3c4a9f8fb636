"""Isolation between users, proven on the synthesized IAM policies with a small evaluator.

Users alice, bob, al (a prefix of alice's name, to catch prefix confusion) and a-l (the same
name once sanitized into a CloudFormation logical id). Each user's
execution role (what their TensorBoard runs as) and access policy (attached to the person)
must grant their own data and app, and nothing of anyone else's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.iam_eval import Request, Resolver, UnsupportedPolicyError, is_allowed, principal_statements
from tests.infra.tensorboard_synth import Synth, config_with, synth_tensorboard

DOMAIN = "d-isolation0001"
BUCKET_ARN = "arn:aws:s3:::profstack-traces"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/data-key"
OTHER_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/messaging-key"
USERS = ("alice", "bob", "al", "a-l")  # prefixes and look-alikes of each other
PROFILE_ARN = "arn:aws:sagemaker:us-east-1:123456789012:user-profile/{domain}/{user}"
APP_ARN = "arn:aws:sagemaker:us-east-1:123456789012:app/{domain}/{user}/tensorboard/default"
JOB_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}"


@pytest.fixture(scope="module")
def synth() -> Synth:
    users = [{"name": u, "email": f"{u}@example.com"} for u in USERS]
    return synth_tensorboard(config_with(users=users))


@pytest.fixture(scope="module")
def policies(synth: Synth) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """user -> {"role": statements, "person": statements}."""
    domain_id = synth.logical_id(synth.stack.domain.resource)
    resolve = Resolver(
        get_att={f"{domain_id}.DomainId": DOMAIN},
        imports={r"TraceStoreTraces.*Arn": BUCKET_ARN, r"DataKey.*Arn": KEY_ARN},
    )
    by_principal = principal_statements(synth.template.to_json(), resolve)
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for user in USERS:
        workspace = synth.stack.workspaces[user]
        found[user] = {
            "role": by_principal[synth.logical_id(workspace.role)],
            "reader": by_principal[synth.logical_id(workspace.reader_role)],
            "person": by_principal[synth.logical_id(workspace.access_policy)],
        }
    return found


def _get(user: str, key: str) -> Request:
    return Request("s3:GetObject", f"{BUCKET_ARN}/{key}")


def _list(prefix: str | None) -> Request:
    return Request("s3:ListBucket", BUCKET_ARN, {"s3:prefix": prefix} if prefix is not None else {})


@pytest.mark.parametrize("owner", USERS)
def test_execution_role_reads_only_its_own_prefixes(policies: Any, owner: str) -> None:
    # GIVEN each user's execution role WHEN it reads objects THEN its own three prefixes only
    role = policies[owner]["role"]
    for reader_prefix in ("traces", "tensorboard", "reports"):
        for other in USERS:
            request = _get(owner, f"{reader_prefix}/{other}/job-1/worker0.1.pt.trace.json")
            assert is_allowed(role, request) is (other == owner), (owner, request)
            listing = _list(f"{reader_prefix}/{other}/job-1/")
            assert is_allowed(role, listing) is (other == owner), (owner, listing)


def test_prefix_of_another_name_grants_nothing(policies: Any) -> None:
    # GIVEN users 'al' and 'alice' WHEN al reads alice's keys THEN denied (prefixes end with '/')
    assert not is_allowed(policies["al"]["role"], _get("al", "traces/alice/job/t.pt.trace.json"))
    assert not is_allowed(policies["al"]["role"], _list("tensorboard/alice/"))
    assert not is_allowed(policies["al"]["role"], _list("tensorboard/al"))  # would list 'alice/' too


def test_execution_role_cannot_list_the_bucket_root_and_writes_only_its_own_trace_folders(policies: Any) -> None:
    role = policies["alice"]["role"]
    assert not is_allowed(role, _list(None))
    assert not is_allowed(role, _list(""))
    # a job that runs as alice's role writes her traces and TensorBoard logs (issue 42: by default nobody else may)
    assert is_allowed(role, Request("s3:PutObject", f"{BUCKET_ARN}/traces/alice/job-1/x.pt.trace.json"))
    assert is_allowed(role, Request("s3:PutObject", f"{BUCKET_ARN}/tensorboard/alice/job-1/events.out"))
    assert is_allowed(role, Request("s3:AbortMultipartUpload", f"{BUCKET_ARN}/traces/alice/job-1/x"))
    # AND nothing else: no report, no other user's folder (al is a prefix of alice), no delete
    assert not is_allowed(role, Request("s3:PutObject", f"{BUCKET_ARN}/reports/alice/x"))
    assert not is_allowed(role, Request("s3:PutObject", f"{BUCKET_ARN}/traces/al/x"))
    assert not is_allowed(role, Request("s3:PutObject", f"{BUCKET_ARN}/traces/alicex/x"))
    assert not is_allowed(role, Request("s3:DeleteObject", f"{BUCKET_ARN}/traces/alice/x"))
    assert not is_allowed(role, Request("s3:DeleteObject", f"{BUCKET_ARN}/reports/alice/x"))


def test_execution_role_decrypts_with_the_trace_key_only(policies: Any) -> None:
    role = policies["alice"]["role"]
    via_s3 = {"kms:ViaService": "s3.us-east-1.amazonaws.com", "kms:EncryptionContext:aws:s3:arn": BUCKET_ARN}
    assert is_allowed(role, Request("kms:Decrypt", KEY_ARN, via_s3))
    assert not is_allowed(role, Request("kms:Decrypt", OTHER_KEY_ARN, via_s3))
    assert not is_allowed(role, Request("kms:Encrypt", KEY_ARN, via_s3))
    # AND only as S3 decrypts the trace bucket's objects: not a ciphertext handed to KMS directly, not another
    # bucket's objects under the same key (#32 item 9)
    assert not is_allowed(role, Request("kms:Decrypt", KEY_ARN))
    other_bucket = {**via_s3, "kms:EncryptionContext:aws:s3:arn": "arn:aws:s3:::other-bucket/x"}
    assert not is_allowed(role, Request("kms:Decrypt", KEY_ARN, other_bucket))
    assert is_allowed(
        role, Request("kms:Decrypt", KEY_ARN, {**via_s3, "kms:EncryptionContext:aws:s3:arn": f"{BUCKET_ARN}/k"})
    )


def test_describe_training_job_only_for_jobs_tagged_with_the_user(policies: Any) -> None:
    role = policies["alice"]["role"]
    job = JOB_ARN.format(job="resnet-1")
    tagged = {"aws:ResourceTag/profstack:user": "alice"}
    assert is_allowed(role, Request("sagemaker:DescribeTrainingJob", job, tagged))
    assert not is_allowed(
        role, Request("sagemaker:DescribeTrainingJob", job, {"aws:ResourceTag/profstack:user": "bob"})
    )
    assert not is_allowed(role, Request("sagemaker:DescribeTrainingJob", job))  # untagged job
    assert not is_allowed(role, Request("sagemaker:StopTrainingJob", job, tagged))


@pytest.mark.parametrize("person", USERS)
def test_presigned_url_only_for_the_own_profile(policies: Any, person: str) -> None:
    # GIVEN a person's access policy WHEN they ask for a presigned URL THEN only for their own profile
    statements = policies[person]["person"]
    for profile in USERS:
        request = Request("sagemaker:CreatePresignedDomainUrl", PROFILE_ARN.format(domain=DOMAIN, user=profile))
        assert is_allowed(statements, request) is (profile == person), (person, profile)


def test_start_and_stop_only_the_own_app(policies: Any) -> None:
    alice = policies["alice"]["person"]
    for action in ("sagemaker:CreateApp", "sagemaker:DeleteApp", "sagemaker:DescribeApp"):
        assert is_allowed(alice, Request(action, APP_ARN.format(domain=DOMAIN, user="alice")))
        assert not is_allowed(alice, Request(action, APP_ARN.format(domain=DOMAIN, user="bob")))
    # a Jupyter app in alice's own profile is not a TensorBoard app
    jupyter = APP_ARN.format(domain=DOMAIN, user="alice").replace("tensorboard/default", "jupyterserver/default")
    assert not is_allowed(alice, Request("sagemaker:CreateApp", jupyter))
    # another domain's profile with the same name is not alice's
    other_domain = PROFILE_ARN.format(domain="d-otherdomain1", user="alice")
    assert not is_allowed(alice, Request("sagemaker:CreatePresignedDomainUrl", other_domain))


def test_execution_role_cannot_open_anyones_studio(policies: Any) -> None:
    role = policies["alice"]["role"]
    profile = PROFILE_ARN.format(domain=DOMAIN, user="alice")
    assert not is_allowed(role, Request("sagemaker:CreatePresignedDomainUrl", profile))


# The evaluator itself must be able to say no, and must refuse what it does not model.


def test_evaluator_explicit_deny_wins_and_conditions_must_hold() -> None:
    allow = {"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/*"}
    deny = {"Effect": "Deny", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/secret/*"}
    assert is_allowed([allow, deny], Request("s3:GetObject", "arn:aws:s3:::b/public/x"))
    assert not is_allowed([allow, deny], Request("s3:GetObject", "arn:aws:s3:::b/secret/x"))
    assert not is_allowed([allow], Request("s3:PutObject", "arn:aws:s3:::b/x"))
    conditional = {**allow, "Condition": {"StringEquals": {"aws:ResourceTag/team": "a"}}}
    assert not is_allowed([conditional], Request("s3:GetObject", "arn:aws:s3:::b/x", {"aws:ResourceTag/team": "b"}))
    unknown = {**allow, "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}
    with pytest.raises(UnsupportedPolicyError):
        is_allowed([unknown], Request("s3:GetObject", "arn:aws:s3:::b/x"))


@pytest.mark.parametrize("owner", USERS)
def test_the_report_reader_role_lists_and_reads_only_its_users_reports(policies: Any, owner: str) -> None:
    # GIVEN each user's report reader role (profstack reports --reader, from the person's own machine)
    reader = policies[owner]["reader"]
    for other in USERS:
        # THEN it reads and lists reports/<owner>/ only: not another user's (al is a prefix of alice)
        assert is_allowed(reader, _get(owner, f"reports/{other}/job-1/report.html")) is (other == owner)
        assert is_allowed(reader, _list(f"reports/{other}/")) is (other == owner)
        # AND none of the traces or TensorBoard data, its owner's included
        for data in ("traces", "tensorboard"):
            assert not is_allowed(reader, _get(owner, f"{data}/{other}/job-1/worker0.1.pt.trace.json"))
            assert not is_allowed(reader, _list(f"{data}/{other}/"))
    # AND it writes nothing and lists nothing outside its prefix
    assert not is_allowed(reader, Request("s3:PutObject", f"{BUCKET_ARN}/reports/{owner}/job-1/report.html"))
    assert not is_allowed(reader, _list(None))
    assert not is_allowed(reader, _list("reports/"))


@pytest.mark.parametrize("person", USERS)
def test_a_person_may_assume_only_their_own_report_reader(synth: Synth, person: str) -> None:
    from tests.infra.iam_eval import Principal, can_assume, trust_statements

    template = synth.template.to_json()
    resources = template["Resources"]
    workspace = synth.stack.workspaces[person]
    policy = resources[synth.logical_id(workspace.access_policy)]["Properties"]["PolicyDocument"]["Statement"]
    (assume,) = [st for st in policy if "sts:AssumeRole" in str(st.get("Action")) and st["Effect"] == "Allow"]
    readers = {u: synth.logical_id(synth.stack.workspaces[u].reader_role) for u in USERS}
    # THEN the person's access policy lets them assume their own reader role and no other role
    assert assume["Resource"] == {"Fn::GetAtt": [readers[person], "Arn"]}
    role = resources[readers[person]]["Properties"]
    # AND the role trusts the person, not the account (issue 42 item 1): this account's principals carrying the
    # principal tag of that user; an identity still needs sts:AssumeRole on it
    trust = trust_statements(template, readers[person], Resolver())
    assume_all = [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]
    arn = f"arn:aws:iam::123456789012:role{role['Path']}reader"
    caller = Principal(arn="arn:aws:iam::123456789012:role/SomeoneWithAssumeRoleOnStar")
    for other in USERS:
        tagged = {"aws:PrincipalTag/profstack:user": other}
        assert can_assume(assume_all, trust, caller, arn, context=tagged) is (other == person), (person, other)
    assert not can_assume(assume_all, trust, caller, arn)
    # AND on the user's path, below it in reader/ (where the bucket policy lets it write nothing)
    assert role["Path"] == f"/profstack/users/{person}/reader/"
    assert role["MaxSessionDuration"] == 3600
    # AND the CLI finds it by a stable export name
    outputs = template["Outputs"]
    exports = [o["Export"]["Name"] for o in outputs.values() if "Export" in o]
    assert f"profstack-report-reader-{person}" in exports


def test_a_users_configured_principals_may_assume_the_reader_without_the_tag() -> None:
    from tests.infra.iam_eval import Principal, can_assume, trust_statements

    # GIVEN bob's config names his own IAM user as his principal (users[].principals)
    bob_user = "arn:aws:iam::123456789012:user/bob.smith"
    users = [
        {"name": "alice", "email": "alice@example.com"},
        {"name": "bob", "email": "bob@example.com", "principals": [bob_user]},
    ]
    synth = synth_tensorboard(config_with(users=users))
    template = synth.template.to_json()
    assume_all = [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]
    for user in ("alice", "bob"):
        reader = synth.logical_id(synth.stack.workspaces[user].reader_role)
        trust = trust_statements(template, reader, Resolver())
        arn = f"arn:aws:iam::123456789012:role/profstack/users/{user}/reader/r"
        # THEN that identity assumes bob's reader, untagged, and not alice's; another identity does neither
        assert can_assume(assume_all, trust, Principal(arn=bob_user), arn) is (user == "bob")
        other = Principal(arn="arn:aws:iam::123456789012:user/bob.smith2")
        assert not can_assume(assume_all, trust, other, arn)
