"""The per-job alarm manager: specs, convergence against moto's CloudWatch, events, reconcile, property test."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from lambdas.alarm_manager.aws import CloudWatchAlarms
from lambdas.alarm_manager.dashboard import MAX_HOSTS_PER_GRAPH, dashboard_body
from lambdas.alarm_manager.env import EnvError, ManagerEnv
from lambdas.alarm_manager.logic import reconcile, running_job, sync_job
from profstack.jobs.alarms import (
    KINDS,
    MANAGED_BY_TAG,
    RunningJob,
    alarm_name,
    alarm_prefix,
    desired_by_name,
    job_alarms,
    job_of_alarm,
)
from profstack.jobs.instances import hosts_of
from tests.unit.monitoring.alarm_support import (
    PREFIX,
    SETTINGS,
    T0,
    TH,
    TOPIC,
    FakeSageMaker,
    describe,
    event,
)

WARM = T0 + timedelta(minutes=TH.warmup_minutes)
ENV = {
    "NAME_PREFIX": PREFIX,
    "TOPIC_ARN": TOPIC,
    "AWS_REGION": "us-east-1",
    "DASHBOARD_NAME": "profstack-running-jobs-per-gpu-us-east-1",
    "GPU_UTILIZATION_LOW_PERCENT": "30",
    "GPU_MEMORY_HIGH_PERCENT": "95",
    "DISK_HIGH_PERCENT": "90",
    "MEMORY_HIGH_PERCENT": "90",
    "CPU_HIGH_PERCENT": "90",
    "CPU_BOUND_GPU_LOW_PERCENT": "10",
    "EVALUATION_PERIODS": "15",
    "WARMUP_MINUTES": "20",
}


def _job(name: str, instance_type: str, count: int = 1) -> RunningJob:
    return RunningJob(name=name, hosts=tuple(hosts_of({"InstanceType": instance_type, "InstanceCount": count})),
                      started=T0)  # fmt: skip


def _by_name(specs: list[Any]) -> dict[str, Any]:
    return {s.name: s for s in specs}


# --- specs ----------------------------------------------------------------------------------------------------


def test_a_mixed_fleet_divides_each_host_by_its_own_gpu_count() -> None:
    # GIVEN an 8-GPU job and a 1-GPU job, both past the warm-up
    big = _by_name(job_alarms(name_prefix=PREFIX, job=_job("big", "ml.p4d.24xlarge"), th=TH, now=WARM))
    small = _by_name(job_alarms(name_prefix=PREFIX, job=_job("small", "ml.g5.xlarge"), th=TH, now=WARM))
    # THEN the per-GPU thresholds are the same and each expression divides by the host's own count
    low_big = big[alarm_name(PREFIX, "big", "algo-1", "GpuUtilizationLow")]
    low_small = small[alarm_name(PREFIX, "small", "algo-1", "GpuUtilizationLow")]
    assert low_big.threshold == low_small.threshold == TH.gpu_utilization_low_percent
    assert low_big.metrics[-1]["Expression"] == "gpu / 8"
    assert low_small.metrics[-1]["Expression"] == "gpu / 1"
    assert big[alarm_name(PREFIX, "big", "algo-1", "GpuMemoryHigh")].metrics[-1]["Expression"] == "gpumem / 8"
    cpu = big[alarm_name(PREFIX, "big", "algo-1", "CpuHighGpuLow")].metrics[-1]["Expression"]
    assert cpu == "IF(cpu / 96 > 90 AND gpu / 8 < 10, 1, 0)"
    # AND the metric each expression reads is that host's SageMaker metric
    stat = low_big.metrics[0]["MetricStat"]
    assert stat["Metric"]["Dimensions"] == [{"Name": "Host", "Value": "big/algo-1"}]
    assert stat["Metric"]["Namespace"] == "/aws/sagemaker/TrainingJobs"


def test_warm_up_gates_the_low_utilisation_alarms() -> None:
    job = _job("j", "ml.g5.xlarge")
    early = {s.name.rsplit("/", 1)[1] for s in job_alarms(name_prefix=PREFIX, job=job, th=TH, now=T0)}
    late = {s.name.rsplit("/", 1)[1] for s in job_alarms(name_prefix=PREFIX, job=job, th=TH, now=WARM)}
    assert early == {"DiskHigh", "MemoryHigh", "GpuMemoryHigh"}
    assert late == set(KINDS)
    not_started = RunningJob(name="j", hosts=job.hosts, started=None)
    assert "GpuUtilizationLow" not in {s.name.rsplit("/", 1)[1] for s in job_alarms(
        name_prefix=PREFIX, job=not_started, th=TH, now=WARM + timedelta(days=1))}  # fmt: skip


def test_hosts_with_unknown_gpu_counts_get_no_gpu_alarm() -> None:
    for job in (_job("u", "ml.p9.96xlarge"), _job("c", "ml.m5.xlarge")):
        kinds = {s.name.rsplit("/", 1)[1] for s in job_alarms(name_prefix=PREFIX, job=job, th=TH, now=WARM)}
        assert kinds == {"DiskHigh", "MemoryHigh"}


def test_alarm_names_parse_back_only_for_this_deployment() -> None:
    name = alarm_name(PREFIX, "resnet-1", "algo-12", "DiskHigh")
    assert name == "profstack/job/resnet-1/algo-12/DiskHigh"
    assert job_of_alarm(PREFIX, name) == "resnet-1"
    assert job_of_alarm("profstack-dev", name) is None
    assert job_of_alarm(PREFIX, "profstack-dev/job/resnet-1/algo-1/DiskHigh") is None
    assert job_of_alarm(PREFIX, "profstack/job/resnet-1/algo-1/SomethingElse") is None
    assert job_of_alarm(PREFIX, "profstack/job/a/b/algo-1/DiskHigh") is None


def test_fingerprint_changes_with_the_thresholds() -> None:
    job = _job("j", "ml.g5.xlarge")
    from dataclasses import replace

    a = _by_name(job_alarms(name_prefix=PREFIX, job=job, th=TH, now=WARM))
    b = _by_name(job_alarms(name_prefix=PREFIX, job=job, th=replace(TH, disk_high_percent=80), now=WARM))
    disk = alarm_name(PREFIX, "j", "algo-1", "DiskHigh")
    assert a[disk].fingerprint != b[disk].fingerprint
    gpu = alarm_name(PREFIX, "j", "algo-1", "GpuMemoryHigh")
    assert a[gpu].fingerprint == b[gpu].fingerprint


# --- convergence against moto's CloudWatch --------------------------------------------------------------------------


@pytest.fixture
def cloudwatch(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def _alarms(cloudwatch: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        out.update({a["AlarmName"]: a for a in page["MetricAlarms"]})
    return out


def _foreign_alarm(cloudwatch: Any, name: str) -> None:
    """An alarm this manager did not create (no managed-by tag)."""
    cloudwatch.put_metric_alarm(
        AlarmName=name,
        MetricName="x",
        Namespace="y",
        Statistic="Average",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanThreshold",
    )


def test_sync_creates_updates_and_deletes_one_jobs_alarms(cloudwatch: Any) -> None:
    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC)
    sm = FakeSageMaker()
    sm.set(describe("job-a", "InProgress", count=2))
    # WHEN the job runs, before and after the warm-up
    first = sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=T0)
    assert len(first.created) == 2 * 3
    second = sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    assert len(second.created) == 2 * 2
    assert second.unchanged == 2 * 3
    alarms = _alarms(cloudwatch)
    assert len(alarms) == 10
    gpu = alarms[alarm_name(PREFIX, "job-a", "algo-2", "GpuUtilizationLow")]
    assert gpu["AlarmActions"] == [TOPIC]
    assert gpu["Threshold"] == TH.gpu_utilization_low_percent
    assert [m.get("Expression") for m in gpu["Metrics"]] == [None, "gpu / 8"]
    # AND a repeated sync changes nothing
    assert sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM).unchanged == 10
    # WHEN it ends THEN every alarm of the job goes, and only those
    _foreign_alarm(cloudwatch, "someone-elses-alarm")
    sm.set(describe("job-a", "Failed", count=2))
    ended = sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    assert len(ended.deleted) == 10
    assert set(_alarms(cloudwatch)) == {"someone-elses-alarm"}


def test_an_alarm_named_like_a_job_alarm_but_not_created_here_is_never_deleted(cloudwatch: Any) -> None:
    # GIVEN someone else's alarm whose name parses as job-a's GPU alarm (no managed-by tag), and job-a running
    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC, manager="profstack")
    impostor = alarm_name(PREFIX, "job-a", "algo-9", "GpuUtilizationLow")
    _foreign_alarm(cloudwatch, impostor)
    sm = FakeSageMaker()
    sm.set(describe("job-a", "InProgress", count=1))
    sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    ours = set(_alarms(cloudwatch)) - {impostor}
    # THEN the manager's own alarms carry the tag that proves it made them
    for name in ours:
        arn = _alarms(cloudwatch)[name]["AlarmArn"]
        assert {"Key": MANAGED_BY_TAG, "Value": "profstack"} in cloudwatch.list_tags_for_resource(ResourceARN=arn)[
            "Tags"
        ]
    # WHEN the job ends and a reconcile runs (before: the look-alike was deleted as a stale alarm of job-a)
    sm.set(describe("job-a", "Completed", count=1))
    ended = sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    reconcile(jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    # THEN the manager's alarms go and the look-alike stays, named as foreign
    assert set(ended.deleted) == ours
    assert set(_alarms(cloudwatch)) == {impostor}
    assert store.foreign == [impostor]
    # AND another deployment's manager (another name prefix) does not take this one's alarms as its own
    sm.set(describe("job-a", "InProgress", count=1))
    sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    other = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC, manager="other-team")
    assert other.list(PREFIX) == {}


def test_a_job_name_that_extends_another_is_not_touched(cloudwatch: Any) -> None:
    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC)
    sm = FakeSageMaker()
    sm.set(describe("job-a-2", "InProgress", count=1))
    sync_job("job-a-2", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    # WHEN a job called job-a (a prefix of job-a-2) ends
    result = sync_job("job-a", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    # THEN job-a-2's alarms stay
    assert result.deleted == []
    assert all(job_of_alarm(PREFIX, n) == "job-a-2" for n in _alarms(cloudwatch))


def test_reconcile_removes_orphans_adds_missed_jobs_and_writes_the_dashboard(cloudwatch: Any) -> None:
    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC)
    sm = FakeSageMaker()
    sm.set(describe("gone", "InProgress", count=1))
    sync_job("gone", jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    sm.set(describe("gone", "Stopped", count=1))  # its terminal event was lost
    sm.set(describe("missed", "InProgress", instance_type="ml.g5.12xlarge", count=1))  # its InProgress event was lost
    result = reconcile(jobs=sm, alarms=store, settings=SETTINGS, now=WARM)
    assert len(result.deleted) == 5
    assert len(result.created) == 5
    assert {job_of_alarm(PREFIX, n) for n in _alarms(cloudwatch)} == {"missed"}
    body = json.loads(cloudwatch.get_dashboard(DashboardName=SETTINGS.dashboard_name)["DashboardBody"])
    gpu_widget = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("GPU utilisation"))
    expressions = [row[0]["expression"] for row in gpu_widget["properties"]["metrics"] if isinstance(row[0], dict)]
    assert expressions == ["m0 / 4"]


def test_the_tag_filter_applies_to_alarms_too(cloudwatch: Any) -> None:
    from dataclasses import replace

    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC)
    sm = FakeSageMaker()
    sm.set(describe("tagged", "InProgress", count=1), tags={"profstack:profile": "true"})
    sm.set(describe("untagged", "InProgress", count=1))
    filtered = replace(SETTINGS, tag_filter=("profstack:profile", "true"))
    reconcile(jobs=sm, alarms=store, settings=filtered, now=WARM)
    assert {job_of_alarm(PREFIX, n) for n in _alarms(cloudwatch)} == {"tagged"}


# --- the property: any event history, then a reconcile, leaves exactly the running jobs' sets ------------------

JOBS = ("job-a", "job-b", "job-c", "job-a-2")
TERMINAL = ("Completed", "Failed", "Stopped")
TYPES = ("ml.p4d.24xlarge", "ml.g5.xlarge", "ml.g5.12xlarge", "ml.p9.96xlarge", "ml.m5.xlarge")


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Each job may start and may end; each state change is announced 0 (lost), 1 or more (duplicated)
    times, each announcement after a random delay, so events arrive late and out of order."""
    actions: list[tuple[Any, ...]] = []
    for job in JOBS:
        if not draw(st.booleans()):
            continue
        instance_type, count = draw(st.sampled_from(TYPES)), draw(st.integers(1, 3))
        start = draw(st.integers(0, 60))
        transitions = [(start, "InProgress")]
        if draw(st.booleans()):
            transitions.append((start + draw(st.integers(1, 60)), draw(st.sampled_from(TERMINAL))))
        for at, status in transitions:
            actions.append((at, 0, "state", job, status, instance_type, count, start))
            for _ in range(draw(st.integers(0, 3))):
                actions.append((at + draw(st.integers(0, 90)), 1, "event", job))
    if draw(st.booleans()):  # an event about a job SageMaker does not know
        actions.append((draw(st.integers(0, 120)), 1, "event", "never-existed"))
    return sorted(actions, key=lambda a: (a[0], a[1]))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories(), reconcile_after=st.integers(0, 240))
