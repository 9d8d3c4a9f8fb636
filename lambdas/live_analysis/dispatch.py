"""Lambda entry point of the live-analysis dispatcher, run every `processing.live.interval_minutes` by an
EventBridge schedule: which jobs run now (SageMaker, never an event), and one asynchronous analyser invocation per
eligible job, so one job's analysis never delays another's."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.live_analysis.jobs import TrainingJobs, due_jobs

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sagemaker import SageMakerClient

logger = Logger()
metrics = Metrics()
ENV = DispatchEnv.from_environ()


@lru_cache(maxsize=1)
def _clients() -> tuple[SageMakerClient, LambdaClient]:
    return boto3.client("sagemaker"), boto3.client("lambda")


def dispatch(*, sagemaker: SageMakerClient, lambda_client: LambdaClient, env: DispatchEnv) -> list[str]:
    due = due_jobs(TrainingJobs(sagemaker), env.tag_filter)
    for job in due:
        lambda_client.invoke(
            FunctionName=env.analyser_function, InvocationType="Event", Payload=json.dumps({"job": job}).encode()
        )
    return due


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    sagemaker, lambda_client = _clients()
    due = dispatch(sagemaker=sagemaker, lambda_client=lambda_client, env=ENV)
    metrics.add_metric(name="LiveJobsDispatched", unit=MetricUnit.Count, value=len(due))
    logger.info("live analysis dispatched", extra={"jobs": due[:100], "count": len(due)})
    return {"jobs": due}
