"""The trace bucket's policy backstops the per-user boundary (issue 11, item 2), proven on the synthesized
templates with the isolation evaluator (tests/infra/iam_eval.py).

Each user's traces/, tensorboard/ and reports/ prefixes are readable only by that user's execution role,
the processing roles and the configured break-glass principal, whatever identity policies say; reports are
written only by the processing roles and break-glass. Users alice, bob, al (a prefix of alice) and a-l.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra.conftest import SynthesizedApp, synthesize
from tests.infra.iam_eval import Principal, Request, Resolver, principal_statements, same_account_decision
from tests.infra.tensorboard_synth import config_with

ACCOUNT = "123456789012"
BUCKET_ARN = "arn:aws:s3:::profstack-traces"
KEY_ARN = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/data-key"
USERS = ("alice", "bob", "al", "a-l")
BREAK_GLASS = f"arn:aws:iam::{ACCOUNT}:role/security/IncidentResponse"
WRITER = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/Admin"
TAG = "aws:PrincipalTag/profstack:user"
S3_EVERYTHING = [{"Effect": "Allow", "Action": "s3:*", "Resource": ["*"]}]
PREFIXES = ("traces", "tensorboard", "reports")


@dataclass(frozen=True)
class Role:
    arn: str
    tags: dict[str, str]
    statements: list[dict[str, Any]]

    def principal(self) -> Principal:
        return Principal(arn=self.arn)


@dataclass(frozen=True)
class World:
    bucket_policy: list[dict[str, Any]]
    roles: dict[str, Role]  # logical id -> role


def _world(app: SynthesizedApp, prefix: str = "profstack") -> World:
    storage = app.templates[f"{prefix}-storage"]
    (bucket_id,) = [
        k
        for k, r in storage["Resources"].items()
        if r["Type"] == "AWS::S3::Bucket" and k.startswith("TraceStoreTraces")
    ]
    (policy,) = [
        r["Properties"]
        for r in storage["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    bucket_policy = Resolver(get_att={f"{bucket_id}.Arn": BUCKET_ARN})(policy["PolicyDocument"])["Statement"]
    imports = {r"TraceStoreTraces.*Arn": BUCKET_ARN, r"TraceStoreTraces": "profstack-traces", r"DataKey.*Arn": KEY_ARN}
    imports[r"."] = "arn:aws:other:::unrelated"  # queues, topics, the table: not what this test is about
    roles: dict[str, Role] = {}
    for name in (f"{prefix}-tensorboard", f"{prefix}-processing"):
        template = app.templates[name]
        statements = principal_statements(template, Resolver(imports=imports, get_att={}))
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::IAM::Role":
                continue
            props = resource["Properties"]
            path = props.get("Path", "/")
            tags = {t["Key"]: t["Value"] for t in props.get("Tags", [])}
            roles[logical_id] = Role(f"arn:aws:iam::{ACCOUNT}:role{path}{logical_id}", tags, statements[logical_id])
    return World(bucket_policy, roles)


@pytest.fixture(scope="module")
def world() -> World:
    config = config_with(
        users=[{"name": u, "email": f"{u}@example.com"} for u in USERS],
        storage={"break_glass_principal_arns": [BREAK_GLASS], "trace_writer_principal_arns": [WRITER]},
    )
    return _world(synthesize(config))  # cdk-nag on: synth fails on any unacknowledged finding


def _can(world: World, who: Principal, identity: list[dict[str, Any]], action: str, key: str, **tags: str) -> bool:
    context = {"aws:SecureTransport": "true", **{f"aws:PrincipalTag/{k}": v for k, v in tags.items()}}
    return same_account_decision(identity, world.bucket_policy, who, Request(action, f"{BUCKET_ARN}/{key}", context))


def _user_role(world: World, user: str, kind: str = "ExecutionRole") -> Role:
    """A user's role by kind: their SageMaker execution role, or their report reader role (ReportReaderRole)."""
    (role,) = [r for r in world.roles.values() if r.tags.get("profstack:user") == user and kind in r.arn]
    return role


