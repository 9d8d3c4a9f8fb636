"""Per-container state of the processor functions, each built on first use: the validated env, the
boto3 clients, the engine and the idempotency store.

Tests call `reset()` after changing the environment or starting a moto mock."""

from __future__ import annotations

from functools import lru_cache

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

from lambdas.trace_processor.aws import BOTO_CONFIG, Clients
from lambdas.trace_processor.engine import Engine, ProfStackEngine
from lambdas.trace_processor.env import ProcessorEnv

_BOTO = BOTO_CONFIG
#: [job, status] (the key before re-analysis existed, unchanged), or [job, status, request] for a re-analysis
IDEMPOTENCY_KEY = (
    'detail."ProfStackReanalysis" && [detail."TrainingJobName", detail."TrainingJobStatus", '
    'detail."ProfStackReanalysis"] || [detail."TrainingJobName", detail."TrainingJobStatus"]'
)


@lru_cache(maxsize=1)
def env() -> ProcessorEnv:
    return ProcessorEnv.from_environ()


@lru_cache(maxsize=1)
def clients() -> Clients:
    current = env()
    return Clients(
        s3=boto3.client("s3", config=_BOTO),
        sagemaker=boto3.client("sagemaker", config=_BOTO),
        sns=boto3.client("sns", config=_BOTO),
        sfn=boto3.client("stepfunctions", config=_BOTO) if current.state_machine_arn else None,
        sts=boto3.client("sts", config=_BOTO) if current.reader_role_arn else None,
        # standard retry mode (BOTO_CONFIG) backs off on GetMetricData throttling before system_view gives up
        cloudwatch=boto3.client("cloudwatch", config=_BOTO),
    )


@lru_cache(maxsize=1)
def engine() -> Engine:
    return ProfStackEngine(timeline_window=env().timeline_window)


@lru_cache(maxsize=1)
def idempotency() -> tuple[IdempotencyConfig, DynamoDBPersistenceLayer]:
    config = IdempotencyConfig(
        # One report per job and terminal status, however often SageMaker repeats the event (A5); a re-analysis
        # request (profstack reports reanalyze) adds its own id, so it runs once more (and once per request).
        event_key_jmespath=IDEMPOTENCY_KEY,
        raise_on_no_idempotency_key=True,
        expires_after_seconds=env().idempotency_ttl_seconds,
    )
    return config, DynamoDBPersistenceLayer(table_name=env().idempotency_table)


def reset() -> None:
    env.cache_clear()
    clients.cache_clear()
    engine.cache_clear()
    idempotency.cache_clear()
