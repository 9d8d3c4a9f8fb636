"""What CloudWatch Logs does with Embedded Metric Format lines, for local runs (demo and tests).

In AWS, a Lambda's EMF log lines become metrics without any API call. Locally (moto), this turns the
captured lines into PutMetricData calls, so the same metric names and dimensions can be queried.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient


def emf_records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The EMF documents among log lines (JSON objects carrying `_aws.CloudWatchMetrics`)."""
    found: list[dict[str, Any]] = []
    for line in lines:
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("_aws"), dict) and "CloudWatchMetrics" in doc["_aws"]:
            found.append(doc)
    return found


def publish_emf(lines: Iterable[str], cloudwatch: CloudWatchClient) -> int:
    """PutMetricData for every metric in every EMF document; returns the number of data points."""
    count = 0
    for doc in emf_records(lines):
        stamp = datetime.fromtimestamp(doc["_aws"].get("Timestamp", 0) / 1000.0, tz=UTC)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive.get("Dimensions") or [[]]:
                dimensions = [{"Name": d, "Value": str(doc[d])} for d in dimension_set if d in doc]
                data = []
                for metric in directive.get("Metrics", []):
                    values = doc.get(metric["Name"])
                    for value in values if isinstance(values, list) else [values]:
                        if isinstance(value, int | float):
                            data.append(
                                {
                                    "MetricName": metric["Name"],
                                    "Dimensions": dimensions,
                                    "Timestamp": stamp,
                                    "Value": float(value),
                                    "Unit": metric.get("Unit", "None"),
                                }
                            )
                for start in range(0, len(data), 20):
                    cloudwatch.put_metric_data(Namespace=directive["Namespace"], MetricData=data[start : start + 20])  # type: ignore[arg-type]
                count += len(data)
    return count