def _key(prefix: str, user: str) -> str:
    return f"{prefix}/{user}/job-1/algo-1_1.1.pt.trace.json.gz"


def _processing_roles(world: World) -> dict[str, Role]:
    return {k: r for k, r in world.roles.items() if "/profstack/processing/" in r.arn}


@pytest.mark.parametrize("owner", USERS)
def test_a_users_role_reads_only_its_own_prefixes_even_with_s3_star(world: World, owner: str) -> None:
    # GIVEN a user's execution role WHEN an identity policy were to allow s3:* on everything
    role = _user_role(world, owner)
    identity = [*role.statements, *S3_EVERYTHING]
    for prefix in PREFIXES:
        for other in USERS:
            # THEN it reads its own prefixes and no one else's (al vs alice, a-l vs al included)
            assert _can(world, role.principal(), identity, "s3:GetObject", _key(prefix, other), **role.tags) is (
                other == owner
            ), (owner, prefix, other)
            assert not (
                other != owner
                and _can(world, role.principal(), identity, "s3:PutObject", _key(prefix, other), **role.tags)
            )
    # AND it writes no report, not even its own, and touches nothing outside its prefixes
    assert not _can(world, role.principal(), identity, "s3:PutObject", _key("reports", owner), **role.tags)
    assert not _can(world, role.principal(), identity, "s3:GetObject", "output/job-1/output/model.tar.gz", **role.tags)


def test_with_its_own_identity_policy_a_users_role_reads_its_data(world: World) -> None:
    # GIVEN alice's role as deployed (no s3:*) THEN the backstop does not get in the way of its own reads
    role = _user_role(world, "alice")
    for prefix in PREFIXES:
        assert _can(world, role.principal(), role.statements, "s3:GetObject", _key(prefix, "alice"), **role.tags)
        assert not _can(world, role.principal(), role.statements, "s3:GetObject", _key(prefix, "bob"), **role.tags)


def test_retagging_a_users_role_only_narrows_it(world: World) -> None:
    # GIVEN alice's role re-tagged as bob (or with the tag removed) WHEN it reads with s3:*
    role = _user_role(world, "alice")
    identity = [*role.statements, *S3_EVERYTHING]
    for tags in ({"profstack:user": "bob"}, {}):
        for owner in ("alice", "bob"):
            # THEN neither alice's nor bob's data: the path (alice) and the tag must agree
            assert not _can(world, role.principal(), identity, "s3:GetObject", _key("traces", owner), **tags)


def test_processing_roles_read_every_users_traces_and_write_their_reports(world: World) -> None:
    roles = _processing_roles(world)
    # processor, analyze-file, aggregate, fan-out state machine, Processing job, and the trace reader the
    # processor assumes per job (its path is the processing path, or the backstop would deny its reads), and
    # (issue 36) the live analyser, which writes in-progress reports
    assert len(roles) == 7
    processor = next(r for k, r in roles.items() if k.startswith("TraceProcessorRole"))
    reader = next(r for k, r in roles.items() if k.startswith("TraceProcessorTraceReaderRole"))
    for user in USERS:
        # GIVEN the trace reader's identity policy THEN it reads any user's traces (the per-job session
        # policy narrows it to the owner's folders) AND the processor writes their report
        assert _can(world, reader.principal(), reader.statements, "s3:GetObject", _key("traces", user))
        assert _can(world, reader.principal(), reader.statements, "s3:GetObject", _key("tensorboard", user))
        report = f"reports/{user}/job-1/summary.json"
        assert _can(world, processor.principal(), processor.statements, "s3:PutObject", report)
        # AND so does every processing role that an identity policy allows it (the backstop does not deny them)
        for role in roles.values():
            for prefix in PREFIXES:
                assert _can(world, role.principal(), S3_EVERYTHING, "s3:GetObject", _key(prefix, user))
            assert _can(world, role.principal(), S3_EVERYTHING, "s3:PutObject", report)


