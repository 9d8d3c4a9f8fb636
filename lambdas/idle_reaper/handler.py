"""Lambda entry point of the idle reaper (EventBridge schedule). Thin: logic in reaper.py."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common import clients
from lambdas.idle_reaper.env import ReaperEnv
from lambdas.idle_reaper.reaper import ReapError, ReapResult, reap_idle_apps

logger = Logger()
metrics = Metrics()
ENV = ReaperEnv.from_environ()  # cold start: a bad deployment fails here, loudly


def record(result: ReapResult, *, dry_run: bool) -> dict[str, Any]:
    """Log every decision as one structured line and emit the counts as EMF metrics."""
    for decision in result.decisions:
        logger.info("tensorboard app decision", extra={"decision": asdict(decision), "dry_run": dry_run})
    summary = {action: result.count(action) for action in ("reaped", "would-reap", "keep", "skip", "error")}
    metrics.add_metric(name="TensorBoardAppsReaped", unit=MetricUnit.Count, value=summary["reaped"])
    metrics.add_metric(name="TensorBoardAppsIdle", unit=MetricUnit.Count, value=summary["would-reap"])
    metrics.add_metric(name="TensorBoardAppsReapErrors", unit=MetricUnit.Count, value=summary["error"])
    return {"dry_run": dry_run, **summary}


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = reap_idle_apps(
        clients.sagemaker(),
        domain_id=ENV.domain_id,
        user_profiles=ENV.user_profiles,
        idle_ttl=timedelta(minutes=ENV.idle_ttl_minutes),
        dry_run=ENV.dry_run,
        now=datetime.now(UTC),
    )
    summary = record(result, dry_run=ENV.dry_run)
    logger.info("reaper run", extra={"summary": summary})
    if summary["error"]:
        # Fail the invocation so the function's Errors metric (and any alarm on it) sees it.
        raise ReapError(f"{summary['error']} idle app(s) could not be deleted; see the decision log")
    return summary
