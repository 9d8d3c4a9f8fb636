"""Lambda entry point of the fan-out aggregate step: partials -> job report, metrics, notification."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.trace_processor import runtime
from lambdas.trace_processor.fanout import aggregate
from lambdas.trace_processor.telemetry import publish_metrics

runtime.env()  # cold start: a bad deployment fails here, loudly
logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outcome = aggregate(event, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    publish_metrics(outcome)
    logger.info("job aggregated", extra={"outcome": outcome.to_json()})
    return outcome.to_json()