def test_break_glass_reads_and_writes_everything(world: World) -> None:
    who = Principal(arn=BREAK_GLASS)
    for user in USERS:
        for prefix in PREFIXES:
            assert _can(world, who, S3_EVERYTHING, "s3:GetObject", _key(prefix, user))
            assert _can(world, who, S3_EVERYTHING, "s3:PutObject", _key(prefix, user))
            assert _can(world, who, S3_EVERYTHING, "s3:DeleteObject", _key(prefix, user))


@pytest.mark.parametrize(
    "arn",
    [
        ADMIN,  # an administrator with s3:* in the same account
        f"arn:aws:iam::{ACCOUNT}:role/profstack/processing-evil/x",  # looks like the processing path
        f"arn:aws:iam::{ACCOUNT}:role/profstack/users/alice/impostor",  # alice's path, but no tag
        "arn:aws:iam::210987654321:role/profstack/processing/x",  # the processing path in another account
        f"arn:aws:iam::{ACCOUNT}:user/alice",  # an IAM user named like a ProfStack user
        f"arn:aws:iam::{ACCOUNT}:role/other/profstack/processing/x",  # path suffix, not prefix
    ],
)
def test_everyone_else_is_denied_even_with_s3_star(world: World, arn: str) -> None:
    who = Principal(arn=arn, account=arn.split(":")[4])
    for user in USERS:
        for prefix in PREFIXES:
            assert not _can(world, who, S3_EVERYTHING, "s3:GetObject", _key(prefix, user)), (arn, prefix, user)
            assert not _can(world, who, S3_EVERYTHING, "s3:GetObjectVersion", _key(prefix, user))
        assert not _can(world, who, S3_EVERYTHING, "s3:PutObject", f"reports/{user}/job-1/report.html")
        assert not _can(world, who, S3_EVERYTHING, "s3:DeleteObject", f"reports/{user}/job-1/report.html")


def test_configured_trace_writers_alone_may_write_traces(world: World) -> None:
    # GIVEN storage.trace_writer_principal_arns names the training role THEN it writes traces and TensorBoard logs
    writer = Principal(arn=WRITER)
    for prefix in ("traces", "tensorboard"):
        assert _can(world, writer, S3_EVERYTHING, "s3:PutObject", _key(prefix, "alice"))
        # AND it still cannot read them back, nor write reports
        assert not _can(world, writer, S3_EVERYTHING, "s3:GetObject", _key(prefix, "alice"))
        # AND an administrator cannot write them
        assert not _can(world, Principal(arn=ADMIN), S3_EVERYTHING, "s3:PutObject", _key(prefix, "alice"))
    assert not _can(world, writer, S3_EVERYTHING, "s3:PutObject", "reports/alice/job-1/report.html")
    # AND data outside the user prefixes is not governed by the backstop
    assert _can(world, Principal(arn=ADMIN), S3_EVERYTHING, "s3:GetObject", "output/job-1/output/model.tar.gz")


def test_by_default_only_the_owners_roles_and_the_pipeline_write_trace_folders(synthesized: SynthesizedApp) -> None:
    # GIVEN the example config (no trace writers) (issue 42 item 6: before, any writer outside ProfStack could plant
    # traces and TensorBoard logs in bob's folders, which the pipeline reads as bob's evidence)
    world = _world(synthesized)
    alice = _user_role(world, "alice")
    processor = next(r for k, r in _processing_roles(world).items() if k.startswith("TraceProcessorRole"))
    for prefix in ("traces", "tensorboard"):
        # THEN a training role outside ProfStack (and an administrator) with s3:* writes nothing there
        for who in (Principal(arn=WRITER), Principal(arn=ADMIN)):
            for action in ("s3:PutObject", "s3:DeleteObject", "s3:ReplicateObject", "s3:AbortMultipartUpload"):
                assert not _can(world, who, S3_EVERYTHING, action, _key(prefix, "alice")), (who.arn, action)
        # AND alice's own execution role (a job that runs as it) and the pipeline do
        assert _can(world, alice.principal(), alice.statements, "s3:PutObject", _key(prefix, "alice"), **alice.tags)
        assert _can(world, processor.principal(), S3_EVERYTHING, "s3:PutObject", _key(prefix, "alice"))
        # AND alice's role still writes nothing of bob's
        assert not _can(
            world,
            alice.principal(),
            [*alice.statements, *S3_EVERYTHING],
            "s3:PutObject",
            _key(prefix, "bob"),
            **alice.tags,
        )
    # AND the bucket's other prefixes (a job's own output) are left to identity policies
    assert _can(world, Principal(arn=WRITER), S3_EVERYTHING, "s3:PutObject", "output/job-1/model.tar.gz")


