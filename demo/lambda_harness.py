"""Run a Lambda handler in-process the way AWS would call it: SQS event-source-mapping events, a
Lambda context, the function's environment. Shared by the demo and the tests (moto's Lambda needs
Docker, so both call the real handlers directly)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:profstack-jobs"


def sqs_record(
    body: Mapping[str, Any] | str,
    *,
    receive_count: int = 1,
    message_id: str | None = None,
    receipt_handle: str | None = None,
    md5_of_body: str = "0" * 32,
    queue_arn: str = QUEUE_ARN,
) -> dict[str, Any]:
    """An SQS record as the Lambda event-source mapping delivers it (EventBridge event JSON as body)."""
    now_ms = str(int(time.time() * 1000))
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": receipt_handle or "AQEB" + uuid.uuid4().hex,
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": now_ms,
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": now_ms,
        },
        "messageAttributes": {},
        "md5OfBody": md5_of_body,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": queue_arn.split(":")[3],
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def sqs_event_from_messages(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event for messages received with sqs.receive_message (AttributeNames=["All"])."""
    return sqs_event(
        *(
            sqs_record(
                msg["Body"],
                receive_count=int(msg.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
                message_id=msg["MessageId"],
                receipt_handle=msg["ReceiptHandle"],
                md5_of_body=msg.get("MD5OfBody", ""),
                queue_arn=queue_arn,
            )
            for msg in messages
        )
    )


@dataclass
class LambdaContext:
    """The attributes of the Lambda context object the handlers and Powertools read."""

    function_name: str = "profstack-trace-processor"
    memory_limit_in_mb: int = 1769  # the processor's configured memory (config processing.lambda_memory_mb)
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:profstack-trace-processor"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timeout_s: float = 900.0
    _deadline: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._deadline - time.monotonic()) * 1000), 0)


@contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `values` set; every variable is restored (or removed) afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def set_emulated_training_times(job: str, *, start: datetime, end: datetime) -> None:
    """moto creates a training job straight into Completed with start == end (no duration, facts C); set the
    times the job really had, in the emulator of this process (moto server threads or mock_aws)."""
    from moto.sagemaker.models import sagemaker_backends

    fake = sagemaker_backends[ACCOUNT][REGION].training_jobs[job]
    fake.training_start_time = start
    fake.training_end_time = end
