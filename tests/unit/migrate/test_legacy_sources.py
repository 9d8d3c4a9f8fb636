"""The legacy audit's newer evidence, rule by rule: launchers judged by their training requests (a migrated launcher's
`DisableProfiler: true` is never Profiler evidence), pipeline definitions, statements that grant on Profiler
automation, a job's rule folders decided by its own rule names, and what makes an alarm or a dashboard Profiler's."""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.migrate.legacy_automation import Graph, Node
from profstack.migrate.legacy_evidence import (
    Automation,
    Evidence,
    LegacyPaths,
    Location,
    classify_document,
    expand_json,
    match_json,
    request_evidence,
)
from profstack.migrate.legacy_monitoring import Watched, Watchers, metric_alarm_evidence, widget_evidence
from profstack.migrate.legacy_pipelines import pipeline_evidence, pipeline_roles
from profstack.migrate.legacy_profiler import ProfilerJob, S3Prefix

PATHS = LegacyPaths(
    prefixes=(Location("ml-out", "jobs/run-1/rule-output/ProfilerReport", "run-1"),),
    rule_jobs=frozenset({"run-1-profilerreport-1a2b"}),
    debugger_rule_jobs=frozenset({"run-1-lossnotdecreasing-3c4d"}),
)
TRUE = st.sampled_from([True, "true", "True", "TRUE", " true "])


def _verdict(evidence: Evidence | None) -> str | None:
    return evidence.verdict if evidence else None


# --- launchers: a CreateTrainingJob request -----------------------------------------------------------------------


@given(
    disable=TRUE,
    extra=st.dictionaries(st.sampled_from(["S3OutputPath", "ProfilingIntervalInMilliseconds"]), st.just("x")),
)
def test_a_request_with_the_profiler_off_is_never_profiler_evidence(disable: Any, extra: dict[str, str]) -> None:
    # GIVEN any request that turns the Profiler off (bool or string, with or without the old settings beside it)
    request = {"TrainingJobName": "t", "ProfilerConfig": {"DisableProfiler": disable, **extra}}
    # THEN it names nothing of the Profiler's, and neither does a state machine that sends it
    assert request_evidence(request) is None
    machine = {
        "States": {
            "T": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
                "Parameters": request,
            }
        }
    }
    assert match_json(json.dumps(machine), PATHS) is None


def test_a_request_that_profiles_is_an_edit_and_a_run_time_setting_is_for_review() -> None:
    on = request_evidence({"ProfilerConfig": {"S3OutputPath": "s3://b/p"}})
    assert on is not None
    assert on.verdict == "profiler"
    assert on.edit
    rules = request_evidence(
        {
            "ProfilerConfig": {"DisableProfiler": True},
            "ProfilerRuleConfigurations": [{"RuleConfigurationName": "LowGPUUtilization"}],
        }
    )
    assert rules is not None
    assert rules.verdict == "profiler"
    assert "LowGPUUtilization" in rules.reason
    assert _verdict(request_evidence({"ProfilerConfig.$": "$.profiler"})) == "review"
    assert _verdict(request_evidence({"ProfilerConfig": {"DisableProfiler.$": "$.off"}})) == "review"
    debugger = request_evidence(
        {
            "ProfilerConfig": {"DisableProfiler": True},
            "DebugRuleConfigurations": [{"RuleConfigurationName": "ProfilerReportCustom"}],
        }
    )
    assert _verdict(debugger) == "debugger"
    assert request_evidence({"TrainingJobName": "plain"}) is None


def test_a_state_machine_that_reads_profiler_results_is_automation_not_an_edit() -> None:
    # GIVEN a machine that reads the rule statuses and also launches a job with the Profiler off
    machine = {
        "States": {
            "Choice": {"Type": "Choice", "Choices": [{"Variable": "$.detail.ProfilerRuleEvaluationStatuses[0]"}]},
            "Train": {"Type": "Task", "Parameters": {"ProfilerConfig": {"DisableProfiler": True}}},
        }
    }
    found = match_json(json.dumps(machine), PATHS)
    # THEN the Profiler field it reads decides: Profiler automation, removed with the Profiler
    assert found is not None
    assert found.verdict == "profiler"
    assert not found.edit


