"""The legacy audit and cleanup on the third seeded account (tests/functional/legacy_third_account.py): two regions,
more than a page of everything, custom event buses, a partner account's bucket, pipelines, alarms, dashboards, and a
decoy of each kind. The per-kind table is published in docs/migration.md; this test fails when the two disagree
(regenerate with `python -m scripts.legacy_scoreboard --write`).

Also here: every S3 call the legacy tools make names the caller's account as ExpectedBucketOwner (checked on the
calls made, and on the source, so that a new call cannot skip it), and cleanup goes on past a refused write, never
leaving a tag without its bucket's expiry rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from profstack.cli import main
from profstack.layout import LEGACY_RULE_OUTPUT_TAG
from profstack.migrate.legacy_profiler import audit_account, expires_tag
from tests.functional import legacy_third_account as third
from tests.training_jobs import ACCOUNT

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "migration.md"
MARKER = "legacy-scoreboard"
TAG = {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}
WRITES = re.compile(r"^(Put|Delete|Create|Restore|Copy|Upload|Complete|Abort)")


@pytest.fixture
def moto_account(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")  # AWSLambdaBasicExecutionRole and friends
    with mock_aws():
        yield


def published_table() -> str:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {MARKER} -->\n(.*?)\n<!-- /{MARKER} -->", text, re.DOTALL)
    assert match, f"docs/migration.md has no <!-- {MARKER} --> block"
    return match.group(1).strip()


def _cli(account: third.Account, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's clients are the account's, region by region (sts: the caller's account)."""
    import profstack.cli._aws as aws

    sts = boto3.client("sts", region_name=third.HOME)

    def make(service: str, region: str | None) -> Any:
        here = account.regions[region or third.HOME]
        shared = {"s3": account.s3, "iam": account.iam, "ec2": account.ec2, "sts": sts}
        if service in shared:
            return shared[service]
        return {"lambda": here.lambda_}.get(service) or getattr(here, service)

    monkeypatch.setattr(aws, "make_client", make)


