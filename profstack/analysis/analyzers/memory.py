"""Memory over time from profile_memory's ``[memory]`` events, per device: peaks of allocated and reserved
memory, allocated memory over time, per-step peaks and their rise (Debugger's GPUMemoryIncrease), and the
operators that allocate most. A trace without these events says so (``events: 0``)."""

from __future__ import annotations

import bisect
import math

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.memory import device_label
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import MemoryDevice, MemoryOperator, MemorySection, StepPeak

OUT_BINS = 120
TOP_OPERATORS = 15
MAX_STEPS = 1000


def memory(v: RankView) -> MemorySection:
    m, names, d = v.d.memory, v.names, v.d
    lo, hi = v.cpu_lo, v.cpu_hi
    idx = [i for i in range(len(m)) if lo <= m.ts[i] <= hi] if math.isfinite(lo) else list(range(len(m)))
    section: MemorySection = {
        "events": len(idx),
        "complete": m.complete,
        "attributed": d.memory_attributed,
        "devices": [],
        "top_operators": [],
    }
    if not idx:
        return section
    t0 = min(m.ts[i] for i in idx)
    t1 = max(m.ts[i] for i in idx)
    n = max(1, min(OUT_BINS, math.ceil(t1 - t0) or 1))
    width = (t1 - t0) / n if t1 > t0 else 1.0
    steps = v.steps_in[:MAX_STEPS]
    devices: dict[int, list[int]] = {}
    for i in idx:
        devices.setdefault(m.dev[i], []).append(i)
    ops: dict[tuple[int, int], list[int]] = {}
    for key in sorted(devices):
        evs = sorted(devices[key], key=lambda i: m.ts[i])
        alloc = [m.alloc[i] for i in evs]
        res = [m.reserved[i] for i in evs if m.reserved[i] >= 0]
        series_a = [-1] * n
        series_r = [-1] * n
        for i in evs:
            b = min(int((m.ts[i] - t0) / width), n - 1)
            series_a[b] = max(series_a[b], m.alloc[i])
            if m.reserved[i] >= 0:
                series_r[b] = max(series_r[b], m.reserved[i])
            if m.nbytes[i] > 0:
                rec = ops.setdefault((m.op[i], key), [0, 0])
                rec[0] += 1
                rec[1] += m.nbytes[i]
        _carry(series_a)
        _carry(series_r)
        step_peaks: list[StepPeak] = []
        times = [m.ts[i] for i in evs]  # ascending: evs is sorted by time
        for num, start, dur in steps:
            a, b = bisect.bisect_left(times, start), bisect.bisect_right(times, start + dur)
            if a < b:  # the events with start <= ts <= start + dur
                step_peaks.append({"step": num, "peak_allocated_bytes": max(alloc[a:b])})
        first, last = (step_peaks[0], step_peaks[-1]) if len(step_peaks) >= 2 else (None, None)
        increase = (
            pct_or_none(last["peak_allocated_bytes"] - first["peak_allocated_bytes"], first["peak_allocated_bytes"])
            if first is not None and last is not None
            else None
        )
        dev: MemoryDevice = {
            "device": device_label(key),
            "events": len(evs),
            "allocations": sum(1 for i in evs if m.nbytes[i] > 0),
            "frees": sum(1 for i in evs if m.nbytes[i] < 0),
            "allocated_bytes": sum(m.nbytes[i] for i in evs if m.nbytes[i] > 0),
            "peak_allocated_bytes": max(alloc),
            "peak_reserved_bytes": max(res) if res else None,
            "start_allocated_bytes": alloc[0],
            "end_allocated_bytes": alloc[-1],
            "step_peaks": step_peaks,
            "increase_pct": increase,
            "timeline": {
                "start_us": r2(t0) or 0.0,
                "bin_us": r2(width) or 0.0,
                "max_allocated_bytes": series_a,
                "max_reserved_bytes": series_r if res else [],
            },
        }
        section["devices"].append(dev)
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:TOP_OPERATORS]
    section["top_operators"] = [
        {
            "name": names[op] if op >= 0 else "(no enclosing CPU op)",
            "device": device_label(key),
            "allocations": rec[0],
            "bytes": rec[1],
        }
        for (op, key), rec in top
    ]
    return section


def _carry(series: list[int]) -> None:
    """A bin without events holds the level of the previous one (memory stays allocated)."""
    prev = -1
    for b, val in enumerate(series):
        if val < 0:
            series[b] = max(prev, 0)
        else:
            prev = val


__all__ = ["MemoryOperator", "memory"]
