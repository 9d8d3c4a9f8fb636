"""Why a record failed: the processor's own errors and the short, stable reason code that the failure
log, the failure metric's `reason` dimension, the DLQ runbook and dashboards use.

    malformed_event      the SQS body is not a training-job event ProfStack handles (or a forged job name)
    job_not_found        DescribeTrainingJob does not know the job
    not_owned            the job's owner tag names no configured user, or the message claims another owner
    status_mismatch      the message's TrainingJobStatus is not the one DescribeTrainingJob reports (a forged
                         message, or one the API does not reflect yet): retried, nothing processed
    io                   a trace could not be read (throttling, resets past the resume budget, 412, 416,
                         access denied): retried, never a partial report
    corrupt_trace        no trace file of the job could be analysed
    cloudwatch_transient GetMetricData still throttled / failed transiently after botocore's retries, on a
                         delivery before the last: retried (the last delivery publishes the report with the
                         system section "unavailable" rather than lose it). The fan-out aggregate step
                         raises the same error before its last attempt, and Step Functions retries it.
    idempotency_store    the idempotency table could not be read or written
    duplicate_in_progress  another invocation is processing the same job and status
    throttled / access_denied / error:<code>  any other AWS error
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
)

from lambdas.trace_processor.aws import ACCESS_CODES, THROTTLING_CODES, TraceReadError, error_code
from lambdas.trace_processor.events import EventError


class ProcessingError(RuntimeError):
    """A failure worth retrying and, after max receives, dead-lettering. `reason` is a short code."""

    reason = "processing_error"


class JobNotFoundError(ProcessingError):
    reason = "job_not_found"


class NotOwnedError(ProcessingError):
    """The job's owner (its SageMaker tag) is not a configured user, or the message names another."""

    reason = "not_owned"


class StatusMismatchError(ProcessingError):
    """The message says the job ended with a status SageMaker does not report (yet): nothing is processed."""

    reason = "status_mismatch"


class CorruptTracesError(ProcessingError):
    reason = "corrupt_trace"


class SystemMetricsTransientError(ProcessingError):
    """CloudWatch failed transiently on a delivery that SQS will repeat, or on a fan-out aggregate attempt that
    Step Functions will repeat (it retries on this class name: stacks/components/fanout_workflow.py): retry
    rather than store a report whose system section says "unavailable" for a fault that may pass."""

    reason = "cloudwatch_transient"


class TraceIOError(ProcessingError):
    """A trace could not be read for a reason that may pass (the record is retried, no report is stored)."""

    reason = "io"

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def failure_reason(exc: BaseException) -> str:
    """A short, stable code for dashboards and the DLQ runbook."""
    if isinstance(exc, ProcessingError):
        return exc.reason
    if isinstance(exc, TraceReadError):
        return "io"
    if isinstance(exc, EventError):
        return "malformed_event"
    if isinstance(exc, IdempotencyAlreadyInProgressError):
        return "duplicate_in_progress"
    if isinstance(exc, IdempotencyPersistenceLayerError):
        return "idempotency_store"
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return "throttled"
    if code in ACCESS_CODES:
        return "access_denied"
    return f"error:{code}"