def _json_audit(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    import json

    assert main(["legacy", "audit", "--days", "30", "--max-jobs", "5000", "--json", *flags]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.mark.slow
def test_the_third_account_is_found_whole_and_no_decoy_is_flagged_or_touched(
    moto_account: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = third.build()
    _cli(account, monkeypatch)
    # GIVEN the third account WHEN the CLI audits it over every region
    printed = _json_audit(capsys, "--regions", "all")
    # THEN it read both regions, every page of training jobs, and found every legacy item
    found = {(f["kind"], f["resource"]) for f in printed["findings"]}
    assert printed["regions"] == [third.HOME, third.OTHER]
    assert printed["jobs_scanned"] == sum(len(r.jobs) for r in account.regions.values())
    assert {e for e in account.expect.legacy if not third._covers(found, *e)} == set()
    assert {f["region"] for f in printed["findings"] if f["kind"] == "lambda"} == {third.HOME, third.OTHER}
    # WHEN only the home region is audited THEN the other region's functions are still read as the users of IAM
    # roles: the role that a function there shares with a Profiler function is still not Profiler-only
    home_only = _json_audit(capsys)
    roles = {f["resource"].rsplit("/", 1)[-1] for f in home_only["findings"] if f["kind"] == "iam-role"}
    assert "shared-fn-role" not in roles
    assert "rulejob-notifier-role" in roles
    # WHEN the expiry rule is asked for on the partner's bucket THEN one line refuses it and nothing is written
    # (before: its lifecycle was rewritten, no owner named)
    calls = len(account.owners.calls)
    assert main(["legacy", "expire-rule-output", "--bucket", "partner-ml-out", "--apply"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("profstack: error: partner-ml-out: refused, nothing written")
    assert [(c.operation, c.expected_owner) for c in account.owners.calls[calls:]] == [
        ("GetBucketLifecycleConfiguration", ACCOUNT)
    ]
    # WHEN audited and cleaned up through the library (applied, log streams too) and scored
    scored = third.scoreboard(account=account)
    rows, report = scored.rows, scored.report
    with capsys.disabled():
        print("\nlegacy audit, third account:\n" + third.table(rows))
    # THEN every legacy item of every kind is found, and no decoy is flagged or changed by cleanup
    assert {k: r.missed for k, r in rows.items() if r.missed} == {}
    assert {k: r.flagged for k, r in rows.items() if r.flagged} == {}
    assert {k: r.touched for k, r in rows.items() if r.touched} == {}
    assert list(third.iter_padding_flagged(report, account)) == []
    # AND the table docs/migration.md publishes is this run's
    assert published_table() == third.table(rows)
    # AND the only gap the audit reports is the partner account's bucket, which it refused to read
    assert sorted(report.incomplete) == [
        f"s3://partner-ml-out/runs/partner-run-0006/{folder}/: AccessDenied (or not account {ACCOUNT}'s bucket): "
        "left alone"
        for folder in ("profiler-output", "rule-output")
    ]
    # AND cleanup did all it could: both buckets got the rule, every Profiler object its tag, both apps went
    assert scored.cleaned.failed == []
    assert sorted(scored.cleaned.expiry_rules) == ["ml-artifacts-east", "ml-artifacts-eu"]
    assert len(scored.cleaned.apps) == 2
    # AND the jobs turned off after they ran are named as such, and each finding names its region
    assert {j.name for j in report.jobs if j.past_only} == {"vit-ft-0007", "vit-ft-0008"}
    assert {f.region for f in report.found if f.kind == "app"} == {third.HOME, third.OTHER}
    # AND every S3 call the tools made named this account (listing, versioning, tags, lifecycle), and the partner's
    # bucket was never written nor asked anything beyond the refused listing and lifecycle read
    calls = account.owners.calls
    assert account.owners.without_owner() == []
    assert {c.expected_owner for c in calls} == {ACCOUNT}
    assert {"ListObjectsV2", "PutObjectTagging", "PutBucketLifecycleConfiguration"} <= {c.operation for c in calls}
    partner = {c.operation for c in calls if c.bucket == "partner-ml-out"}
    assert partner == {"ListObjectsV2", "GetBucketLifecycleConfiguration"}


def _refuse_when(client: Any, operation: str, when: Callable[[dict[str, Any]], bool]) -> dict[str, bool]:
    """Refuse `operation` for the requests `when` picks, while the returned switch is on (ahead of any served
    answer)."""
    from botocore.awsrequest import AWSResponse

    switch = {"on": True}
    service = client.meta.service_model.service_id.hyphenize()

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["refuse"] = switch["on"] and when(params)

    def answer(context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if not context.get("refuse"):
            return None
        return AWSResponse("", 403, {}, None), {
            "Error": {"Code": "AccessDenied", "Message": "denied"},
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }

    client.meta.events.register_first(f"before-parameter-build.{service}.{operation}", remember)
    client.meta.events.register_first(f"before-call.{service}.{operation}", answer)
    return switch


def _tagged(account: third.Account) -> dict[tuple[str, str], bool]:
    """Each Profiler object of the account: does it carry the expiry tag?"""
    out = {}
    for bucket in ("ml-artifacts-east", "ml-artifacts-eu"):
        for page in account.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, ExpectedBucketOwner=ACCOUNT):
            for item in page.get("Contents", []):
                key = item["Key"]
                if "/profiler-output/" in key or "/rule-output/ProfilerReport-" in key:
                    tags = account.s3.get_object_tagging(Bucket=bucket, Key=key, ExpectedBucketOwner=ACCOUNT)["TagSet"]
                    out[(bucket, key)] = TAG in tags
    return out


@pytest.mark.slow
def test_cleanup_goes_on_past_refused_writes_and_a_rerun_finishes(
    moto_account: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = third.build()
    _cli(account, monkeypatch)
    # GIVEN an auditor who may not list the other region's functions
    listing = _refuse_when(account.regions[third.OTHER].lambda_, "ListFunctions", lambda p: True)
    report = audit_account(account.clients(), since_days=30, max_jobs=5000, now=third.NOW)
    roles = {f.resource.rsplit("/", 1)[-1] for f in report.found if f.kind == "iam-role"}
    # THEN the roles Profiler's by their own policies are found, none is claimed Profiler-only by its users (a
    # function there may run as it), and the gap is one line
    assert {"rulejob-notifier-role", "profiler-events-invoke"} <= roles
    assert not roles & {"bus-digest-role", "eu-digest-role", "profiler-sfn-role"}
    assert "lambda functions [eu-west-1]: missing permission lambda:ListFunctions (AccessDenied); " in " ".join(
        report.incomplete
    )
    listing["on"] = False
    # GIVEN a cleanup role that may not write the EU bucket's lifecycle, tag one object in the east, nor delete apps
    denied_key = "jobs/vit-ft-0007/profiler-output/system/1.json"
    lifecycle = _refuse_when(account.s3, "PutBucketLifecycleConfiguration", lambda p: p["Bucket"] == "ml-artifacts-eu")
    tagging = _refuse_when(account.s3, "PutObjectTagging", lambda p: p["Key"] == denied_key)
    apps = _refuse_when(account.regions[third.HOME].sagemaker, "DeleteApp", lambda p: True)
    # WHEN cleanup is applied
    command = ["legacy", "cleanup", "--regions", "all", "--days", "30", "--max-jobs", "5000", "--apply"]
    assert main([*command, "--delete-log-streams"]) == 1
    out = capsys.readouterr().out.splitlines()
    # THEN each refusal is one line naming the permission, everything else was still done, and the run ends with a
    # summary and exit 1 (before: the first AccessDenied stopped it, exit 2, and rules came after all the tags)
    assert [line for line in out if line.startswith("  failed: ")] == [
        "  failed: deleting app d-home1/alice/DetailedProfiler/default: AccessDenied: missing permission "
        "sagemaker:DeleteApp",
        f"  failed: s3://ml-artifacts-eu: lifecycle rule: AccessDenied: missing permission s3:PutLifecycleConfiguration"
        f" (or not account {ACCOUNT}'s bucket); its 2 verified prefixes were not tagged",
        f"  failed: tagging s3://ml-artifacts-east/{denied_key}: AccessDenied: missing permission "
        f"s3:PutObjectTagging (or not account {ACCOUNT}'s bucket)",
    ]
    assert out[-1].startswith("3 failed; cleanup went on past each")
    assert "delete DetailedProfiler app d-eu0001/bob/DetailedProfiler/bob-profiler" in out
    tagged = _tagged(account)
    assert not tagged[("ml-artifacts-east", denied_key)]
    assert not any(done for (bucket, _), done in tagged.items() if bucket == "ml-artifacts-eu")  # no rule, no tag
    assert all(done for (b, k), done in tagged.items() if b == "ml-artifacts-east" and k != denied_key)
    # AND every tagged object's bucket expires it
    for bucket in {b for (b, _), done in tagged.items() if done}:
        rules = account.s3.get_bucket_lifecycle_configuration(Bucket=bucket, ExpectedBucketOwner=ACCOUNT)["Rules"]
        assert expires_tag(rules)
    # WHEN the permissions are fixed and cleanup runs again
    lifecycle["on"] = tagging["on"] = apps["on"] = False
    assert main(command) == 0
    out = capsys.readouterr().out
    # THEN it finishes what was left and redoes nothing: the objects tagged before are counted as already tagged
    assert all(_tagged(account).values())
    assert f"({sum(tagged.values()):,} already tagged)" in out
    assert "add lifecycle rule profstack-legacy-rule-output to ml-artifacts-eu (expire after 30 days)" in out
    assert "add lifecycle rule profstack-legacy-rule-output to ml-artifacts-east" not in out
    assert "failed" not in out


# --- the source: every S3 call of the legacy tools names the owner ---------------------------------------------

LEGACY_SOURCES = [
    REPO / "profstack" / "migrate" / name
    for name in (
        "legacy_profiler.py",
        "legacy_automation.py",
        "legacy_evidence.py",
        "legacy_monitoring.py",
        "legacy_pipelines.py",
        "rule_output.py",
    )
] + [REPO / "profstack" / "cli" / "legacy.py", REPO / "profstack" / "cli" / "legacy_profiler.py"]
OTHER_SERVICES = (
    "sagemaker",
    "logs",
    "iam",
    "events",
    "stepfunctions",
    "lambda",
    "cloudwatch",
    "ec2",
    "sts",
)


def _s3_methods() -> frozenset[str]:
    """S3 client methods no other service the legacy tools use has (so `x.put_object_tagging(...)` is S3's)."""
    session = boto3.session.Session(region_name="us-east-1")
    s3 = set(session.client("s3").meta.method_to_api_mapping)
    for service in OTHER_SERVICES:
        s3 -= set(session.client(service).meta.method_to_api_mapping)  # type: ignore[call-overload]
    return frozenset(s3)


def _owner_names(tree: ast.AST) -> set[str]:
    """Names bound to owner_kwargs(...) anywhere in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        value = getattr(node, "value", None)
        bound = isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call)
        if bound and isinstance(value.func, ast.Name) and value.func.id == "owner_kwargs":  # type: ignore[union-attr]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _names_owner(call: ast.Call, owner_names: set[str]) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "ExpectedBucketOwner":
            return True
        splat = keyword.value
        if keyword.arg is None and isinstance(splat, ast.Call) and isinstance(splat.func, ast.Name):
            return splat.func.id == "owner_kwargs"
        if keyword.arg is None and isinstance(splat, ast.Name) and splat.id in owner_names:
            return True
    return False


def _is_s3_call(node: ast.Call, s3_methods: frozenset[str]) -> bool:
    """`x.<S3 method>(...)`, or `x.get_paginator("<S3 method>").paginate(...)`."""
    if not isinstance(node.func, ast.Attribute):
        return False
    method, receiver = node.func.attr, node.func.value
    if method in s3_methods:
        return True
    return (
        method == "paginate"
        and isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "get_paginator"
        and bool(receiver.args)
        and isinstance(receiver.args[0], ast.Constant)
        and receiver.args[0].value in s3_methods
    )


def unnamed_owner_calls(source: str, s3_methods: frozenset[str]) -> list[int]:
    """Lines of S3 calls (and S3 paginations) that pass no ExpectedBucketOwner."""
    tree = ast.parse(source)
    owner_names = _owner_names(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _is_s3_call(node, s3_methods) and not _names_owner(node, owner_names)
    ]


def test_the_check_catches_an_s3_call_without_the_owner() -> None:
    methods = _s3_methods()
    bad = 's3.put_object_tagging(Bucket=b, Key=k, Tagging=t)\ns3.get_paginator("list_objects_v2").paginate(Bucket=b)\n'
    good = (
        "extra = owner_kwargs(o)\ns3.put_object_tagging(Bucket=b, Key=k, **extra)\n"
        's3.get_paginator("list_objects_v2").paginate(Bucket=b, **owner_kwargs(o))\n'
        "s3.get_bucket_lifecycle_configuration(Bucket=b, ExpectedBucketOwner=o)\n"
    )
    assert unnamed_owner_calls(bad, methods) == [1, 2]
    assert unnamed_owner_calls(good, methods) == []
    assert {"put_object_tagging", "list_object_versions", "put_bucket_lifecycle_configuration"} <= methods


@pytest.mark.parametrize("path", LEGACY_SOURCES, ids=lambda p: p.name)
def test_every_s3_call_in_the_legacy_tools_names_the_owner(path: Path) -> None:
    # GIVEN the source of each module of the legacy tools THEN each S3 call it makes names ExpectedBucketOwner
    assert unnamed_owner_calls(path.read_text(encoding="utf-8"), _s3_methods()) == []