def test_after_any_event_history_and_a_reconcile_every_running_job_has_exactly_its_set(
    cloudwatch: Any, history: list[tuple[Any, ...]], reconcile_after: int
) -> None:
    store = CloudWatchAlarms(cloudwatch, topic_arn=TOPIC)
    existing = list(_alarms(cloudwatch))
    if existing:
        cloudwatch.delete_alarms(AlarmNames=existing)
    sm = FakeSageMaker()
    for action in history:
        now = T0 + timedelta(minutes=action[0])
        if action[2] == "state":
            _, _, _, job, status, instance_type, count, start = action
            sm.set(describe(job, status, instance_type=instance_type, count=count,
                            started=T0 + timedelta(minutes=start)))  # fmt: skip
        else:
            sync_job(action[3], jobs=sm, alarms=store, settings=SETTINGS, now=now)
    now = T0 + timedelta(minutes=(history[-1][0] if history else 0) + reconcile_after)
    reconcile(jobs=sm, alarms=store, settings=SETTINGS, now=now)
    running = [j for j in (running_job(sm.describe(n), sm, SETTINGS) for n in sm.in_progress()) if j]
    want = desired_by_name(name_prefix=PREFIX, jobs=running, th=TH, now=now)
    have = {n: a for n, a in _alarms(cloudwatch).items() if n.startswith(alarm_prefix(PREFIX))}
    assert set(have) == set(want)  # no orphan, nothing missing
    for name, alarm in have.items():
        assert alarm["Threshold"] == want[name].threshold
        assert alarm["AlarmDescription"] == want[name].description


