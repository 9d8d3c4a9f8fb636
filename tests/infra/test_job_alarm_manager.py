"""Template assertions for the per-job alarm manager (stacks/components/job_alarm_manager.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.events.models import EventPattern

from profstack.jobs.alarms import MANAGED_BY_TAG, alarm_prefix
from stacks.components.job_alarm_manager import training_job_state_pattern
from tests.conftest import EVENTS_DIR
from tests.infra.conftest import SynthesizedApp, synthesize
from tests.infra.test_processing_stack import _actions, _flat, _function, _of_type, _policy_statements

STACK = "profstack-processing"
HANDLER = "lambdas.alarm_manager.handler.handler"


@pytest.fixture(scope="module")
def template(synthesized: SynthesizedApp) -> dict[str, Any]:
    return synthesized.templates[STACK]


def _role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    _, props = _function(template, HANDLER)
    role = props["Role"]["Fn::GetAtt"][0]
    return _policy_statements(template, role)


def test_the_role_may_touch_only_alarms_under_the_prefix(template: dict[str, Any], example_config: Any) -> None:
    statements = _role_statements(template)
    by_action: dict[str, list[str]] = {}
    for st in statements:
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        for action in _actions(st):
            by_action.setdefault(action, []).extend(_flat(r) for r in resources)
    prefix = alarm_prefix(example_config.prefix)
    # THEN PutMetricAlarm and DeleteAlarms name only <prefix>/job/* alarms of this account and region
    for action in (
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:TagResource",
        "cloudwatch:ListTagsForResource",
    ):
        (resource,) = by_action[action]
        assert resource.endswith(f":alarm:{prefix}*"), resource
        assert resource.startswith("arn:<")
        assert ":cloudwatch:" in resource
        assert '"Ref": "AWS::Region"' in resource
        assert '"Ref": "AWS::AccountId"' in resource
    # AND the dashboard write names the one live dashboard (dashboards are global: no region in the ARN)
    (dashboard,) = by_action["cloudwatch:PutDashboard"]
    assert ":cloudwatch::" in dashboard
    assert f":dashboard/{example_config.prefix}-running-jobs-per-gpu-" in dashboard
    # AND '*' only for actions without a resource type
    assert by_action["cloudwatch:DescribeAlarms"] == ["*"]
    assert by_action["sagemaker:ListTrainingJobs"] == ["*"]
    assert all(r.endswith(":training-job/*") for r in by_action["sagemaker:DescribeTrainingJob"])
    # AND nothing else: no SNS, no S3, no wildcard actions, no other CloudWatch write
    allowed = {
        "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:PutDashboard", "cloudwatch:DescribeAlarms",
        "cloudwatch:TagResource", "cloudwatch:ListTagsForResource",
        "sagemaker:ListTrainingJobs", "sagemaker:DescribeTrainingJob", "logs:CreateLogStream", "logs:PutLogEvents",
        "xray:PutTraceSegments", "xray:PutTelemetryRecords",
    }  # fmt: skip
    assert set(by_action) <= allowed, sorted(set(by_action) - allowed)
    # AND DeleteAlarms only on alarms that carry this deployment's managed-by tag: a look-alike name proves nothing
    (delete,) = [s for s in statements if "cloudwatch:DeleteAlarms" in _actions(s)]
    assert _actions(delete) == ["cloudwatch:DeleteAlarms"]
    assert delete["Condition"] == {"StringEquals": {f"aws:ResourceTag/{MANAGED_BY_TAG}": example_config.prefix}}


def test_function_is_serialised_and_configured_from_the_alarms_section(
    template: dict[str, Any], example_config: Any
) -> None:
    _, props = _function(template, HANDLER)
    assert props["ReservedConcurrentExecutions"] == 1
    env = props["Environment"]["Variables"]
    a = example_config.alarms
    assert env["NAME_PREFIX"] == example_config.prefix
    assert float(env["GPU_UTILIZATION_LOW_PERCENT"]) == a.gpu_utilization_low_percent
    assert float(env["GPU_MEMORY_HIGH_PERCENT"]) == a.gpu_memory_high_percent
    assert float(env["DISK_HIGH_PERCENT"]) == a.host_disk_high_percent
    assert float(env["MEMORY_HIGH_PERCENT"]) == a.host_memory_high_percent
    assert float(env["CPU_HIGH_PERCENT"]) == a.cpu_high_percent
    assert int(env["WARMUP_MINUTES"]) == a.warmup_minutes
    assert "NotificationsTopic" in json.dumps(env["TOPIC_ARN"])


def test_rules_fire_on_every_state_change_and_on_the_schedule(template: dict[str, Any], example_config: Any) -> None:
    rules = [r["Properties"] for r in _of_type(template, "AWS::Events::Rule").values()]
    function_id, _ = _function(template, HANDLER)
    mine = [r for r in rules if function_id in json.dumps(r["Targets"])]
    scheduled = [r for r in mine if "ScheduleExpression" in r]
    on_event = [r for r in mine if "EventPattern" in r]
    assert [r["ScheduleExpression"] for r in scheduled] == [f"rate({example_config.alarms.reconcile_minutes} minutes)"]
    (rule,) = on_event
    pattern = EventPattern.load(json.dumps(rule["EventPattern"]))
    # THEN the real InProgress and terminal events match, other events do not
    for name in ("in_progress", "completed", "failed", "stopped"):
        assert pattern.matches_event(json.loads((EVENTS_DIR / f"sagemaker_training_job_{name}.json").read_text()))
    for name in ("sagemaker_processing_job_completed.json", "ec2_instance_state_change.json"):
        assert not pattern.matches_event(json.loads((EVENTS_DIR / name).read_text()))


def test_tag_filter_narrows_the_rule(example_config: Any) -> None:
    from profstack.config import JobTagFilter

    tag = JobTagFilter(key="profstack:profile", value="true")
    pattern = EventPattern.load(json.dumps(training_job_state_pattern(tag)))
    tagged = json.loads((EVENTS_DIR / "sagemaker_training_job_in_progress.json").read_text())
    assert not pattern.matches_event(tagged)
    tagged["detail"]["Tags"]["profstack:profile"] = "true"
    assert pattern.matches_event(tagged)


def test_per_job_alarms_can_be_switched_off(example_config: Any) -> None:
    config = example_config.model_copy(
        update={"alarms": example_config.alarms.model_copy(update={"per_job_alarms": False})}
    )
    template = synthesize(config, nag=False).templates[STACK]
    handlers = [f["Properties"]["Handler"] for f in _of_type(template, "AWS::Lambda::Function").values()]
    assert HANDLER not in handlers


def test_dashboard_shows_health_disk_and_links_the_per_gpu_view(template: dict[str, Any]) -> None:
    bodies = [
        _flat(d["Properties"]["DashboardBody"]) for d in _of_type(template, "AWS::CloudWatch::Dashboard").values()
    ]
    fleet = next(b for b in bodies if "ProfStack health" in b)
    for needle in ("DiskUtilization", "ApproximateAgeOfOldestMessage", "Throttles", "Duration", "Errors",
                   "ApproximateNumberOfMessagesVisible", "running-jobs-per-gpu", "JobProcessingFailures"):  # fmt: skip
        assert needle in fleet, needle
    live = [b for b in bodies if "rewrites this dashboard" in b]
    assert len(live) == 1
