"""Activity over time: GPU busy share per time bin (overall and per kernel type) and the CPU side (CPU ops
started, kernel launches, DataLoader and host synchronisation), on one grid over the analysed window."""

from __future__ import annotations

import math

from profstack.analysis import classify, intervals
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.gpu import GPU_SERIES
from profstack.analysis.stats import r2
from profstack.analysis.summary import ActivityTimeline
from profstack.analysis.timebins import TimeBins

#: bins of the published series (fewer when the window is shorter than that many microseconds)
OUT_BINS = 120


def _grid(v: RankView) -> tuple[float, float] | None:
    if v.has_union and v.gpu_hi > v.gpu_lo:
        return v.gpu_lo, v.gpu_hi
    if math.isfinite(v.cpu_lo) and v.cpu_hi > v.cpu_lo:
        return v.cpu_lo, v.cpu_hi
    tl = v.d.cpu_timeline
    if tl.origin is not None and tl.n:
        return tl.origin, tl.origin + tl.n * tl.width
    return None


def _share(values: list[float], width: float) -> list[float]:
    return [r2(min(100.0, 100.0 * x / width)) or 0.0 for x in values]


def _rate(values: list[float], width: float) -> list[float]:
    return [r2(x / (width / 1000.0)) or 0.0 for x in values]


def activity(v: RankView) -> ActivityTimeline | None:
    """The rank's series, or None when it has no time range at all."""
    grid = _grid(v)
    if grid is None:
        return None
    lo, hi = grid
    n = max(1, min(OUT_BINS, math.ceil(hi - lo)))
    width = (hi - lo) / n
    gpu = v.acc.timeline
    d = v.d

    def gpu_series(name: str) -> list[float]:
        return gpu.resample(GPU_SERIES.index(name), lo, hi, n)

    host = TimeBins(("dataloader", "sync"))
    for k, (starts, durs) in enumerate(((d.dl_ts, d.dl_dur), (d.s_ts, d.s_dur))):
        busy = intervals.merge_columns(starts, durs)
        host.add_spans(k, busy.starts, busy.ends)
    types = {t: _share(gpu_series(t), width) for t in classify.KERNEL_TYPES}
    return {
        "start_us": r2(lo) or 0.0,
        "bin_us": r2(width) or 0.0,
        "bins": n,
        "gpu_busy_pct": _share(gpu_series("busy"), width),
        "computation_pct": types[classify.COMPUTATION],
        "communication_pct": types[classify.COMMUNICATION],
        "memory_pct": types[classify.MEMORY],
        "launches_per_ms": _rate(gpu_series("launch_calls"), width),
        "launch_time_pct": _share(gpu_series("launch_time"), width),
        "cpu_ops_per_ms": _rate(d.cpu_timeline.resample(0, lo, hi, n), width),
        "dataloader_pct": _share(host.resample(0, lo, hi, n), width),
        "sync_pct": _share(host.resample(1, lo, hi, n), width),
    }
