"""Lambda entry point: the provider's onEvent. Thin: env, client, logging; logic in provider.py."""

from __future__ import annotations

from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.tensorboard_app import provider
from lambdas.tensorboard_app.env import ProviderEnv

logger = Logger()
ENV = ProviderEnv.from_environ()  # cold start: a bad deployment fails here, loudly
SAGEMAKER = boto3.client("sagemaker")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(
        request_type=event.get("RequestType"),
        physical_id=event.get("PhysicalResourceId"),
        user_profile=(event.get("ResourceProperties") or {}).get("UserProfileName"),
    )
    result = provider.on_event(event, SAGEMAKER, managed_domain_id=ENV.domain_id)
    logger.info("on_event", extra={"result": result})
    return result
