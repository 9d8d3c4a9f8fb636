"""Read job-level numbers out of an analysis summary; the merge of per-file partials lives in profstack.

Pure functions over the documented summary (profstack/analysis/summary.py, the typed contract, and
summary.schema.json, schema version 1.1). `merge_partials` calls profstack.analysis.merge's (the one merger).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from profstack.analysis import merge
from profstack.analysis.loose import at as _get
from profstack.analysis.merge import CrossRank
from profstack.analysis.summary import SEVERITY_ORDER, severity_rank
from profstack.history.text import history_metrics
from profstack.jobs import metric_names as m

__all__ = ["SEVERITY_ORDER", "CrossRank", "findings", "job_metrics", "merge_partials", "step_durations_ms"]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gpu_ranks(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    ranks = [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]
    return [r for r in ranks if r.get("has_gpu")] or ranks


def _values(ranks: Iterable[Mapping[str, Any]], *path: str) -> list[float]:
    return [v for v in (_num(_get(r, *path)) for r in ranks) if v is not None]


def job_metrics(summary: Mapping[str, Any], *, trace_bytes: int) -> dict[str, float]:
    """The per-job numbers ProfStack publishes (EMF) and writes as TensorBoard scalars.

    Across ranks: GPU idle and step times are means (the job's typical rank); launch delay and
    dataloader share are the worst rank (what an alarm should catch)."""
    ranks = _gpu_ranks(summary)
    out: dict[str, float] = {m.TRACE_BYTES: float(trace_bytes)}
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    out[m.TRACE_FILES] = float(len(inputs))
    out[m.UNREADABLE_TRACE_FILES] = float(sum(1 for i in inputs if i.get("status") in {"failed", "partial"}))
    idle = _values((r for r in ranks if r.get("has_gpu")), "temporal_breakdown", "idle_pct")
    if idle:
        out[m.GPU_IDLE_PERCENT] = statistics.fmean(idle)
    delay = _values(ranks, "launch_delay", "p95_us")
    if delay:
        out[m.LAUNCH_DELAY_P95_US] = max(delay)
    p50 = _values(ranks, "steps", "p50_us")
    if p50:
        out[m.STEP_TIME_P50_MS] = statistics.fmean(p50) / 1000.0
    p95 = _values(ranks, "steps", "p95_us")
    if p95:
        out[m.STEP_TIME_P95_MS] = statistics.fmean(p95) / 1000.0
    loader = _values(ranks, "dataloader", "share_pct")
    if loader:
        out[m.DATALOADER_PERCENT] = max(loader)
    counts = Counter(str(f.get("severity")) for f in findings(summary))
    for severity in m.SEVERITIES:
        out[m.findings_metric(severity)] = float(counts.get(severity, 0))
    out.update(history_metrics(summary))  # regressions and GPU cost (profstack.history)
    return out


def findings(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    return sorted(items, key=lambda f: severity_rank(f.get("severity")))


def step_durations_ms(summary: Mapping[str, Any]) -> dict[int, float]:
    """ProfilerStep#N -> mean duration over ranks (ms): TensorBoard plots these per step."""
    per_step: dict[int, list[float]] = {}
    for rank in _gpu_ranks(summary):
        for item in _get(rank, "steps", "durations") or []:
            step, dur = item.get("step"), _num(item.get("duration_us"))
            if isinstance(step, int) and dur is not None:
                per_step.setdefault(step, []).append(dur / 1000.0)
    return {step: statistics.fmean(v) for step, v in per_step.items()}


def merge_partials(
    partials: Sequence[Mapping[str, Any]], missing: Sequence[Mapping[str, Any]], *, cross_rank: CrossRank
) -> dict[str, Any]:
    """profstack.analysis.merge.merge_partials, as the untyped dict `logic.publish_report` takes today."""
    return cast(dict[str, Any], merge.merge_partials(partials, missing, cross_rank=cross_rank))
