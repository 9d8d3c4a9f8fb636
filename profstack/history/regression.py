"""A job against its family's recent jobs: the median of the last N (from the history rows) per metric, and a
``Regression`` finding (same shape as ``profstack.analysis.rules`` findings) when the job is worse beyond a
threshold. Pure: the history lookup is an injected ``HistoryReader``.

Compared: step time p50 and p95 (relative change), GPU idle % and data-loading share (percentage points),
launch delay p95 (relative, above a floor so microsecond noise is not a regression), and the top kernels:
a kernel whose share of GPU op time grew by more than ``kernel_share_points``, and a kernel new to the top
list with at least ``new_kernel_min_pct`` of GPU op time. Baselines are jobs of the same family, user,
instance type and GPU count that were analysed completely; fewer than ``min_baseline_jobs`` means no
comparison (and no finding), never a guess.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from profstack.analysis.loose import number as _num
from profstack.analysis.summary import Finding, Severity

RULE_ID = "Regression"


class RegressionThresholdError(ValueError):
    """An unknown or invalid regression threshold."""


@dataclass(frozen=True)
class RegressionThresholds:
    step_time_pct: float = 10.0
    gpu_idle_points: float = 5.0
    launch_delay_pct: float = 25.0
    launch_delay_floor_us: float = 10.0
    dataloader_points: float = 5.0
    kernel_share_points: float = 5.0
    new_kernel_min_pct: float = 5.0
    baseline_jobs: int = 5
    min_baseline_jobs: int = 1
    lookback_days: int = 30

    def __post_init__(self) -> None:
        for name in self.names():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise RegressionThresholdError(f"regression threshold {name}: {value!r} is not a number >= 0")
        if self.baseline_jobs < 1 or self.min_baseline_jobs < 1 or self.min_baseline_jobs > self.baseline_jobs:
            raise RegressionThresholdError("need 1 <= min_baseline_jobs <= baseline_jobs")
        if self.lookback_days < 1:
            raise RegressionThresholdError("lookback_days must be >= 1")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(cls.__dataclass_fields__)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float] | None) -> RegressionThresholds:
        unknown = sorted(set(overrides or {}) - set(cls.names()))
        if unknown:
            raise RegressionThresholdError(f"unknown regression threshold(s): {', '.join(unknown)}")
        ints = {"baseline_jobs", "min_baseline_jobs", "lookback_days"}
        values: dict[str, Any] = {}
        for k, v in (overrides or {}).items():
            if k in ints and (isinstance(v, bool) or not isinstance(v, int | float) or v != int(v)):
                raise RegressionThresholdError(f"regression threshold {k}: {v!r} is not a whole number")
            values[k] = int(v) if k in ints else v
        return cls(**values)


@dataclass(frozen=True)
class JobHistory:
    """One job as the history rows hold it: its ``jobs`` row and its ``kernels`` rows."""

    row: Mapping[str, Any]
    kernels: Sequence[Mapping[str, Any]] = ()

    @property
    def job(self) -> str:
        return str(self.row.get("job"))


class HistoryReader(Protocol):
    """Where a family's recent jobs come from (S3 in the Lambda, a folder locally, a list in tests)."""

    def recent_jobs(
        self, *, user: str, family: str, before: datetime, lookback_days: int, limit: int
    ) -> Sequence[Mapping[str, Any]]:
        """``jobs`` rows of this user and family that ended before ``before``, newest first."""
        ...

    def kernels(self, *, user: str, row: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        """The ``kernels`` rows of the job of this ``jobs`` row."""
        ...


@dataclass(frozen=True)
class MetricDelta:
    metric: str
    label: str
    value: float
    baseline: float
    change: float  # relative % for times, percentage points for shares
    unit: str  # "pct" (relative) or "points"
    threshold: float
    regressed: bool


@dataclass(frozen=True)
class Comparison:
    family: str
    baseline_jobs: tuple[str, ...]
    deltas: tuple[MetricDelta, ...] = ()
    kernel_shifts: tuple[tuple[str, float, float], ...] = ()  # (name, baseline share, share)
    new_kernels: tuple[tuple[str, float], ...] = ()  # (name, share)
    skipped: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def regressed(self) -> list[MetricDelta]:
        return [d for d in self.deltas if d.regressed]

    @property
    def is_regression(self) -> bool:
        return bool(self.regressed or self.kernel_shifts or self.new_kernels)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


#: (metric, label, kind, threshold attribute); kind "relative" compares ratios, "points" differences
_METRICS = (
    ("step_p50_us", "step time p50", "relative", "step_time_pct"),
    ("step_p95_us", "step time p95", "relative", "step_time_pct"),
    ("gpu_idle_pct", "GPU idle", "points", "gpu_idle_points"),
    ("launch_delay_p95_us", "launch delay p95", "relative", "launch_delay_pct"),
    ("dataloader_share_pct", "data-loading share", "points", "dataloader_points"),
)


def same_hardware(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Step times of different hardware are not comparable: same instance type and GPU count (when known)."""
    for key in ("instance_type", "gpu_count"):
        if a.get(key) is not None and b.get(key) is not None and a.get(key) != b.get(key):
            return False
    return True


def select_baseline(
    current: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]], th: RegressionThresholds
) -> list[Mapping[str, Any]]:
    """The last ``baseline_jobs`` complete jobs of the same hardware, newest first, never the job itself."""
    chosen = [
        c
        for c in sorted(candidates, key=lambda c: str(c.get("ended_at") or ""), reverse=True)
        if c.get("job") != current.get("job") and c.get("complete") is True and same_hardware(current, c)
    ]
    return chosen[: th.baseline_jobs]


def _shares(kernels: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in kernels:
        share = _num(k.get("share_pct"))
        if isinstance(k.get("name"), str) and share is not None:
            out[str(k["name"])] = share
    return out


def compare(
    current: JobHistory, baseline: Sequence[JobHistory], th: RegressionThresholds, *, family: str
) -> Comparison:
    """The job against the median of ``baseline`` (already selected, see ``select_baseline``)."""
    names = tuple(b.job for b in baseline)
    if len(baseline) < th.min_baseline_jobs:
        return Comparison(family, names, skipped=f"{len(baseline)} baseline job(s), need {th.min_baseline_jobs}")
    deltas: list[MetricDelta] = []
    for metric, label, kind, attr in _METRICS:
        value = _num(current.row.get(metric))
        base = _median([v for v in (_num(b.row.get(metric)) for b in baseline) if v is not None])
        if value is None or base is None:
            continue
        threshold = float(getattr(th, attr))
        if kind == "relative":
            if base <= 0:
                continue
            change = 100.0 * (value - base) / base
            floor_ok = metric != "launch_delay_p95_us" or value - base > th.launch_delay_floor_us
            regressed = change > threshold and floor_ok
            unit = "pct"
        else:
            change = value - base
            regressed = change > threshold
            unit = "points"
        deltas.append(MetricDelta(metric, label, value, base, round(change, 3), unit, threshold, regressed))
    mine = _shares(current.kernels)
    per_job = [_shares(b.kernels) for b in baseline if b.kernels]
    shifts: list[tuple[str, float, float]] = []
    new: list[tuple[str, float]] = []
    if per_job:
        for name, share in sorted(mine.items(), key=lambda kv: -kv[1]):
            seen = [s[name] for s in per_job if name in s]
            if not seen:
                if share >= th.new_kernel_min_pct:
                    new.append((name, share))
                continue
            # a job where the kernel missed the top list counts as 0 % for the median
            base_share = statistics.median([s.get(name, 0.0) for s in per_job])
            if share - base_share > th.kernel_share_points:
                shifts.append((name, round(base_share, 3), share))
    return Comparison(family, names, tuple(deltas), tuple(shifts[:10]), tuple(new[:10]))


def _describe(d: MetricDelta) -> str:
    return f"{d.label} {d.change:+.1f}{'%' if d.unit == 'pct' else ' points'}"


def regression_finding(comparison: Comparison) -> Finding | None:
    """The ``Regression`` finding, or None when nothing regressed (or there was no baseline)."""
    if comparison.skipped or not comparison.is_regression:
        return None
    parts = [_describe(d) for d in comparison.regressed]
    parts += [f"kernel {_short(n)} {b:.1f}% -> {s:.1f}% of GPU time" for n, b, s in comparison.kernel_shifts[:3]]
    parts += [f"new top kernel {_short(n)} ({s:.1f}%)" for n, s in comparison.new_kernels[:3]]
    n = len(comparison.baseline_jobs)
    worst = max((d.change for d in comparison.regressed), default=0.0)
    evidence: dict[str, Any] = {
        "family": comparison.family,
        "baseline_jobs": list(comparison.baseline_jobs),
        "baseline": f"median of {n} job(s)",
        "regressed": {d.metric: d.change for d in comparison.regressed},
    }
    for d in comparison.regressed:
        evidence[d.metric] = d.value
        evidence[f"baseline_{d.metric}"] = d.baseline
    if comparison.kernel_shifts:
        evidence["kernel_shifts"] = [{"name": n, "baseline_pct": b, "pct": s} for n, b, s in comparison.kernel_shifts]
    if comparison.new_kernels:
        evidence["new_top_kernels"] = [{"name": n, "pct": s} for n, s in comparison.new_kernels]
    step = {d.metric for d in comparison.regressed} & {"step_p50_us", "step_p95_us"}
    severity: Severity = "critical" if step and worst > 50.0 else "warning"
    return {
        "rule_id": RULE_ID,
        "severity": severity,
        "message": f"regressed against family '{comparison.family}' (median of {n} recent job(s): "
        f"{', '.join(comparison.baseline_jobs[:5])}{' …' if n > 5 else ''}): {'; '.join(parts)}",
        "evidence": evidence,
        "recommendation": "Diff this job against a baseline job (`profstack diff <baseline>/summary.json "
        "<this>/summary.json`) to see which kernels and operators changed; look at what changed in the code, "
        "data pipeline or configuration between the baseline jobs and this one.",
        "ranks": [],
    }


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def find_regression(
    reader: HistoryReader,
    current: JobHistory,
    *,
    user: str,
    family: str,
    ended_at: datetime,
    th: RegressionThresholds,
) -> tuple[Comparison, Finding | None]:
    """Look up the family's recent jobs through ``reader``, pick the baseline, compare."""
    candidates = reader.recent_jobs(
        user=user, family=family, before=ended_at, lookback_days=th.lookback_days, limit=th.baseline_jobs * 4
    )
    chosen = select_baseline(current.row, candidates, th)
    baseline = [JobHistory(row, reader.kernels(user=user, row=row)) for row in chosen]
    comparison = compare(current, baseline, th, family=family)
    return comparison, regression_finding(comparison)
