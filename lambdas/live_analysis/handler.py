"""Lambda entry point of the live analyser: one running job per invocation ({"job": <name>}, sent by the
dispatcher). Thin: validate the input, delegate to logic.analyse_job, log, count. Nothing in the input is trusted
beyond the job's name: status, owner and folders come from SageMaker (logic.py)."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.live_analysis.env import LiveEnv
from lambdas.live_analysis.logic import analyse_job
from lambdas.trace_processor.aws import BOTO_CONFIG, Clients
from lambdas.trace_processor.engine import Engine, ProfStackEngine
from lambdas.trace_processor.telemetry import check_engine
from profstack.analysis.allocator import tune_malloc
from profstack.tensorboard.names import TRAINING_JOB_NAME_RE

logger = Logger()
metrics = Metrics()
ENV = LiveEnv.from_environ()  # cold start: a bad deployment fails here, loudly
tune_malloc()
check_engine(os.environ.get("PROFSTACK_EXPECT_ENGINE"))


class BadInputError(ValueError):
    """Not {"job": <a SageMaker training job name>}."""


@lru_cache(maxsize=1)
def _clients() -> Clients:
    return Clients(
        s3=boto3.client("s3", config=BOTO_CONFIG),
        sagemaker=boto3.client("sagemaker", config=BOTO_CONFIG),
        sns=boto3.client("sns", config=BOTO_CONFIG),
        sts=boto3.client("sts", config=BOTO_CONFIG) if ENV.reader_role_arn else None,
    )


@lru_cache(maxsize=1)
def _engine() -> Engine:
    return ProfStackEngine(timeline_window=ENV.timeline_window)


def job_of(event: Any) -> str:
    job = event.get("job") if isinstance(event, dict) else None
    if not isinstance(job, str) or not TRAINING_JOB_NAME_RE.fullmatch(job):
        raise BadInputError(f"expected {{'job': <training job name>}}, got {str(event)[:120]!r}")
    return job


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    job = job_of(event)
    logger.append_keys(job=job)
    outcome = analyse_job(job, env=ENV, clients=_clients(), engine=_engine())
    for name, value in outcome.metrics().items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    if outcome.stopped:
        logger.warning("training job stopped by a rule action", extra={"rules": outcome.stopped})
    logger.info("live analysis", extra={"outcome": outcome.to_json()})
    return outcome.to_json()
