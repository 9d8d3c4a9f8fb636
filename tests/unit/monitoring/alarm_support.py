"""Shared pieces of the alarm-manager tests: thresholds, a SageMaker stand-in, describe payloads."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from lambdas.alarm_manager.logic import Settings
from profstack.jobs.alarms import Thresholds
from tests.conftest import EVENTS_DIR

PREFIX = "profstack"
TOPIC = "arn:aws:sns:us-east-1:123456789012:profstack-notifications"
T0 = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
TH = Thresholds(
    gpu_utilization_low_percent=30,
    gpu_memory_high_percent=95,
    disk_high_percent=90,
    memory_high_percent=90,
    cpu_high_percent=90,
    cpu_bound_gpu_low_percent=10,
    evaluation_periods=15,
    warmup_minutes=20,
)
SETTINGS = Settings(name_prefix=PREFIX, thresholds=TH, dashboard_name="profstack-running-jobs-per-gpu-us-east-1",
                    region="us-east-1")  # fmt: skip


def event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return data


def describe(
    job: str,
    status: str,
    *,
    instance_type: str = "ml.p4d.24xlarge",
    count: int = 2,
    started: datetime | None = T0,
    groups: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    resource: dict[str, Any] = (
        {"InstanceGroups": groups, "VolumeSizeInGB": 100}
        if groups
        else {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 100}
    )
    out: dict[str, Any] = {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}",
        "TrainingJobStatus": status,
        "SecondaryStatus": "Training" if status == "InProgress" else status,
        "ResourceConfig": resource,
        "CreationTime": T0 - timedelta(minutes=5),
    }
    if started is not None:
        out["TrainingStartTime"] = started
    return out


class FakeSageMaker:
    """The truth about jobs, as DescribeTrainingJob / ListTrainingJobs / ListTags would tell it."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.job_tags: dict[str, dict[str, str]] = {}

    def set(self, payload: Mapping[str, Any], tags: Mapping[str, str] | None = None) -> None:
        self.jobs[str(payload["TrainingJobName"])] = dict(payload)
        self.job_tags[str(payload["TrainingJobArn"])] = dict(tags or {})

    def describe(self, job: str) -> Mapping[str, Any] | None:
        return self.jobs.get(job)

    def in_progress(self) -> list[str]:
        return [name for name, d in self.jobs.items() if d["TrainingJobStatus"] == "InProgress"]

    def tags(self, arn: str) -> dict[str, str]:
        return self.job_tags.get(arn, {})
