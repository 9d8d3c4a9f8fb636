"""What the e-mail, the CLI and the metrics say about a job's history: its regression against the family and
its GPU cost. Pure functions over the summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profstack.history.cost import cost_lines
from profstack.history.regression import RULE_ID
from profstack.jobs import metric_names as m


def regressions(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [f for f in summary.get("findings") or [] if isinstance(f, Mapping) and f.get("rule_id") == RULE_ID]


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """Lines for the e-mail: the regression (with its baseline jobs) and the cost, each block after a blank."""
    lines: list[str] = []
    for finding in regressions(summary):
        evidence = finding.get("evidence") if isinstance(finding.get("evidence"), Mapping) else {}
        baseline = ", ".join(str(j) for j in (evidence or {}).get("baseline_jobs") or [])
        lines += ["", f"Regression: {finding.get('message')}", f"  Baseline jobs: {baseline or 'none'}"]
    cost = cost_lines(summary.get("cost") if isinstance(summary.get("cost"), Mapping) else None)
    if cost:
        lines += ["", *cost]
    return lines


def history_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Regressions and cost as CloudWatch metrics (only those the summary has)."""
    out: dict[str, float] = {}
    if not summary.get("no_traces"):
        out[m.REGRESSIONS] = float(len(regressions(summary)))
    cost = summary.get("cost")
    if isinstance(cost, Mapping):
        for name, key in ((m.GPU_HOURS, "gpu_hours"), (m.GPU_COST_USD, "total_usd"), (m.LOST_GPU_COST_USD, "lost_usd")):
            value = cost.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = float(value)
    return out
