"""One job through the across-jobs steps, the same in the Lambda, the demo and the tests: cost into the
summary, then (for a job with a family) the comparison with the family's baseline and the Regression
finding, then the history rows that carry all of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profstack.analysis.summary import add_findings
from profstack.history.cost import JobResources, job_cost
from profstack.history.prices import PriceTable
from profstack.history.regression import RULE_ID, HistoryReader, JobHistory, RegressionThresholds, find_regression
from profstack.history.rows import JobInfo, history_rows


def add_regression_finding(summary: dict[str, Any], finding: Mapping[str, Any] | None) -> None:
    """Replace any earlier Regression finding (a re-delivered job) and keep the findings in severity order;
    an UnreadableTraceFiles warning stays first, as the engine puts it (``summary.add_findings``)."""
    add_findings(summary, [finding] if finding is not None else [], replace=lambda f: f.get("rule_id") == RULE_ID)


def enrich(
    summary: dict[str, Any],
    *,
    info: JobInfo,
    resources: JobResources,
    prices: PriceTable,
    reader: HistoryReader | None,
    thresholds: RegressionThresholds,
) -> dict[str, list[dict[str, Any]]]:
    """Adds ``cost`` and the Regression finding to ``summary`` (in place); returns the job's history rows."""
    summary["cost"] = job_cost(summary, resources, prices)
    if info.family and reader is not None:
        rows = history_rows(summary, info)
        _, finding = find_regression(
            reader,
            JobHistory(rows["jobs"][0], rows["kernels"]),
            user=info.user,
            family=info.family,
            ended_at=info.ended_at,
            th=thresholds,
        )
        add_regression_finding(summary, finding)
    return history_rows(summary, info)
