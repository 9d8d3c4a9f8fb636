"""Lambda entry point of the fan-out aggregate step: partials -> job report, metrics, notification.

A transient CloudWatch fault on an attempt that is not the last raises SystemMetricsTransientError out of the
handler: Step Functions retries the step on that error name (stacks/components/fanout_workflow.py), and
nothing was written by that run (fanout.aggregate reads the system view first)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.trace_processor import runtime
from lambdas.trace_processor.env import EnvError
from lambdas.trace_processor.errors import SystemMetricsTransientError
from lambdas.trace_processor.fanout import aggregate
from lambdas.trace_processor.telemetry import metrics, publish_metrics

# cold start: a bad deployment fails here, loudly; without the attempt count the step could not tell its last
# attempt, and would have to choose between storing a transient fault and failing the execution
if runtime.env().aggregate_max_attempts is None:
    raise EnvError("AGGREGATE_MAX_ATTEMPTS is not set (stacks/components/fanout_workflow.py sets it)")
logger = Logger()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        outcome = aggregate(event, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    except SystemMetricsTransientError as exc:
        logger.warning(
            "system metrics failed transiently; Step Functions retries the aggregate step",
            extra={
                "reason": exc.reason,
                "error": str(exc)[:2000],
                "attempt": event.get("attempt"),
                "max_attempts": runtime.env().aggregate_max_attempts,
            },
        )
        raise
    publish_metrics(outcome)
    logger.info("job aggregated", extra={"outcome": outcome.to_json()})
    return outcome.to_json()
