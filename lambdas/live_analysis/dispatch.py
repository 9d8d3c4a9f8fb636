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
from botocore.config import Config

from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.live_analysis.jobs import DispatchError, TrainingJobs, due_jobs

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sagemaker import SageMakerClient

logger = Logger()
metrics = Metrics()
ENV = DispatchEnv.from_environ()


@lru_cache(maxsize=1)
def _clients() -> tuple[SageMakerClient, LambdaClient]:
    config = Config(retries={"mode": "standard", "max_attempts": 5})  # throttled Describe calls back off
    return boto3.client("sagemaker", config=config), boto3.client("lambda", config=config)


def dispatch(*, sagemaker: SageMakerClient, lambda_client: LambdaClient, env: DispatchEnv) -> list[str]:
    """Invoke the analyser for every due job; then, if some job could not be judged, raise (DispatchError): the
    function's Errors alarm fires, and the next run tries that job again."""
    failures: list[str] = []
    due = due_jobs(TrainingJobs(sagemaker), env.tag_filter, failures=failures)
    for job in due:
        lambda_client.invoke(
            FunctionName=env.analyser_function, InvocationType="Event", Payload=json.dumps({"job": job}).encode()
        )
    if failures:
        raise DispatchError(
            f"{len(failures)} running job(s) could not be judged (the others were dispatched): "
            + "; ".join(failures[:10])
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