def test_without_the_backstop_an_identity_grant_would_cross_users(world: World) -> None:
    # GIVEN only the SSL statement of the bucket policy (what was deployed before) THEN alice's role with s3:*
    # reads bob's traces: the tests above can fail
    role = _user_role(world, "alice")
    ssl_only = [s for s in world.bucket_policy if "aws:SecureTransport" in str(s.get("Condition"))]
    context = {"aws:SecureTransport": "true", TAG: "alice"}
    request = Request("s3:GetObject", f"{BUCKET_ARN}/{_key('traces', 'bob')}", context)
    assert same_account_decision([*role.statements, *S3_EVERYTHING], ssl_only, role.principal(), request)


# --- history rows and Athena results (issue 16's history/ and athena-results/, all users in one prefix) -------

HISTORY_KEYS = (
    "history/jobs/dt=2026-12-01/user=bob/bob-job.jsonl",
    "history/kernels/dt=2026-12-01/user=alice/alice-job.jsonl",
    "history/ranks/dt=2026-12-01/user=_unowned/job-1.jsonl",
)
RESULTS_KEY = "athena-results/0b7f4e5c-query.csv"


def _analyst(world: World) -> Role:
    (role,) = [r for r in world.roles.values() if "/profstack/analysts/" in r.arn]
    return role


@pytest.mark.parametrize(
    "arn",
    [
        ADMIN,  # an administrator (or a training job's role) with s3:* in the same account
        WRITER,  # the configured trace writer: it writes traces, not history
        f"arn:aws:iam::{ACCOUNT}:role/profstack/analysts-evil/x",  # looks like the analysts' path
        f"arn:aws:iam::{ACCOUNT}:role/other/profstack/analysts/x",  # path suffix, not prefix
        "arn:aws:iam::210987654321:role/profstack/analysts/x",  # the analysts' path in another account
    ],
)
def test_history_rows_and_query_results_are_closed_to_everyone_else_even_with_s3_star(world: World, arn: str) -> None:
    # GIVEN a principal outside ProfStack whose identity policy allows s3:* on everything
    who = Principal(arn=arn, account=arn.split(":")[4])
    for key in HISTORY_KEYS:
        # THEN it reads no user's history rows (job names, costs, kernel names) AND plants none: a row under
        # user=bob would be read as bob's family baseline and put a Regression finding into bob's report
        for action in ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject"):
            assert not _can(world, who, S3_EVERYTHING, action, key), (arn, action, key)
    # AND it reads or replaces no Athena result (every user's rows, as the analyst queried them)
    for action in ("s3:GetObject", "s3:PutObject"):
        assert not _can(world, who, S3_EVERYTHING, action, RESULTS_KEY), (arn, action)


def test_a_users_role_touches_no_history_not_even_its_own_rows(world: World) -> None:
    # GIVEN alice's execution role with s3:* THEN not even the rows of her own partition (all users share history/)
    role = _user_role(world, "alice")
    identity = [*role.statements, *S3_EVERYTHING]
    for key in (*HISTORY_KEYS, "history/jobs/dt=2026-12-01/user=alice/alice-job.jsonl", RESULTS_KEY):
        for action in ("s3:GetObject", "s3:PutObject"):
            assert not _can(world, role.principal(), identity, action, key, **role.tags), (action, key)


