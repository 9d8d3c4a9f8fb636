"""Environment of the alarm manager, validated once at cold start (set by stacks/components/job_alarm_manager.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lambdas.common.env import EnvError, TagFilterEnv
from profstack.jobs.alarms import Thresholds

__all__ = ["EnvError", "ManagerEnv"]

Percent = Annotated[float, Field(gt=0, le=100)]


class ManagerEnv(TagFilterEnv):
    name_prefix: Annotated[str, Field(alias="NAME_PREFIX", pattern=r"^[a-z][a-z0-9-]{1,20}$")]
    topic_arn: Annotated[str, Field(alias="TOPIC_ARN", pattern=r"^arn:aws[a-z-]*:sns:")]
    region: Annotated[str, Field(alias="AWS_REGION", min_length=1)]
    dashboard_name: Annotated[str, Field(alias="DASHBOARD_NAME", min_length=1, max_length=255)]
    gpu_utilization_low_percent: Annotated[float, Field(alias="GPU_UTILIZATION_LOW_PERCENT", gt=0, le=100)]
    gpu_memory_high_percent: Annotated[float, Field(alias="GPU_MEMORY_HIGH_PERCENT", gt=0, le=100)]
    disk_high_percent: Annotated[float, Field(alias="DISK_HIGH_PERCENT", gt=0, le=100)]
    memory_high_percent: Annotated[float, Field(alias="MEMORY_HIGH_PERCENT", gt=0, le=100)]
    cpu_high_percent: Annotated[float, Field(alias="CPU_HIGH_PERCENT", gt=0, le=100)]
    cpu_bound_gpu_low_percent: Annotated[float, Field(alias="CPU_BOUND_GPU_LOW_PERCENT", gt=0, le=100)]
    evaluation_periods: Annotated[int, Field(alias="EVALUATION_PERIODS", ge=1, le=100)]
    warmup_minutes: Annotated[int, Field(alias="WARMUP_MINUTES", ge=0, le=1440)]

    def thresholds(self) -> Thresholds:
        return Thresholds(
            gpu_utilization_low_percent=self.gpu_utilization_low_percent,
            gpu_memory_high_percent=self.gpu_memory_high_percent,
            disk_high_percent=self.disk_high_percent,
            memory_high_percent=self.memory_high_percent,
            cpu_high_percent=self.cpu_high_percent,
            cpu_bound_gpu_low_percent=self.cpu_bound_gpu_low_percent,
            evaluation_periods=self.evaluation_periods,
            warmup_minutes=self.warmup_minutes,
        )