def test_json_inside_a_string_is_read_as_json() -> None:
    # GIVEN a function environment variable that holds a migrated training request
    env = {"Environment": {"REQUEST": json.dumps({"ProfilerConfig": {"DisableProfiler": True}})}}
    assert expand_json(env)["Environment"]["REQUEST"] == {"ProfilerConfig": {"DisableProfiler": True}}
    # THEN its words ("ProfilerConfig") are not evidence (before: the token alone made the function Profiler's)
    assert match_json(json.dumps(env), PATHS) is None
    assert expand_json("{not json") == "{not json"


# --- pipelines ------------------------------------------------------------------------------------------------------


def _training(name: str, **arguments: Any) -> dict[str, Any]:
    return {"Name": name, "Type": "Training", "Arguments": {"RoleArn": "arn:aws:iam::1:role/step", **arguments}}


def _nested(step: dict[str, Any], depth: int) -> dict[str, Any]:
    for i in range(depth):
        step = {
            "Name": f"c{i}",
            "Type": "Condition",
            "Arguments": {"Conditions": [], "IfSteps": [], "ElseSteps": [step]},
        }
    return step


@settings(max_examples=25)
@given(depth=st.integers(0, 6), default=st.booleans())
def test_a_pipeline_step_is_judged_at_any_depth_by_its_parameters_default(depth: int, default: bool) -> None:
    # GIVEN a training step under `depth` condition steps, its DisableProfiler a parameter with a default
    step = _training("Train", ProfilerConfig={"DisableProfiler": {"Get": "Parameters.Off"}})
    definition = {
        "Parameters": [{"Name": "Off", "Type": "Boolean", "DefaultValue": default}],
        "Steps": [_nested(step, depth)],
    }
    found = pipeline_evidence(definition, PATHS)
    # THEN the default decides: off is nothing of the Profiler's, on is a Profiler pipeline (an edit)
    if default:
        assert found is None
    else:
        assert found is not None
        assert found.verdict == "profiler"
        assert found.edit
        assert "step Train" in found.reason


def test_a_pipeline_setting_known_only_at_run_time_is_for_review_and_roles_are_collected() -> None:
    definition = {
        "Parameters": [{"Name": "Role", "Type": "String", "DefaultValue": "arn:aws:iam::1:role/param"}],
        "Steps": [
            _training("A", ProfilerConfig={"DisableProfiler": {"Get": "Parameters.NoDefault"}}),
            {"Name": "B", "Type": "Training", "Arguments": {"RoleArn": {"Get": "Parameters.Role"}}},
        ],
    }
    assert _verdict(pipeline_evidence(definition, PATHS)) == "review"
    assert pipeline_roles(definition, "arn:aws:iam::1:role/pipe") == [
        "arn:aws:iam::1:role/pipe",
        "arn:aws:iam::1:role/step",
        "arn:aws:iam::1:role/param",
    ]
    # a step that reads verified Profiler output makes the pipeline Profiler's too
    reader = {
        "Steps": [
            {
                "Name": "R",
                "Type": "Processing",
                "Arguments": {"S3Uri": "s3://ml-out/jobs/run-1/rule-output/ProfilerReport-1/"},
            }
        ]
    }
    assert _verdict(pipeline_evidence(reader, PATHS)) == "profiler"


# --- statements on Profiler automation --------------------------------------------------------------------------

FN = "arn:aws:lambda:us-east-1:1:function:rulejob-notifier"
OTHER_FN = "arn:aws:lambda:us-east-1:1:function:etl"
AUTOMATION = Automation(profiler=frozenset({FN}), others=frozenset({OTHER_FN}))


def _grant(*resources: str) -> dict[str, Any]:
    return {"Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": list(resources)}]}