def test_processing_writes_history_and_the_analyst_role_queries_it(world: World) -> None:
    roles = _processing_roles(world)
    processor = next(r for k, r in roles.items() if k.startswith("TraceProcessorRole"))
    analyst = _analyst(world)
    for key in HISTORY_KEYS:
        # GIVEN the roles as deployed THEN the processor writes the rows and reads its family's baseline
        assert _can(world, processor.principal(), processor.statements, "s3:PutObject", key)
        assert _can(world, processor.principal(), processor.statements, "s3:GetObject", key)
        # AND the analyst role reads every row (Athena reads with the caller's credentials) but writes none
        assert _can(world, analyst.principal(), analyst.statements, "s3:GetObject", key)
        assert not _can(world, analyst.principal(), [*analyst.statements, *S3_EVERYTHING], "s3:PutObject", key)
        # AND break-glass keeps both
        assert _can(world, Principal(arn=BREAK_GLASS), S3_EVERYTHING, "s3:GetObject", key)
        assert _can(world, Principal(arn=BREAK_GLASS), S3_EVERYTHING, "s3:PutObject", key)
    # AND the analyst role writes and reads its query results; the processing roles have no business there
    assert _can(world, analyst.principal(), analyst.statements, "s3:PutObject", RESULTS_KEY)
    assert _can(world, analyst.principal(), analyst.statements, "s3:GetObject", RESULTS_KEY)
    assert not _can(world, processor.principal(), S3_EVERYTHING, "s3:GetObject", RESULTS_KEY)


@pytest.mark.parametrize("owner", ["alice", "al"])
def test_a_users_role_lists_only_its_own_prefixes_even_with_s3_star(world: World, owner: str) -> None:
    # GIVEN a user's execution role that an identity policy gives s3:* (key names are data: jobs, hosts, files)
    role = _user_role(world, owner)
    identity = [*role.statements, *S3_EVERYTHING]

    def can_list(prefix: str | None, action: str = "s3:ListBucket") -> bool:
        context = {"aws:SecureTransport": "true", **{f"aws:PrincipalTag/{k}": v for k, v in role.tags.items()}}
        if prefix is not None:
            context["s3:prefix"] = prefix
        request = Request(action, BUCKET_ARN, context)
        return same_account_decision(identity, world.bucket_policy, role.principal(), request)

    # THEN it lists its own folders
    for prefix in PREFIXES:
        assert can_list(f"{prefix}/{owner}/")
        assert can_list(f"{prefix}/{owner}/job-1/")
    # AND not the bucket, a top-level prefix, another user's folder (al vs alice included) or history/
    others = [u for u in USERS if u != owner]
    for prefix in (None, "", "traces/", f"traces/{owner}", "history/", *[f"reports/{o}/" for o in others]):
        assert not can_list(prefix), prefix
        assert not can_list(prefix, "s3:ListBucketVersions"), prefix


# --- tags and listings (issue 32, items 1 and 2) --------------------------------------------------------------

EXPIRY_TAG = {"s3:RequestObjectTagKeys": ["profstack:class"]}
OUTSIDERS = (ADMIN, WRITER, f"arn:aws:iam::{ACCOUNT}:role/profstack/users/alice/impostor")


def _tagging(world: World, who: Principal, identity: list[dict[str, Any]], action: str, key: str, **extra: Any) -> bool:
    context = {"aws:SecureTransport": "true", **extra}
    return same_account_decision(identity, world.bucket_policy, who, Request(action, f"{BUCKET_ARN}/{key}", context))


