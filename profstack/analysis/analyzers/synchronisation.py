"""Synchronisation: host-side sync calls (cudaDeviceSynchronize, ...) and GPU-side sync events (cuda_sync)."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import r2
from profstack.analysis.summary import Sync


def sync(v: RankView) -> tuple[Sync, float]:
    """The ``sync`` section and the synchronisation time ``gpu_activity`` counts (GPU events if any, else
    host calls)."""
    d, names = v.d, v.names
    cpu_lo, cpu_hi = v.cpu_lo, v.cpu_hi
    sync_by: dict[int, list[float]] = {}
    sync_time = 0.0
    for nid, ts, dur in zip(d.s_name, d.s_ts, d.s_dur, strict=True):
        if cpu_lo <= ts <= cpu_hi:
            rec = sync_by.setdefault(nid, [0, 0.0])
            rec[0] += 1
            rec[1] += dur
            sync_time += dur
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
    }
    sync_activity = gsync_t if gsync_n else sync_time
    return out, sync_activity
