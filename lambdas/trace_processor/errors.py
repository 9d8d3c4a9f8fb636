"""Why a record failed: the processor's own errors and the short, stable reason code that the failure
log, the DLQ runbook and dashboards use."""

from __future__ import annotations

from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from lambdas.trace_processor.aws import ACCESS_CODES, THROTTLING_CODES, error_code
from lambdas.trace_processor.events import EventError


class ProcessingError(RuntimeError):
    """A failure worth retrying and, after max receives, dead-lettering. `reason` is a short code."""

    reason = "processing_error"


class JobNotFoundError(ProcessingError):
    reason = "job_not_found"


class CorruptTracesError(ProcessingError):
    reason = "corrupt_trace"


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
