"""Lambda entry point of the alarm manager. Thin: parse the event, delegate to logic, log, count.

Two triggers: the `SageMaker Training Job State Change` rule (any status; converge that one job) and a
schedule (reconcile every job and rewrite the live dashboard).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.alarm_manager.aws import CloudWatchAlarms, SageMakerJobs
from lambdas.alarm_manager.env import ManagerEnv
from lambdas.alarm_manager.logic import Settings, SyncResult, reconcile, sync_job
from profstack.jobs.alarms import MANAGED_BY_TAG
from profstack.jobs.events import SCHEDULE_DETAIL_TYPE, TRAINING_DETAIL_TYPE

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sagemaker import SageMakerClient

logger = Logger()
metrics = Metrics()
ENV = ManagerEnv.from_environ()  # cold start: a bad deployment fails here, loudly


class UnknownEventError(ValueError):
    """Neither a training-job state change nor the reconcile schedule."""


@lru_cache(maxsize=1)
def _clients() -> tuple[CloudWatchClient, SageMakerClient]:
    return boto3.client("cloudwatch"), boto3.client("sagemaker")


def settings(env: ManagerEnv) -> Settings:
    return Settings(
        name_prefix=env.name_prefix,
        thresholds=env.thresholds(),
        tag_filter=env.tag_filter,
        dashboard_name=env.dashboard_name,
        region=env.region,
    )


def route(event: dict[str, Any]) -> str | None:
    """The job to converge, or None for a reconcile; UnknownEventError for anything else."""
    detail_type = event.get("detail-type")
    if detail_type == SCHEDULE_DETAIL_TYPE:
        return None
    if detail_type == TRAINING_DETAIL_TYPE and event.get("source") == "aws.sagemaker":
        job = (event.get("detail") or {}).get("TrainingJobName")
        if isinstance(job, str) and job:
            return job
    raise UnknownEventError(f"unexpected event: source={event.get('source')!r} detail-type={detail_type!r}")


def run(
    event: dict[str, Any], *, cloudwatch: CloudWatchClient, sagemaker: SageMakerClient, env: ManagerEnv, now: datetime
) -> SyncResult:
    alarms = CloudWatchAlarms(cloudwatch, topic_arn=env.topic_arn, manager=env.name_prefix)
    jobs = SageMakerJobs(sagemaker)
    job = route(event)
    if job is None:
        result = reconcile(jobs=jobs, alarms=alarms, settings=settings(env), now=now)
    else:
        result = sync_job(job, jobs=jobs, alarms=alarms, settings=settings(env), now=now)
    if alarms.foreign:
        result.warnings.append(
            f"{len(alarms.foreign)} alarm(s) named like job alarms were not created by this deployment "
            f"(no {MANAGED_BY_TAG}={env.name_prefix} tag) and were left alone"
        )
    return result


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    cloudwatch, sagemaker = _clients()
    result = run(event, cloudwatch=cloudwatch, sagemaker=sagemaker, env=ENV, now=datetime.now(UTC))
    summary = result.to_json()
    metrics.add_metric(name="JobAlarmsCreated", unit=MetricUnit.Count, value=len(result.created))
    metrics.add_metric(name="JobAlarmsDeleted", unit=MetricUnit.Count, value=len(result.deleted))
    for warning in result.warnings:
        logger.warning("alarm manager warning", extra={"warning": warning})
    logger.info("alarms converged", extra={"summary": summary, "trigger": event.get("detail-type")})
    return summary
