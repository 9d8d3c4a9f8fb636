"""Lambda entry point: SQS batch of training-job state-change events -> one report per job.

Thin on purpose: parse, make idempotent, delegate to logic.process_job, publish metrics.
A failed record is reported back (ReportBatchItemFailures) so only it is retried; after
max_receive_count receives SQS moves it to the DLQ. The reason is logged as structured JSON.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.trace_processor import metric_names as m
from lambdas.trace_processor import runtime
from lambdas.trace_processor.aws import ACCESS_CODES, THROTTLING_CODES, error_code
from lambdas.trace_processor.events import EventError, parse_event
from lambdas.trace_processor.logic import Outcome, ProcessingError, process_job

logger = Logger()
metrics = Metrics()
# Return every failed record instead of raising when the whole batch fails: same retry semantics,
# without counting an invocation error for an ordinary bad message.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

_UNITS = {
    m.TRACE_BYTES: MetricUnit.Bytes,
    m.GPU_IDLE_PERCENT: MetricUnit.Percent,
    m.DATALOADER_PERCENT: MetricUnit.Percent,
    m.LAUNCH_DELAY_P95_US: MetricUnit.Microseconds,
    m.STEP_TIME_P50_MS: MetricUnit.Milliseconds,
    m.STEP_TIME_P95_MS: MetricUnit.Milliseconds,
}


def failure_reason(exc: BaseException) -> str:
    """A short, stable code for dashboards and the DLQ runbook."""
    if isinstance(exc, ProcessingError):
        return exc.reason
    if isinstance(exc, EventError):
        return "malformed_event"
    if isinstance(exc, IdempotencyAlreadyInProgressError):
        return "duplicate_in_progress"
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return "throttled"
    if code in ACCESS_CODES:
        return "access_denied"
    return f"error:{code}"


def _unit(name: str) -> MetricUnit:
    return _UNITS.get(name, MetricUnit.Count)


def publish_metrics(outcome: Outcome) -> None:
    """Each value twice: without the job dimension (alarms watch these) and with it (dashboards)."""
    for name, value in outcome.metrics.items():
        metrics.add_metric(name=name, unit=_unit(name), value=value)
        with single_metric(name=name, unit=_unit(name), value=value, namespace=m.NAMESPACE) as metric:
            metric.add_dimension(name=m.JOB_DIMENSION, value=outcome.job)
    if outcome.action in {"reported", "no_traces"}:
        metrics.add_metric(name=m.JOBS_REPORTED, unit=MetricUnit.Count, value=1)


@lru_cache(maxsize=1)
def _idempotency() -> tuple[IdempotencyConfig, DynamoDBPersistenceLayer]:
    env = runtime.env()
    config = IdempotencyConfig(
        # One report per job and terminal status, however often SageMaker repeats the event (A5).
        event_key_jmespath='[detail."TrainingJobName", detail."TrainingJobStatus"]',
        raise_on_no_idempotency_key=True,
        expires_after_seconds=env.idempotency_ttl_seconds,
    )
    return config, DynamoDBPersistenceLayer(table_name=env.idempotency_table)


def _process_event(event: dict[str, Any]) -> dict[str, Any]:
    parsed = parse_event(event)
    outcome = process_job(parsed, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    publish_metrics(outcome)
    logger.info("job processed", extra={"outcome": outcome.to_json()})
    return outcome.to_json()


def record_handler(record: SQSRecord) -> dict[str, Any]:
    config, store = _idempotency()
    attempt = int(record.attributes.approximate_receive_count or 0)
    try:
        event = parse_event(record.body)
        logger.append_keys(job=event.job_name, status=event.status)
        process = idempotent_function(data_keyword_argument="event", config=config, persistence_store=store)(
            _process_event
        )
        result: dict[str, Any] = process(event=event.model_dump(mode="json", by_alias=True))
        return result
    except Exception as exc:
        metrics.add_metric(name=m.PROCESSING_FAILURES, unit=MetricUnit.Count, value=1)
        logger.error(
            "job processing failed; SQS will retry, then dead-letter",
            extra={
                "reason": failure_reason(exc),
                "error": str(exc)[:2000],
                "error_type": type(exc).__name__,
                "message_id": record.message_id,
                "receive_count": attempt,
            },
            exc_info=True,
        )
        raise
    finally:
        logger.remove_keys(["job", "status"])


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config, _ = _idempotency()
    # Lets an in-progress record expire when an invocation dies, so a redelivery can finish the job.
    config.register_lambda_context(context)
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return {"batchItemFailures": list(response["batchItemFailures"])}
