"""Per-container state built at cold start: validated env, boto3 clients, the engine.

Tests call `reset()` after changing the environment or starting a moto mock."""

from __future__ import annotations

from functools import lru_cache

import boto3
from botocore.config import Config

from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.logic import Clients, Engine, ProfStackEngine

# Standard retry mode backs off on S3 SlowDown / API throttling before the record fails.
_BOTO = Config(retries={"max_attempts": 8, "mode": "standard"}, connect_timeout=10, read_timeout=120)


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
    )


@lru_cache(maxsize=1)
def engine() -> Engine:
    return ProfStackEngine()


def reset() -> None:
    env.cache_clear()
    clients.cache_clear()
    engine.cache_clear()
