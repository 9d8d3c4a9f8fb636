"""Memory over time from profile_memory's ``[memory]`` events, per device: peaks of allocated and reserved
memory, allocated memory over time, per-step peaks and their rise (Debugger's GPUMemoryIncrease), and the
operators that allocate most. A trace without these events says so (``events: 0``)."""

from __future__ import annotations

import bisect
import math
from array import array
from collections import Counter, defaultdict
from itertools import compress
from operator import and_

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.gpu import Step
from profstack.analysis.memory import MemoryEvents, chunks, device_label, gather, in_time_order
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import MemoryDevice, MemoryOperator, MemorySection, StepPeak

OUT_BINS = 120
TOP_OPERATORS = 15
MAX_STEPS = 1000


def memory(v: RankView) -> MemorySection:
    m, names, d = v.d.memory, v.names, v.d
    lo, hi = v.cpu_lo, v.cpu_hi
    ts, dev = m.ts, m.dev
    # indices and columns in arrays, not lists: a 1 GB trace has ~500k events, ~36 bytes each as Python ints
    everything = range(len(m))
    # the events with lo <= ts <= hi, chosen by C-level maps (no Python frame per event)
    window = (
        compress(everything, map(and_, map(lo.__le__, ts), map(hi.__ge__, ts))) if math.isfinite(lo) else everything
    )
    idx = array("i", window)
    section: MemorySection = {
        "events": len(idx),
        "complete": m.complete,
        "attributed": d.memory_attributed,
        "devices": [],
        "top_operators": [],
    }
    if getattr(d, "meta", {}).get("profile_memory") in (1, True):  # (a FileData; tests pass stand-ins)
        section["header_profile_memory"] = True
    if not idx:
        return section
    t0, t1 = min(map(ts.__getitem__, idx)), max(map(ts.__getitem__, idx))
    n = max(1, min(OUT_BINS, math.ceil(t1 - t0) or 1))
    width = (t1 - t0) / n if t1 > t0 else 1.0
    steps = v.steps_in[:MAX_STEPS]
    devices: dict[int, array[int]] = {}  # per device its events, a chunk's device keys at a time
    for part in chunks(idx):
        devs = gather(dev, part)
        keys = set(devs)
        for k in keys:
            got = devices.get(k)
            if got is None:
                got = devices[k] = array("i")
            got.extend(part if len(keys) == 1 else compress(part, map(k.__eq__, devs)))
    del idx
    ops: dict[tuple[int, int], list[int]] = {}
    for key in sorted(devices):
        events = devices.pop(key)  # its memory goes once the device is done
        section["devices"].append(_device(m, key, events, steps=steps, t0=t0, width=width, n=n, ops=ops))
        del events
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


def _device(
    m: MemoryEvents,
    key: int,
    events: array[int],
    *,
    steps: list[Step],
    t0: float,
    width: float,
    n: int,
    ops: dict[tuple[int, int], list[int]],
) -> MemoryDevice:
    """One device's section from its events (indices into ``m``); adds its allocations to ``ops``. A chunk of
    its time-ordered events at a time (``memory.CHUNK``): each chunk's columns are gathered, its bins, step peaks
    and totals merged into the device's (maxima and sums), so the section holds 4 bytes an event at most."""
    evs = in_time_order(m.ts, events)  # equal times keep file order
    del events
    last_bin = n - 1
    series_a = [-1] * n
    series_r = [-1] * n
    peaks: list[int | None] = [None] * len(steps)
    res_max = -1  # the peak reserved (-1: no event says)
    peak = m.alloc[evs[0]]  # the peak allocated
    allocations = allocated = frees = 0
    counts: Counter[int] = Counter()  # per op, in first-allocation order, as the event-by-event loop met them
    totals: defaultdict[int, int] = defaultdict(int)
    for part in chunks(evs):
        times = gather(m.ts, part)
        alloc = gather(m.alloc, part)
        res = gather(m.reserved, part)  # < 0: unknown
        nbytes = gather(m.nbytes, part)
        top = max(alloc)
        peak = max(peak, top)
        res_max = max(res_max, _known_max(res))
        # the bins in columns, not event by event: an event's bin, min(int((t - t0) / width), n - 1), never falls
        # as t rises (IEEE subtraction and division by a positive width are monotonic), so a bin is a run
        lo = 0
        while lo < len(times):
            b = min(int((times[lo] - t0) / width), last_bin)
            hi = bisect.bisect_right(times, b, lo, key=lambda t: min(int((t - t0) / width), last_bin))
            top = max(alloc[lo:hi])
            series_a[b] = max(series_a[b], top)
            series_r[b] = max(series_r[b], _known_max(res[lo:hi]))
            lo = hi
        c0, c1 = times[0], times[-1]
        for k, (_, start, dur) in enumerate(steps):
            if start > c1 or start + dur < c0:
                continue
            a, z = bisect.bisect_left(times, start), bisect.bisect_right(times, start + dur)
            if a < z:  # the events with start <= ts <= start + dur
                top = max(alloc[a:z])
                was = peaks[k]
                peaks[k] = top if was is None else max(was, top)
        is_alloc = array("b", map((0).__lt__, nbytes))  # an allocation (bytes > 0); < 0 a free
        allocations += sum(is_alloc)
        allocated += sum(compress(nbytes, is_alloc))
        frees += sum(map((0).__gt__, nbytes))
        op_col = gather(m.op, part)
        counts.update(compress(op_col, is_alloc))
        for op, nb in compress(zip(op_col, nbytes, strict=True), is_alloc):
            totals[op] += nb
    for op, count in counts.items():
        ops[(op, key)] = [count, totals[op]]
    _carry(series_a)
    _carry(series_r)
    step_peaks: list[StepPeak] = [
        {"step": num, "peak_allocated_bytes": top}
        for (num, _, _), top in zip(steps, peaks, strict=True)
        if top is not None
    ]
    first, last = (step_peaks[0], step_peaks[-1]) if len(step_peaks) >= 2 else (None, None)
    increase = (
        pct_or_none(last["peak_allocated_bytes"] - first["peak_allocated_bytes"], first["peak_allocated_bytes"])
        if first is not None and last is not None
        else None
    )
    has_res = res_max >= 0
    return {
        "device": device_label(key),
        "events": len(evs),
        "allocations": allocations,
        "frees": frees,
        "allocated_bytes": allocated,
        "peak_allocated_bytes": peak,
        "peak_reserved_bytes": res_max if has_res else None,
        "start_allocated_bytes": m.alloc[evs[0]],
        "end_allocated_bytes": m.alloc[evs[-1]],
        "step_peaks": step_peaks,
        "increase_pct": increase,
        "timeline": {
            "start_us": r2(t0) or 0.0,
            "bin_us": r2(width) or 0.0,
            "max_allocated_bytes": series_a,
            "max_reserved_bytes": series_r if has_res else [],
        },
    }


def _known_max(values: array[int]) -> int:
    """The largest known (>= 0) value, or -1."""
    top = max(values)
    return top if top >= 0 else -1


def _carry(series: list[int]) -> None:
    """A bin without events holds the level of the previous one (memory stays allocated)."""
    prev = -1
    for b, val in enumerate(series):
        if val < 0:
            series[b] = max(prev, 0)
        else:
            prev = val


__all__ = ["MemoryOperator", "memory"]
