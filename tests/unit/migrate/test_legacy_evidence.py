"""The legacy audit's evidence rules, one by one: what makes a text Profiler's, Debugger's, or only for review."""

from __future__ import annotations

import string

from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st

from profstack.migrate.legacy_evidence import (
    LegacyPaths,
    Location,
    classify_document,
    describe_failure,
    iam_action,
    match_json,
)

PROFILER = Location("ml-out", "sweeps/Run-1/rule-output/ProfilerReport", "Run-1")
PROFILER_OUT = Location("ml-out", "sweeps/Run-1/profiler-output/", "Run-1")
DEBUGGER = Location("ml-out", "sweeps/Run-1/rule-output/LossNotDecreasing", "Run-1")
PATHS = LegacyPaths(
    prefixes=(PROFILER, PROFILER_OUT),
    rule_jobs=frozenset({"run-1-profilerreport-1a2b"}),
    debugger_prefixes=(DEBUGGER,),
    debugger_rule_jobs=frozenset({"run-1-lossnotdecreasing-3c4d"}),
)


def _verdict(text: str) -> str | None:
    found = PATHS.match(text)
    return found.verdict if found else None


def test_profiler_folders_rule_jobs_and_api_fields_are_profilers() -> None:
    assert _verdict("s3://ml-out/sweeps/Run-1/rule-output/ProfilerReport-1764000000/report.html") == "profiler"
    assert _verdict("arn:aws:s3:::ml-out/sweeps/*/rule-output/ProfilerReport-*") == "profiler"
    assert _verdict("arn:aws:s3:::ml-out/sweeps/Run-1/profiler-output/*") == "profiler"
    # a rule job named as created (mixed case) matches its lower-case ARN spelling
    assert _verdict("Run-1-ProfilerReport-1a2b") == "profiler"
    assert _verdict("ProfilerRuleEvaluationStatuses") == "profiler"
    assert _verdict("arn:aws:sagemaker:us-east-1:1:app/d-1/alice/DetailedProfiler/default") == "profiler"


def test_debugger_parts_are_debuggers_and_a_wildcard_over_both_is_for_review() -> None:
    assert _verdict("s3://ml-out/sweeps/Run-1/rule-output/LossNotDecreasing/state.json") == "debugger"
    assert _verdict("Run-1-LossNotDecreasing-3c4d") == "debugger"
    assert _verdict("DebugRuleEvaluationStatuses") == "debugger"
    # one wildcard, or the parent folder, covers both: a person removes only the Profiler part
    assert _verdict("arn:aws:s3:::ml-out/sweeps/*/rule-output/*") == "review"
    assert _verdict("s3://ml-out/sweeps/Run-1/rule-output/") == "review"


def test_a_name_or_an_unrelated_rule_output_is_never_profilers() -> None:
    assert _verdict("profiler-dashboard-sync") is None
    assert _verdict("s3://datasets/rule-output/labels.csv") == "review"
    # same bucket, but the token names no Profiler folder and no Profiler word
    assert _verdict("s3://ml-out/other/rule-output/x.json") == "review"


def test_a_path_built_from_parts_finds_its_bucket_in_a_sibling_field() -> None:
    definition = (
        '{"Bucket": "ml-out", "Key.$": "States.Format(\'sweeps/{}/rule-output/ProfilerReport/r.html\', $.job)"}'
    )
    found = match_json(definition, PATHS)
    assert found is not None
    assert found.verdict == "profiler"


def test_policy_only_ness_ignores_neutral_statements() -> None:
    reader = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::ml-out/sweeps/*/profiler-output/*"}
    logs = {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"}
    other = {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::ml-out/etl/*"}
    only = classify_document({"Statement": [reader, logs]}, PATHS)
    assert only.profiler_only
    assert not only.neutral_only
    shared = classify_document({"Statement": [reader, other]}, PATHS)
    assert shared.evidence is not None
    assert shared.evidence.verdict == "profiler"
    assert not shared.profiler_only
    assert shared.profiler_statements == (0,)
    assert classify_document({"Statement": logs}, PATHS).neutral_only


def test_a_failure_is_one_line_naming_the_permission() -> None:
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "ListRules")
    assert describe_failure("eventbridge rules", "events", denied) == (
        "eventbridge rules: missing permission events:ListRules (AccessDeniedException); this section is incomplete"
    )
    broken = ClientError(
        {"Error": {"Code": "InternalFailure", "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": 500}}, "ListApps"
    )
    assert describe_failure("sagemaker apps", "sagemaker", broken) == (
        "sagemaker apps: ListApps answered InternalFailure (HTTP 500); this section is incomplete"
    )
    assert iam_action("s3", "ListObjectsV2") == "s3:ListBucket"
    assert iam_action("stepfunctions", "ListStateMachines") == "states:ListStateMachines"


NAME = st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=20).filter(lambda s: s[0] != "-")


@given(job=NAME, rule=st.sampled_from(["LossNotDecreasing", "VanishingGradient", "Overfit", "ExplodingTensor"]))
def test_any_debugger_rule_folder_is_never_profilers(job: str, rule: str) -> None:
    # GIVEN any job that ran the Profiler report and a Debugger rule into one rule-output/
    paths = LegacyPaths(
        prefixes=(Location("b", f"out/{job}/rule-output/ProfilerReport", job),),
        rule_jobs=frozenset(),
        debugger_prefixes=(Location("b", f"out/{job}/rule-output/{rule}", job),),
    )
    # THEN the Debugger rule's own objects are Debugger's, and the report's are Profiler's
    debugger = paths.match(f"s3://b/out/{job}/rule-output/{rule}/state.json")
    profiler = paths.match(f"s3://b/out/{job}/rule-output/ProfilerReport-17/report.html")
    assert debugger is not None
    assert debugger.verdict == "debugger"
    assert profiler is not None
    assert profiler.verdict == "profiler"
