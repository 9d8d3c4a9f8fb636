"""Synchronisation: host-side waits (cudaDeviceSynchronize, hipStreamSynchronize, ... runtime calls) and GPU-side
sync rows (``cuda_sync``: Context Sync, Stream Sync, Stream Wait Event), kept apart.

A host wait is CPU time: the thread blocks until the GPU has finished what it was given. While the GPU is busy
with that work the wait costs nothing (the host is simply ahead of the GPU; a final ``cudaDeviceSynchronize``
after a stream of kernels is that); it costs GPU time only where the GPU sits idle during it. So the section also
says what the GPU was doing while the host waited, from the GPU busy timeline (``GpuAccumulator.timeline``, time
bins of at most span / 1,024)."""

from __future__ import annotations

from array import array

from profstack.analysis import intervals
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.gpu import GPU_SERIES
from profstack.analysis.stats import r2
from profstack.analysis.summary import Sync

_BUSY = GPU_SERIES.index("busy")


def sync(v: RankView) -> tuple[Sync, float]:
    """The ``sync`` section and the synchronisation time ``gpu_activity`` counts: GPU-side sync rows only (host
    waits are CPU time, shown apart in ``sync.time_us`` and ``gpu_activity.host_sync_time_us``)."""
    d, names = v.d, v.names
    cpu_lo, cpu_hi = v.cpu_lo, v.cpu_hi
    sync_by: dict[int, list[float]] = {}
    sync_time = 0.0
    w_ts: array[float] = array("d")
    w_dur: array[float] = array("d")
    for nid, ts, dur in zip(d.s_name, d.s_ts, d.s_dur, strict=True):
        if cpu_lo <= ts <= cpu_hi:
            rec = sync_by.setdefault(nid, [0, 0.0])
            rec[0] += 1
            rec[1] += dur
            sync_time += dur
            w_ts.append(ts)
            w_dur.append(dur)
    gsync_n = 0
    gsync_t = 0.0
    glo, ghi = v.glo, v.ghi
    mode, has_union = v.mode, v.has_union
    for ts, dur in zip(d.gs_ts, d.gs_dur, strict=True):
        if mode == "all" or (glo - 1) <= ts <= (ghi + 1) or not has_union:
            gsync_n += 1
            gsync_t += dur
    out: Sync = {
        "calls": sum(int(rec[0]) for rec in sync_by.values()),
        "time_us": r2(sync_time),
        "gpu_events": gsync_n,
        "gpu_time_us": r2(gsync_t),
        "by_name": [
            {"name": names[nid], "count": int(rec[0]), "total_us": r2(rec[1])}
            for nid, rec in sorted(sync_by.items(), key=lambda kv: -kv[1][1])
        ],
        "host_wait_union_us": None,
        "host_wait_gpu_busy_us": None,
        "host_wait_gpu_idle_us": None,
        "host_wait_gpu_busy_pct": None,
        "gpu_timeline_resolution_us": None,
    }
    _gpu_during_waits(out, v, w_ts, w_dur)
    return out, gsync_t


def _gpu_during_waits(out: Sync, v: RankView, starts: array[float], durs: array[float]) -> None:
    """What the GPU did while the host waited: the union of the waits (threads waiting at once count once), the GPU
    busy time within it, and the idle rest. None where no GPU row was recorded (unknown, not idle)."""
    tl = v.acc.timeline
    if not len(starts) or not v.has_union or tl.empty:
        return
    waits = intervals.merge_columns(starts, durs)
    union = sum(e - s for s, e in zip(waits.starts, waits.ends, strict=True))
    busy = min(tl.integral(_BUSY, waits.starts, waits.ends), union)
    out["host_wait_union_us"] = r2(union)
    out["host_wait_gpu_busy_us"] = r2(busy)
    out["host_wait_gpu_idle_us"] = r2(union - busy)
    out["host_wait_gpu_busy_pct"] = r2(100.0 * busy / union) if union > 0 else None
    out["gpu_timeline_resolution_us"] = r2(tl.width)
