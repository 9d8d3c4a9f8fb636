"""Two analysis summaries side by side (``profstack diff A B``): per-kernel and per-operator time and count
deltas, step time and breakdown deltas. Pure: summaries in, rows out.

A summary lists only each rank's top-K kernels and CPU operators, so a kernel outside one side's top-K shows
as absent there (``None``), not as zero time; ``profstack diff`` analyses trace folders with a large K to
make that rare. Per-kernel and per-operator numbers are sums over ranks; step times and shares are means
over ranks (the GPU ranks for GPU shares)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profstack.analysis.loose import at as _get
from profstack.analysis.loose import number as _num


@dataclass(frozen=True)
class Delta:
    name: str
    a: float | None
    b: float | None
    unit: str  # "us", "pct", "count"

    @property
    def change(self) -> float | None:
        return self.b - self.a if self.a is not None and self.b is not None else None

    @property
    def change_pct(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return 100.0 * (self.b - self.a) / abs(self.a)


@dataclass(frozen=True)
class NamedDelta:
    """One kernel or operator: total time and count on each side."""

    name: str
    kind: str
    time: Delta
    count: Delta


@dataclass(frozen=True)
class SummaryDiff:
    a_label: str
    b_label: str
    steps: tuple[Delta, ...]
    breakdown: tuple[Delta, ...]
    kernels: tuple[NamedDelta, ...]
    operators: tuple[NamedDelta, ...]
    notes: tuple[str, ...]


def _ranks(summary: Mapping[str, Any], gpu: bool = False) -> list[Mapping[str, Any]]:
    ranks = [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]
    return [r for r in ranks if r.get("has_gpu")] if gpu else ranks


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def _mean_of(summary: Mapping[str, Any], *path: str, gpu: bool = False) -> float | None:
    return _mean(_num(_get(r, *path)) for r in _ranks(summary, gpu))


STEP_METRICS = (("step mean", "mean_us"), ("step p50", "p50_us"), ("step p95", "p95_us"), ("step max", "max_us"))
BREAKDOWN = (
    ("GPU idle", ("temporal_breakdown", "idle_pct"), "pct", True),
    ("GPU compute", ("temporal_breakdown", "compute_pct"), "pct", True),
    ("GPU non-compute", ("temporal_breakdown", "non_compute_pct"), "pct", True),
    ("idle: host wait", ("idle_breakdown", "host_wait_pct"), "pct", True),
    ("idle: kernel wait", ("idle_breakdown", "kernel_wait_pct"), "pct", True),
    ("kernel time", ("gpu_activity", "kernel_time_us"), "us", True),
    ("memcpy time", ("gpu_activity", "memcpy_time_us"), "us", True),
    ("memset time", ("gpu_activity", "memset_time_us"), "us", True),
    ("GPU-side sync time", ("gpu_activity", "sync_time_us"), "us", True),
    ("host sync wait", ("sync", "time_us"), "us", False),
    ("launch delay p95", ("launch_delay", "p95_us"), "us", True),
    ("DataLoader share of step", ("dataloader", "share_pct"), "pct", False),
    ("communication share of span", ("communication", "comm_pct_of_span"), "pct", True),
    ("comm overlapped by compute", ("communication", "overlap_pct_of_comm"), "pct", True),
)


def _named(summary: Mapping[str, Any], key: str) -> dict[str, tuple[str, float, float]]:
    """name -> (kind, total_us, count), summed over ranks."""
    out: dict[str, tuple[str, float, float]] = {}
    for rank in _ranks(summary):
        for item in _get(rank, key) or []:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                continue
            kind, total, count = out.get(item["name"], (str(item.get("kernel_type") or ""), 0.0, 0.0))
            out[item["name"]] = (
                kind,
                total + (_num(item.get("total_us")) or 0.0),
                count + (_num(item.get("count")) or 0.0),
            )
    return out


def _named_deltas(a: Mapping[str, Any], b: Mapping[str, Any], key: str, limit: int) -> tuple[NamedDelta, ...]:
    left, right = _named(a, key), _named(b, key)
    rows = []
    for name in set(left) | set(right):
        la, ra = left.get(name), right.get(name)
        kind = (la or ra or ("", 0.0, 0.0))[0]
        rows.append(
            NamedDelta(
                name,
                kind,
                Delta("time", la[1] if la else None, ra[1] if ra else None, "us"),
                Delta("count", la[2] if la else None, ra[2] if ra else None, "count"),
            )
        )

    def weight(row: NamedDelta) -> float:
        change = row.time.change
        return abs(change) if change is not None else max(row.time.a or 0.0, row.time.b or 0.0)

    rows.sort(key=lambda r: (-weight(r), r.name))
    return tuple(rows[:limit])


def diff_summaries(
    a: Mapping[str, Any], b: Mapping[str, Any], *, a_label: str = "A", b_label: str = "B", limit: int = 25
) -> SummaryDiff:
    steps = tuple(
        Delta(label, _mean_of(a, "steps", key), _mean_of(b, "steps", key), "us") for label, key in STEP_METRICS
    )
    breakdown = tuple(
        Delta(label, _mean_of(a, *path, gpu=gpu), _mean_of(b, *path, gpu=gpu), unit)
        for label, path, unit, gpu in BREAKDOWN
    )
    notes = []
    for label, summary in ((a_label, a), (b_label, b)):
        if summary.get("complete") is False:
            notes.append(f"{label}: the summary is incomplete (some trace files could not be read)")
        k = _get(summary, "options", "top_k")
        if k is not None:
            notes.append(f"{label}: kernels and operators are each rank's top {k}; others show as absent")
    if len(_ranks(a)) != len(_ranks(b)):
        notes.append(
            f"rank counts differ ({len(_ranks(a))} vs {len(_ranks(b))}): kernel and operator sums are not like for like"
        )
    return SummaryDiff(
        a_label,
        b_label,
        steps,
        breakdown,
        _named_deltas(a, b, "top_kernels_by_time", limit),
        _named_deltas(a, b, "top_cpu_ops", limit),
        tuple(notes),
    )


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "us":
        return f"{value / 1000:.3f} ms" if abs(value) >= 1000 else f"{value:.1f} us"
    if unit == "pct":
        return f"{value:.2f} %"
    return f"{value:,.0f}"


def _change(d: Delta) -> str:
    if d.change is None:
        return (
            "absent in A"
            if d.a is None and d.b is not None
            else "absent in B"
            if d.b is None and d.a is not None
            else "—"
        )
    sign = "+" if d.change >= 0 else "-"
    shown = _fmt(abs(d.change), d.unit).replace(" %", " points") if d.unit == "pct" else _fmt(abs(d.change), d.unit)
    rel = f" ({d.change_pct:+.1f}%)" if d.change_pct is not None and d.unit != "pct" else ""
    return f"{sign}{shown}{rel}"


def short_name(name: str, limit: int = 70) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def format_text(diff: SummaryDiff) -> str:
    out = [f"A: {diff.a_label}", f"B: {diff.b_label}", ""]

    def table(title: str, rows: Sequence[Delta]) -> None:
        out.append(title)
        for d in rows:
            out.append(f"  {d.name:<30} {_fmt(d.a, d.unit):>14} {_fmt(d.b, d.unit):>14}   {_change(d)}")
        out.append("")

    table("Step time (mean over ranks)", diff.steps)
    table("Breakdown (mean over ranks)", diff.breakdown)
    for title, rows in (
        ("Kernels (sum over ranks), by change in time", diff.kernels),
        ("CPU operators (sum over ranks)", diff.operators),
    ):
        out.append(title)
        for r in rows:
            times = f"{_fmt(r.time.a, 'us'):>12} -> {_fmt(r.time.b, 'us'):>12} {_change(r.time):>24}"
            counts = f"{_fmt(r.count.a, 'count')} -> {_fmt(r.count.b, 'count')}"
            out.append(f"  {short_name(r.name):<70} time {times}   count {counts}")
        out.append("")
    out += [f"note: {n}" for n in diff.notes]
    return "\n".join(out).rstrip() + "\n"


def change_text(d: Delta) -> str:
    return _change(d)


def value_text(value: float | None, unit: str) -> str:
    return _fmt(value, unit)