# --- handler: real event fixtures, SageMaker through botocore's Stubber ---------------------------------------


@pytest.fixture
def handler_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    sys.modules.pop("lambdas.alarm_manager.handler", None)
    return importlib.import_module("lambdas.alarm_manager.handler")


def _sagemaker_stub(describe_payload: dict[str, Any]) -> tuple[Any, Stubber]:
    client = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_response(
        "describe_training_job", describe_payload, {"TrainingJobName": describe_payload["TrainingJobName"]}
    )
    return client, stubber


def _full_describe(detail: dict[str, Any], status: str) -> dict[str, Any]:
    keep = ("TrainingJobName", "TrainingJobArn", "ResourceConfig", "AlgorithmSpecification", "RoleArn",
            "OutputDataConfig", "StoppingCondition")  # fmt: skip
    payload = {k: detail[k] for k in keep}
    payload |= {
        "TrainingJobStatus": status,
        "SecondaryStatus": "Training" if status == "InProgress" else status,
        "CreationTime": T0,
        "TrainingStartTime": T0,
        "ModelArtifacts": {"S3ModelArtifacts": "s3://example-models/output/model.tar.gz"},
    }
    return payload


def test_handler_converges_on_the_real_in_progress_then_failed_events(
    handler_module: ModuleType, cloudwatch: Any
) -> None:
    env = ManagerEnv.from_environ(ENV)
    started = event("sagemaker_training_job_in_progress.json")
    client, stubber = _sagemaker_stub(_full_describe(started["detail"], "InProgress"))
    with stubber:
        result = handler_module.run(started, cloudwatch=cloudwatch, sagemaker=client, env=env, now=WARM)
    # ml.p4d.24xlarge x 2 -> 5 alarms per host
    assert len(result.created) == 10
    failed = event("sagemaker_training_job_failed.json")
    client, stubber = _sagemaker_stub(_full_describe(failed["detail"], "Failed"))
    with stubber:
        result = handler_module.run(failed, cloudwatch=cloudwatch, sagemaker=client, env=env, now=WARM)
    assert len(result.deleted) == 10
    assert _alarms(cloudwatch) == {}


