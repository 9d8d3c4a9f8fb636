"""Lambda entry point: SQS batch of training-job state-change events -> one report per job.

Parse, make idempotent, delegate to pipeline.process_job, publish metrics. A failed record is
reported back (ReportBatchItemFailures) so only it is retried; after max_receive_count receives SQS
moves it to the DLQ. The reason is logged as structured JSON (telemetry.record_failure).
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import idempotent_function
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.trace_processor import runtime
from lambdas.trace_processor.events import parse_event
from lambdas.trace_processor.pipeline import process_job
from lambdas.trace_processor.telemetry import check_engine, logger, metrics, publish_metrics, record_failure
from profstack.analysis.allocator import tune_malloc

runtime.env()  # cold start: a bad deployment fails here, loudly
tune_malloc()  # the function's process is ours: big blocks go back to the system (profstack/analysis/allocator.py)
check_engine(os.environ.get("PROFSTACK_EXPECT_ENGINE"))  # once per cold start: the engine that runs, as expected?
# Return every failed record instead of raising when the whole batch fails: same retry semantics,
# without counting an invocation error for an ordinary bad message.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def _process_event(event: dict[str, Any], final_attempt: bool = True) -> dict[str, Any]:
    outcome = process_job(
        parse_event(event),
        env=runtime.env(),
        clients=runtime.clients(),
        engine=runtime.engine(),
        final_attempt=final_attempt,
    )
    publish_metrics(outcome)
    logger.info("job processed", extra={"outcome": outcome.to_json()})
    return outcome.to_json()


def record_handler(record: SQSRecord) -> dict[str, Any]:
    config, store = runtime.idempotency()
    try:
        event = parse_event(record.body)
        logger.append_keys(job=event.job_name, status=event.status)
        process = idempotent_function(data_keyword_argument="event", config=config, persistence_store=store)
        # the last delivery before the DLQ publishes what it has; earlier ones retry transient faults
        final = int(record.attributes.approximate_receive_count or 1) >= runtime.env().max_receive_count
        result: dict[str, Any] = process(_process_event)(
            event=event.model_dump(mode="json", by_alias=True), final_attempt=final
        )
        return result
    except Exception as exc:
        record_failure(exc, record)
        raise
    finally:
        logger.remove_keys(["job", "status"])


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config, _ = runtime.idempotency()
    config.register_lambda_context(context)  # an invocation that dies lets its in-progress record expire
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return {"batchItemFailures": list(response["batchItemFailures"])}
