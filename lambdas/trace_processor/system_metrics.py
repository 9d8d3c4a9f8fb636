"""GetMetricData I/O for a job's instance metrics; the logic is in profstack/jobs/instance_metrics.py.

The processor's and the aggregate step's roles have `cloudwatch:GetMetricData` (no resource type;
stacks/components/trace_processor.py). Throttling and other transient errors are retried by the client
(botocore's standard mode) and then propagate; the caller, system_view.read_system_view, turns them into an
`unavailable` system section with the reason, so the report is still written. A missing permission yields an
incomplete result that says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from profstack.jobs.instance_metrics import (
    RawResults,
    SystemMetrics,
    batches,
    build,
    choose_period,
    hosts_for,
    job_window,
    metric_queries,
)

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

_ACCESS_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
MAX_PAGES = 50  # per call; bounds a misbehaving paginator


def fetch_system_metrics(cloudwatch: CloudWatchClient, describe: Mapping[str, Any], *, now: datetime) -> SystemMetrics:
    """The job's CPU, GPU, GPU memory, memory and disk per host over its window, per GPU / per vCPU."""
    job = str(describe["TrainingJobName"])
    hosts = hosts_for(describe)
    start, end = job_window(describe, now)
    period = choose_period(start, end, now)
    points = max(1, int((end - start).total_seconds() // period) + 1)
    raw = RawResults()
    try:
        for batch in batches(metric_queries(job, hosts, period), points):
            token: str | None = None
            for _ in range(MAX_PAGES):
                kwargs: dict[str, Any] = {
                    "MetricDataQueries": batch,
                    "StartTime": start,
                    "EndTime": end,
                    "ScanBy": "TimestampAscending",
                }
                if token:
                    kwargs["NextToken"] = token
                response = cloudwatch.get_metric_data(**kwargs)
                raw.add(response.get("MetricDataResults", []))
                token = response.get("NextToken")
                if not token:
                    break
            else:
                raw.partial = True
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code not in _ACCESS_CODES:
            raise
        raw.partial = True
        raw.messages.append(f"GetMetricData denied ({code}): grant cloudwatch:GetMetricData to the processor")
    return build(job=job, hosts=hosts, raw=raw, start=start, end=end, period=period)