def test_handler_trusts_sagemaker_not_the_event(handler_module: ModuleType, cloudwatch: Any) -> None:
    # GIVEN a late InProgress event for a job SageMaker already reports as Completed
    env = ManagerEnv.from_environ(ENV)
    late = event("sagemaker_training_job_in_progress.json")
    client, stubber = _sagemaker_stub(_full_describe(late["detail"], "Completed"))
    with stubber:
        result = handler_module.run(late, cloudwatch=cloudwatch, sagemaker=client, env=env, now=WARM)
    # THEN no alarm is created
    assert result.created == []
    assert _alarms(cloudwatch) == {}


def test_handler_rejects_other_events(handler_module: ModuleType) -> None:
    with pytest.raises(handler_module.UnknownEventError):
        handler_module.route(event("ec2_instance_state_change.json"))
    with pytest.raises(handler_module.UnknownEventError):
        handler_module.route(event("sagemaker_processing_job_completed.json"))
    assert handler_module.route({"detail-type": "Scheduled Event", "detail": {}}) is None


def test_env_is_validated_at_cold_start() -> None:
    assert ManagerEnv.from_environ(ENV).thresholds() == TH
    with pytest.raises(EnvError, match="GPU_MEMORY_HIGH_PERCENT"):
        ManagerEnv.from_environ({**ENV, "GPU_MEMORY_HIGH_PERCENT": "150"})
    with pytest.raises(EnvError, match="TAG_FILTER"):
        ManagerEnv.from_environ({**ENV, "TAG_FILTER_KEY": "k"})
    with pytest.raises(EnvError, match="NAME_PREFIX"):
        ManagerEnv.from_environ({k: v for k, v in ENV.items() if k != "NAME_PREFIX"})


# --- the live dashboard ------------------------------------------------------------------------------------------


def test_dashboard_body_is_bounded_and_skips_unknown_counts() -> None:
    many = RunningJob(
        name="wide", hosts=tuple(hosts_of({"InstanceType": "ml.g5.xlarge", "InstanceCount": 300})), started=T0
    )
    unknown = _job("odd", "ml.p9.96xlarge")
    body = json.loads(dashboard_body(jobs=[many, unknown], region="us-east-1", generated_at="now"))
    for widget in body["widgets"]:
        if widget["type"] == "metric":
            assert len(widget["properties"]["metrics"]) <= 500
    gpu = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("GPU utilisation"))
    assert len([r for r in gpu["properties"]["metrics"] if isinstance(r[0], dict)]) == MAX_HOSTS_PER_GRAPH
    assert "not shown" in body["widgets"][0]["properties"]["markdown"]
