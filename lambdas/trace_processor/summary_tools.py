"""Read job-level numbers out of an analysis summary, and merge per-file partial summaries.

Pure functions over the documented summary (profstack/analysis/summary.schema.json, version 1.0).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lambdas.trace_processor import metric_names as m
from profstack.analysis.engine import SUMMARY_SCHEMA_VERSION

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _get(mapping: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(part)
    return mapping


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
    return out


def findings(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    return sorted(items, key=lambda f: SEVERITY_ORDER.get(str(f.get("severity")), 9))


def step_durations_ms(summary: Mapping[str, Any]) -> dict[int, float]:
    """ProfilerStep#N -> mean duration over ranks (ms): TensorBoard plots these per step."""
    per_step: dict[int, list[float]] = {}
    for rank in _gpu_ranks(summary):
        for item in _get(rank, "steps", "durations") or []:
            step, dur = item.get("step"), _num(item.get("duration_us"))
            if isinstance(step, int) and dur is not None:
                per_step.setdefault(step, []).append(dur / 1000.0)
    return {step: statistics.fmean(v) for step, v in per_step.items()}


# --- fan-out aggregation ---------------------------------------------------------------------------


CrossRank = Callable[[list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]


def merge_partials(
    partials: Sequence[Mapping[str, Any]], missing: Sequence[Mapping[str, Any]], *, cross_rank: CrossRank
) -> dict[str, Any]:
    """One job summary from per-file summaries (fan-out). Per-rank sections are kept as the engine
    wrote them; the cross-rank table, stragglers and load balance are recomputed over all ranks by
    the engine's own `cross_rank` (injected), so both paths apply the same rules.
    `missing` lists files whose partial never arrived (failed map item): they are flagged inputs."""
    if not partials and not missing:
        raise ValueError("nothing to merge")
    base: dict[str, Any] = dict(partials[0]) if partials else {"schema_version": SUMMARY_SCHEMA_VERSION}
    inputs: list[Any] = []
    errors: list[Any] = []
    warnings: list[Any] = []
    ranks: list[Any] = []
    table: list[Any] = []
    found: list[Any] = []
    for part in partials:
        inputs.extend(part.get("inputs") or [])
        errors.extend(part.get("errors") or [])
        warnings.extend(part.get("warnings") or [])
        ranks.extend(part.get("ranks") or [])
        table.extend(_get(part, "cross_rank", "table") or [])
        # A one-file partial has no cross-rank findings worth keeping: they are recomputed below.
        found.extend(f for f in part.get("findings") or [] if len(f.get("ranks") or []) <= 1)
    for item in missing:
        error = {
            "source": item["name"],
            "error_type": "PartialMissing",
            "message": f"{item['name']}: {item.get('reason') or 'analysis did not produce a result'}",
            "fatal": True,
        }
        inputs.append(
            {
                "name": item["name"],
                "rank": None,
                "rank_source": "unknown",
                "size_bytes": item.get("size"),
                "status": "failed",
                "events": 0,
                "error": error,
            }
        )
        errors.append(error)
    rows = sorted(table, key=lambda r: (r.get("rank", 0), str(r.get("label", ""))))
    cross, cross_findings = cross_rank([dict(r) for r in rows])
    found.extend(cross_findings)
    base.update(
        complete=all(p.get("complete", False) for p in partials) and not missing,
        inputs=inputs,
        errors=errors,
        warnings=warnings,
        ranks=sorted(ranks, key=lambda r: (r.get("rank") is None, r.get("rank") or 0)),
        cross_rank={"rank_count": len({r.get("rank") for r in rows}), "table": rows, **cross},
        findings=sorted(found, key=lambda f: SEVERITY_ORDER.get(str(f.get("severity")), 9)),
    )
    return base
