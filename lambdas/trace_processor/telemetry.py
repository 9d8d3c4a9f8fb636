"""What the processor functions tell CloudWatch: EMF metrics per job, and the structured line logged
when a record fails (its reason code, for the DLQ runbook). Powertools' Logger and Metrics instances
of one service share their state, so the entry points decorate the same objects."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdas.trace_processor.aws import TraceReadError, error_code
from lambdas.trace_processor.errors import TraceIOError, failure_reason
from lambdas.trace_processor.job import Outcome
from profstack.analysis import native
from profstack.jobs import metric_names as m

logger = Logger()
metrics = Metrics(namespace=m.NAMESPACE)  # not only from the environment: an import before it is set must not lose it

_UNITS = {
    m.TRACE_BYTES: MetricUnit.Bytes,
    m.GPU_IDLE_PERCENT: MetricUnit.Percent,
    m.DATALOADER_PERCENT: MetricUnit.Percent,
    m.LAUNCH_DELAY_P95_US: MetricUnit.Microseconds,
    m.STEP_TIME_P50_MS: MetricUnit.Milliseconds,
    m.STEP_TIME_P95_MS: MetricUnit.Milliseconds,
}


def _unit(name: str) -> MetricUnit:
    return _UNITS.get(name, MetricUnit.Count)


def _bind_service() -> None:
    """Powertools reads POWERTOOLS_SERVICE_NAME when ``Metrics()`` is built, at import: an import before the
    environment is set (a test session, a tool) would drop the ``service`` dimension the alarms select on.
    So it is read again whenever metrics are added (a default dimension: kept across flushes)."""
    service = os.environ.get("POWERTOOLS_SERVICE_NAME")
    if service and metrics.default_dimensions.get("service") != service:
        metrics.set_default_dimensions(service=service)


def publish_metrics(outcome: Outcome) -> None:
    """Each value twice: without the job dimension (alarms watch these) and with it (dashboards)."""
    _bind_service()
    for name, value in outcome.metrics.items():
        metrics.add_metric(name=name, unit=_unit(name), value=value)
        with single_metric(name=name, unit=_unit(name), value=value, namespace=m.NAMESPACE) as metric:
            metric.add_dimension(name=m.JOB_DIMENSION, value=outcome.job)
    if outcome.action in {"reported", "no_traces"}:
        metrics.add_metric(name=m.JOBS_REPORTED, unit=MetricUnit.Count, value=1)
    if outcome.action == "reported":  # the engine read traces: say which one (a dashboard can split by it)
        with single_metric(name=m.JOBS_ANALYSED, unit=MetricUnit.Count, value=1, namespace=m.NAMESPACE) as metric:
            metric.add_dimension(name=m.ENGINE_DIMENSION, value=native.backend())


def check_engine(expected: str | None) -> str | None:
    """At cold start: the engine that will run, and a warning logged once when the deployment expected another
    (PROFSTACK_EXPECT_ENGINE=c on a function whose bundle lost its C module runs ~2.5x slower)."""
    running = native.backend()
    if expected and expected != running:
        message = f"expected the {expected} engine, running {native.describe()}: analysis is slower, results the same"
        logger.warning(message, extra={"engine": running, "expected_engine": expected})
        return message
    return None


def record_failure(exc: BaseException, record: SQSRecord) -> None:
    """Count the failure (also per `reason`, a metric dimension) and log why, with the message id and how
    often SQS has delivered it."""
    reason = failure_reason(exc)
    _bind_service()
    metrics.add_metric(name=m.PROCESSING_FAILURES, unit=MetricUnit.Count, value=1)
    with single_metric(name=m.PROCESSING_FAILURES, unit=MetricUnit.Count, value=1, namespace=m.NAMESPACE) as metric:
        metric.add_dimension(name=m.REASON_DIMENSION, value=reason)
    code = exc.code if isinstance(exc, TraceIOError | TraceReadError) else error_code(exc)
    logger.error(
        "job processing failed; SQS will retry, then dead-letter",
        extra={
            "reason": reason,
            "error_code": code,
            "error": str(exc)[:2000],
            "error_type": type(exc).__name__,
            "message_id": record.message_id,
            "receive_count": int(record.attributes.approximate_receive_count or 0),
        },
        exc_info=True,
    )
