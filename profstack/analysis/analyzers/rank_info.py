"""What a rank is and how much it holds: device, distributed info, event counts, top CPU operators."""

from __future__ import annotations

from typing import Any

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import r2
from profstack.analysis.summary import Counts, Device, Distributed, GpuAnalysis, NameStat


def gpu_analysis(v: RankView) -> GpuAnalysis:
    return {"mode": v.d.gpu_mode, "reason": v.d.gpu_mode_reason}


def has_gpu(v: RankView) -> bool:
    d = v.d
    return bool(d.n_kernels + d.n_memcpy + d.n_memset)


def device(v: RankView) -> Device | None:
    return _device(v.d.meta, v.d.devices)


def distributed(v: RankView) -> Distributed | None:
    dist = v.d.meta.get("distributedInfo")
    return (
        {"world_size": _int_or_none(dist.get("world_size")), "backend": _str_or_none(dist.get("backend"))}
        if isinstance(dist, dict)
        else None
    )


def counts(v: RankView) -> Counts:
    d = v.d
    return {
        "events": d.events,
        "gpu_kernels": d.n_kernels,
        "gpu_memcpy": d.n_memcpy,
        "gpu_memset": d.n_memset,
        "gpu_ops_analyzed": v.acc.n_sel,
        "cpu_ops": d.cpu_ops,
        "runtime_calls": d.runtime_calls,
        "invalid_events": d.invalid_events,
    }


def top_cpu_ops(v: RankView, top_k: int) -> list[NameStat]:
    top_cpu = sorted(((n, r) for n, r in v.d.cpu_agg.items() if r[0] != 1), key=lambda kv: -kv[1][2])[:top_k]
    return [{"name": n, "count": int(r[1]), "total_us": r2(r[2])} for n, r in top_cpu]


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _device(meta: dict[str, Any], devices: set[int]) -> Device | None:
    props = meta.get("deviceProperties")
    if not isinstance(props, list) or not props:
        return None
    chosen = None
    for p in props:
        if isinstance(p, dict) and (p.get("id") in devices or chosen is None):
            chosen = p
            if p.get("id") in devices:
                break
    if chosen is None:
        return None
    major, minor = chosen.get("computeMajor"), chosen.get("computeMinor")
    return {
        "name": str(chosen.get("name", "")),
        "total_global_mem_bytes": _int_or_none(chosen.get("totalGlobalMem")),
        "num_sms": _int_or_none(chosen.get("numSms")),
        "compute_capability": f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
    }
