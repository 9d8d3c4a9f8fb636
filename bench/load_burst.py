"""A burst of job-end events through the processor in moto (issue 11, item 5).

    python -m bench.load_burst 1000

N training jobs end at once; their Completed events go through the EventBridge rule into the job queue,
a tenth of them twice (SageMaker repeats events, docs/platform-facts.md A5), shuffled so duplicates and
jobs arrive out of order, with late InProgress events the rule must drop. Pollers take one message at a
time (batch size 1, like the event-source mapping) and call the real handler in-process; a failed record
stays on the queue (visibility 0 here) and is received again, as SQS would redeliver it. Checked: every job
has exactly one summary and one report, one e-mail per job, nothing dead-lettered.

Moto runs in this one process, so the pollers run one after another: the burst's wall time here is the
sum of the invocations. In AWS the event-source mapping runs at most `processing.reserved_concurrency`
invocations at once (max_concurrency = reserved concurrency, stacks/components/trace_processor.py), so
the burst drains in about (sum of invocation times) / reserved_concurrency.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SMALL_TRACE = REPO_ROOT / "samples" / "traces" / "hta" / "triton_example" / "triton_example.json.gz"


@dataclass
class BurstResult:
    jobs: int
    events_sent: int
    invocations: int
    record_failures: int
    wall_s: float
    reports: Counter[str]
    summaries: Counter[str]
    emails: Counter[str]
    dead_lettered: int

    def invocation_mean_s(self) -> float:
        return self.wall_s / max(self.invocations, 1)

    def to_json(self, reserved_concurrency: int) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "events_sent": self.events_sent,
            "invocations": self.invocations,
            "record_failures": self.record_failures,
            "wall_s_in_process": round(self.wall_s, 1),
            "mean_invocation_s": round(self.invocation_mean_s(), 3),
            "reserved_concurrency": reserved_concurrency,
            "estimated_drain_s_in_aws": round(self.wall_s / reserved_concurrency, 1),
            "jobs_with_one_report": sum(1 for v in self.reports.values() if v == 1),
            "jobs_with_one_email": sum(1 for v in self.emails.values() if v == 1),
            "dead_lettered": self.dead_lettered,
        }


def run_burst(plane: Any, n: int, *, seed: int = 11, duplicate_share: float = 0.1) -> BurstResult:
    """Inside mock_aws, with the processor's environment set (see tests/functional/test_load_burst.py)."""
    from demo.lambda_harness import LambdaContext, sqs_event
    from lambdas.trace_processor import handler
    from profstack import layout
    from tests.functional.processing_support import TRACE_BUCKET, job_event, register_training_job

    rng = random.Random(seed)
    jobs = [f"burst-{i:05d}" for i in range(n)]
    body = SMALL_TRACE.read_bytes()
    for i, job in enumerate(jobs):
        user = ("alice", "bob")[i % 2]
        register_training_job(plane, job, user=user)
        plane.s3.put_object(
            Bucket=TRACE_BUCKET, Key=f"{layout.job_tensorboard_prefix(user, job)}algo-1_1.1.pt.trace.json.gz", Body=body
        )
    events = [job_event(job, user=("alice", "bob")[i % 2]) for i, job in enumerate(jobs)]
    events += [dict(e) for e in rng.sample(events, int(n * duplicate_share))]  # SageMaker's repeats
    events += [job_event(job, "InProgress") for job in rng.sample(jobs, max(1, n // 50))]  # late, dropped
    rng.shuffle(events)
    for start in range(0, len(events), 10):
        entries = [
            {"Source": e["source"], "DetailType": e["detail-type"], "Detail": json.dumps(e["detail"])}
            for e in events[start : start + 10]
        ]
        plane.events.put_events(Entries=entries)

    invocations = failures = 0
    started = time.monotonic()
    idle = 0
    while idle < 3:
        got = plane.sqs.receive_message(
            QueueUrl=plane.queue_url, MaxNumberOfMessages=1, AttributeNames=["ApproximateReceiveCount"]
        )
        messages = got.get("Messages", [])
        if not messages:
            idle += 1
            continue
        idle = 0
        msg = messages[0]
        record = {
            "messageId": msg["MessageId"],
            "receiptHandle": msg["ReceiptHandle"],
            "body": msg["Body"],
            "attributes": {"ApproximateReceiveCount": msg["Attributes"]["ApproximateReceiveCount"]},
            "messageAttributes": {},
            "md5OfBody": msg["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:profstack-jobs",
            "awsRegion": "us-east-1",
        }
        invocations += 1
        response = handler.handler(sqs_event(record), LambdaContext())
        if response["batchItemFailures"]:
            failures += 1  # left on the queue: received again
        else:
            plane.sqs.delete_message(QueueUrl=plane.queue_url, ReceiptHandle=msg["ReceiptHandle"])
    wall = time.monotonic() - started

    reports: Counter[str] = Counter()
    summaries: Counter[str] = Counter()
    for key in plane.list_keys("reports/"):
        job = key.split("/")[2]
        if key.endswith("/report.html"):
            reports[job] += 1
        elif key.endswith("/summary.json"):
            summaries[job] += 1
    emails: Counter[str] = Counter()
    for note in plane.notifications():
        emails[note["MessageAttributes"]["job"]["Value"]] += 1
    dlq = plane.sqs.get_queue_attributes(QueueUrl=plane.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
    return BurstResult(
        jobs=n,
        events_sent=len(events),
        invocations=invocations,
        record_failures=failures,
        wall_s=wall,
        reports=reports,
        summaries=summaries,
        emails=emails,
        dead_lettered=int(dlq["Attributes"]["ApproximateNumberOfMessages"]),
    )


def main(argv: list[str]) -> int:
    import os

    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    from moto import mock_aws

    from demo.lambda_harness import patched_environ
    from tests.functional.processing_support import create_data_plane, processor_environ

    n = int(argv[0]) if argv else 1000
    with mock_aws():
        plane = create_data_plane(max_receive_count=5)
        with patched_environ(processor_environ(plane.topic_arn)):
            from lambdas.trace_processor import runtime

            runtime.reset()  # clients, engine and the idempotency store, made anew inside moto
            result = run_burst(plane, n)
    print(json.dumps(result.to_json(reserved_concurrency=5)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