@pytest.mark.parametrize("arn", OUTSIDERS)
def test_no_one_outside_processing_can_make_a_users_data_expire_by_tag(world: World, arn: str) -> None:
    # GIVEN a training job's role (or an administrator) whose identity policy allows s3:* (before: s3:Put* was
    # enough to tag bob's reports, traces and history profstack:class=legacy-rule-output, and lifecycle deleted them)
    who = Principal(arn=arn)
    keys = [_key(p, "bob") for p in PREFIXES] + list(HISTORY_KEYS) + ["output/job-1/rule-output/x.json"]
    for key in keys:
        for action in ("s3:PutObjectTagging", "s3:PutObjectVersionTagging"):
            # THEN it cannot set the expiry tag anywhere in the bucket
            assert not _tagging(world, who, S3_EVERYTHING, action, key, **EXPIRY_TAG), (arn, action, key)
        # AND cannot upload an object carrying it either
        assert not _tagging(world, who, S3_EVERYTHING, "s3:PutObject", key, **EXPIRY_TAG), (arn, key)
    for key in keys[:-1]:
        # AND touches no tag at all on ProfStack's data, nor reads one (tags are data)
        for action in ("s3:PutObjectTagging", "s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging"):
            assert not _tagging(world, who, S3_EVERYTHING, action, key), (arn, action, key)
        assert not _tagging(world, who, S3_EVERYTHING, "s3:GetObjectTagging", key), (arn, key)
        assert not _tagging(world, who, S3_EVERYTHING, "s3:GetObjectVersionTagging", key), (arn, key)


def test_a_users_role_reads_no_other_users_tags_and_processing_still_tags_legacy_output(world: World) -> None:
    role = _user_role(world, "alice")
    identity = [*role.statements, *S3_EVERYTHING]
    tags = {f"aws:PrincipalTag/{k}": v for k, v in role.tags.items()}
    for prefix in PREFIXES:
        assert not _tagging(world, role.principal(), identity, "s3:GetObjectTagging", _key(prefix, "bob"), **tags)
        assert not _tagging(world, role.principal(), identity, "s3:PutObjectTagging", _key(prefix, "alice"), **tags)
    # AND the processing roles (which tag a finished job's legacy rule-output/) and break-glass still may
    for role_ in _processing_roles(world).values():
        key = "traces/alice/job-1/rule-output/ProfilerReport/r.html"
        assert _tagging(world, role_.principal(), S3_EVERYTHING, "s3:PutObjectTagging", key, **EXPIRY_TAG)
    assert _tagging(world, Principal(arn=BREAK_GLASS), S3_EVERYTHING, "s3:PutObjectTagging", _key("reports", "bob"))
    # AND a trace writer's ordinary upload (no tags) is unaffected
    assert _tagging(world, Principal(arn=WRITER), S3_EVERYTHING, "s3:PutObject", _key("traces", "alice"))


@pytest.mark.parametrize("arn", OUTSIDERS[:2])
def test_outsiders_list_no_profstack_keys_nor_in_progress_uploads(world: World, arn: str) -> None:
    who = Principal(arn=arn)

    def can(action: str, prefix: str | None) -> bool:
        context: dict[str, Any] = {"aws:SecureTransport": "true"}
        if prefix is not None:
            context["s3:prefix"] = prefix
        return same_account_decision(S3_EVERYTHING, world.bucket_policy, who, Request(action, BUCKET_ARN, context))

    # THEN no listing of ProfStack's prefixes, of a beginning of one ("t" lists traces/ too), or of the whole bucket
    for prefix in (None, "", "t", "tr", "traces", "traces/", "traces/bob/", "reports/bob/", "history/", "athena-r"):
        for action in ("s3:ListBucket", "s3:ListBucketVersions"):
            assert not can(action, prefix), (arn, action, prefix)
    # AND no in-progress uploads (they name their keys; before: listing uploads/ named other users' files)
    assert not can("s3:ListBucketMultipartUploads", None)
    # AND the bucket's other prefixes are left to identity policies (a job's own output)
    assert can("s3:ListBucket", "output/job-1/")
    assert can("s3:ListBucket", "x")


@pytest.mark.parametrize("owner", USERS)
def test_a_users_report_reader_role_with_s3_star_still_reaches_only_its_users_data(world: World, owner: str) -> None:
    # GIVEN a user's report reader role (same path and tag as the execution role) with s3:* by identity policy
    reader = _user_role(world, owner, "ReportReaderRole")
    star = [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]
    for other in USERS:
        for prefix in ("traces", "tensorboard", "reports"):
            # THEN the bucket policy holds it to its own user's prefixes, as it holds the execution role
            assert _can(world, reader.principal(), star, "s3:GetObject", _key(prefix, other), **reader.tags) is (
                other == owner
            ), (owner, other, prefix)