def test_a_statement_on_profiler_automation_only_is_profilers() -> None:
    assert classify_document(_grant(FN, f"{FN}:*"), PATHS, AUTOMATION).profiler_only
    # any function, or a Profiler function beside another: not evidence of the Profiler alone
    assert classify_document(_grant("arn:aws:lambda:us-east-1:1:function:*"), PATHS, AUTOMATION).evidence is None
    assert classify_document(_grant("*"), PATHS, AUTOMATION).evidence is None
    mixed = classify_document(_grant(FN, OTHER_FN), PATHS, AUTOMATION)
    assert not mixed.profiler_only
    assert _verdict(mixed.evidence) == "review"
    # a wildcard that names the Profiler function and none of the account's others is evidence; `*` never is
    assert AUTOMATION.names("arn:aws:lambda:us-east-1:1:function:rulejob-*") == FN
    assert AUTOMATION.names("arn:aws:lambda:us-east-1:1:function:*") is None


# --- a job's rule folders -----------------------------------------------------------------------------------------

RULE = st.text(string.ascii_letters + string.digits, min_size=1, max_size=12)


def _job(profiler_rules: list[str], debugger_rules: list[str]) -> ProfilerJob:
    return ProfilerJob(
        name="j",
        status="Completed",
        created=datetime(2026, 1, 1, tzinfo=UTC),
        profiler_enabled=True,
        profiler_rules=[(r, "NoIssuesFound") for r in profiler_rules],
        output_roots=[S3Prefix("b", "out")],
        debugger_rules=debugger_rules,
    )


@given(suffix=RULE, stamp=st.integers(0, 10**10))
def test_a_debugger_rule_named_like_the_profiler_report_keeps_its_folder(suffix: str, stamp: int) -> None:
    # GIVEN a job with the Profiler report and a Debugger rule whose name starts with ProfilerReport
    debugger = f"ProfilerReport{suffix}"
    job = _job([f"ProfilerReport-{stamp}"], [debugger])
    # THEN the Debugger rule's folder is Debugger's, the report's is Profiler's, and an unknown one is for review
    assert job.folder_verdict(debugger) == "debugger"
    assert job.folder_verdict(f"{debugger}-{stamp}") == "debugger"
    assert job.folder_verdict(f"ProfilerReport-{stamp}") == "profiler"
    assert job.folder_verdict("notes") == "review"


def test_without_a_debugger_rule_of_that_name_the_report_stem_still_counts() -> None:
    job = _job([], ["LossNotDecreasing"])
    assert job.folder_verdict("ProfilerReport-1764") == "profiler"
    assert job.folder_verdict("LossNotDecreasing") == "debugger"


def test_a_job_turned_off_is_measured_only_for_its_profiler_output() -> None:
    job = _job([], [])
    job.profiler_enabled, job.past_only = False, True
    assert [str(p) for p in job.prefixes()] == ["s3://b/out/j/profiler-output/"]


# --- alarms and dashboards --------------------------------------------------------------------------------------


def _graph() -> Graph:
    graph = Graph()
    graph.add(
        Node(
            kind="lambda",
            arn=FN,
            name="rulejob-notifier",
            evidence=Evidence("profiler", "x"),
            env=(("METRIC_NAMESPACE", "MLOps/Profiler"), ("PUBLISH_TO", "Team/shared"), ("STAGE", "prod")),
        )
    )
    graph.add(Node(kind="lambda", arn=OTHER_FN, name="etl", env=(("NAMESPACE", "Team/shared"),)))
    return graph


def _alarm(namespace: str, metric: str, **dimensions: str) -> dict[str, Any]:
    return {
        "AlarmName": "a",
        "Namespace": namespace,
        "MetricName": metric,
        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
    }


def test_what_makes_a_metric_profilers() -> None:
    watched = Watched.of(_graph(), PATHS, "")

    def verdict(alarm: dict[str, Any]) -> str | None:
        return _verdict(metric_alarm_evidence(alarm, watched))

    assert verdict(_alarm("AWS/Lambda", "Errors", FunctionName="rulejob-notifier")) == "profiler"
    assert (
        verdict(_alarm("/aws/sagemaker/ProcessingJobs", "CPUUtilization", Host="run-1-ProfilerReport-1a2b/algo-1"))
        == "profiler"
    )
    assert verdict(_alarm("MLOps/Profiler", "IssuesFound")) == "profiler"  # only a Profiler function publishes there
    assert verdict(_alarm("Team/shared", "IssuesFound")) is None  # another function publishes there too
    assert verdict(_alarm("prod", "IssuesFound")) is None  # a Profiler function's STAGE is not a namespace
    assert verdict(_alarm("AWS/Lambda", "Errors", FunctionName="etl")) is None
    assert (
        verdict(_alarm("/aws/sagemaker/TrainingJobs", "GPUUtilization", Host="run-1/algo-1")) is None
    )  # the job, not a rule
    assert (
        verdict(_alarm("/aws/sagemaker/ProcessingJobs", "CPUUtilization", Host="run-1-LossNotDecreasing-3c4d/algo-1"))
        == "debugger"
    )
    # metric math over a Profiler metric and another one: for review, never found
    math = {
        "AlarmName": "m",
        "Metrics": [
            {"Id": "a", "MetricStat": {"Metric": {"Namespace": "MLOps/Profiler", "MetricName": "X"}}},
            {"Id": "b", "MetricStat": {"Metric": {"Namespace": "AWS/EC2", "MetricName": "CPUUtilization"}}},
            {"Id": "e", "Expression": "a + b"},
        ],
    }
    assert verdict(math) == "review"


def test_a_dashboard_widget_repeats_the_row_above_with_dots_and_text_is_neutral() -> None:
    watched, watchers = Watched.of(_graph(), PATHS, ""), Watchers()
    rows = {
        "type": "metric",
        "properties": {
            "metrics": [["AWS/Lambda", "Errors", "FunctionName", "etl"], [".", ".", ".", "rulejob-notifier"]]
        },
    }
    assert _verdict(widget_evidence(rows, watched, watchers)) == "review"  # one row is the Profiler's, one is not
    only = {
        "type": "metric",
        "properties": {
            "metrics": [["AWS/Lambda", "Errors", "FunctionName", "rulejob-notifier"], [".", "Throttles", ".", "."]]
        },
    }
    assert _verdict(widget_evidence(only, watched, watchers)) == "profiler"
    text = {
        "type": "text",
        "properties": {
            "markdown": "ProfilerRuleEvaluationStatuses, s3://ml-out/jobs/run-1/rule-output/ProfilerReport-1/"
        },
    }
    assert widget_evidence(text, watched, watchers) is None
    logs = {
        "type": "log",
        "properties": {"query": "SOURCE '/aws/lambda/rulejob-notifier' | SOURCE '/aws/lambda/etl' | fields @message"},
    }
    assert _verdict(widget_evidence(logs, watched, watchers)) == "review"


def test_a_composite_alarm_is_judged_by_every_alarm_its_rule_names() -> None:
    from profstack.migrate.legacy_monitoring import read_alarms

    watched = Watched.of(_graph(), PATHS, "")
    profiler = _alarm("AWS/Lambda", "Errors", FunctionName="rulejob-notifier") | {"AlarmName": "p"}
    other = _alarm("AWS/EC2", "CPUUtilization", InstanceId="i-1") | {"AlarmName": "o"}
    arn = "arn:aws:cloudwatch:us-east-1:1:alarm:p"
    composites = [
        {"AlarmName": "only-p", "AlarmRule": f'ALARM("{arn}") OR INSUFFICIENT_DATA(p)'},
        {"AlarmName": "mixed", "AlarmRule": 'ALARM(p) AND NOT OK("o")'},
        {"AlarmName": "outer", "AlarmRule": "ALARM(only-p)"},  # a composite over a composite
    ]

    class Alarms:  # DescribeAlarms, one page
        def get_paginator(self, name: str) -> Any:
            assert name == "describe_alarms"
            return self

        def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
            assert kwargs == {"AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}  # composites only when asked
            return [{"MetricAlarms": [profiler, other], "CompositeAlarms": composites}]

    watchers = Watchers()
    read_alarms(Alarms(), watched, watchers)
    verdicts = {name: _verdict(evidence) for name, (_, evidence) in watchers.alarms.items()}
    assert verdicts == {"p": "profiler", "o": None, "only-p": "profiler", "mixed": "review", "outer": "profiler"}
