"""Per-rank metrics computed from the compact columns of one or more parsed files (stateless)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from profstack.analysis import classify, intervals
from profstack.analysis.gpu import OP_KERNEL, OP_MEMCPY, OP_MEMSET, GpuFeed, StepFrontier, dedupe_steps, select
from profstack.analysis.options import LAUNCH_DELAY_CUTOFFS_US, AnalysisOptions
from profstack.analysis.parse import FileData, SymbolTable
from profstack.analysis.stats import HIST_EDGES_US, histogram, mean_std, pct, pct_or_none, quantile, r2

_NAN = math.nan
_COLUMNS = (
    "s_name",
    "s_ts",
    "s_dur",
    "gs_ts",
    "gs_dur",
    "a_name",
    "a_gpu",
    "a_ts",
    "a_dur",
    "dl_ts",
    "dl_dur",
    "st_num",
    "st_ts",
    "st_dur",
)
_TS_COLUMNS = frozenset({"s_ts", "gs_ts", "a_ts", "dl_ts", "st_ts"})


@dataclass
class RankData:
    """The files of one rank (several when schedule cycles wrote one file each and they are merged)."""

    rank: int
    label: str
    files: list[FileData]
    data: FileData
    extra: dict[str, Any] = field(default_factory=dict)


def release_columns(fd: FileData) -> None:
    """Drop the per-event columns once a rank is analysed (keeps counts and names)."""
    for col in _COLUMNS:
        setattr(fd, col, array(getattr(fd, col).typecode))


def merge_files(
    rank: int, label: str, files: Sequence[FileData], gaps_removed: Sequence[float] | None = None
) -> RankData:
    """Concatenate columns; timestamps shift onto the earliest file's clock (one file: no shift).

    ``gaps_removed[k]`` (µs) moves file ``k`` that much earlier on top: cycles laid end to end (runs.py)."""
    if len(files) == 1:
        return RankData(rank, label, list(files), files[0])
    base = min(f.time_offset_us for f in files)
    out = FileData(name=label, size_bytes=sum(f.size_bytes or 0 for f in files), rank=rank)
    out.time_offset_us = base
    out.gpu_mode_reason = "merged with other files of the same rank"
    out.meta = next((f.meta for f in files if f.meta), {})
    for k, f in enumerate(files):
        shift = f.time_offset_us - base - (gaps_removed[k] if gaps_removed is not None else 0.0)
        if f.gpu_feed is not None:
            if out.gpu_feed is None:
                out.gpu_feed = f.gpu_feed.empty()
            out.gpu_feed.merge(f.gpu_feed, shift)
            f.gpu_feed = None
        for col in _COLUMNS:
            src = getattr(f, col)
            dst = getattr(out, col)
            if shift and col in _TS_COLUMNS:
                dst.extend(v + shift for v in src)
            else:
                dst.extend(src)
            setattr(f, col, array(src.typecode))  # the merged copy is the only one kept
        for name, rec in f.cpu_agg.items():
            mine = out.cpu_agg.setdefault(name, [rec[0], 0, 0.0])
            mine[1] += rec[1]
            mine[2] += rec[2]
        out.rt_agg.update(f.rt_agg)
        for attr in (
            "events",
            "x_events",
            "invalid_events",
            "negative_durations",
            "n_launch_records",
            "cpu_ops",
            "runtime_calls",
            "n_kernels",
            "n_memcpy",
            "n_memset",
        ):
            setattr(out, attr, getattr(out, attr) + getattr(f, attr))
        if out.first_gpu_ts is None and f.first_gpu_ts is not None:
            out.first_gpu_ts = f.first_gpu_ts + shift
        if f.launch_span is not None:
            lo, hi = f.launch_span[0] + shift, f.launch_span[1] + shift
            prev = out.launch_span
            out.launch_span = (min(prev[0], lo), max(prev[1], hi)) if prev is not None else (lo, hi)
        out.devices |= f.devices
    return RankData(rank, label, list(files), out)


def analyze_rank(rd: RankData, symbols: SymbolTable, opts: AnalysisOptions, th: dict[str, float]) -> dict[str, Any]:
    """Compute the rank summary (schema ``$defs/rank``)."""
    d = rd.data
    names = symbols.names
    steps = dedupe_steps(d.st_num, d.st_ts, d.st_dur)
    sel = select(steps, opts, has_launches=d.n_launch_records > 0, label=rd.label)
    mode = sel.mode
    win_lo, win_hi = sel.win_lo, sel.win_hi
    steps_in = list(sel.steps_in)
    last_step_dropped = sel.last_step_dropped

    # ---- GPU ops: joined to launches, in start order (streamed during the parse, or from columns) ----
    if d.gpu is None:
        feed = d.gpu_feed if d.gpu_feed is not None else GpuFeed(names, th, StepFrontier(opts), bounded=False)
        d.gpu = feed.finish(sel)
        d.gpu_feed = None
    acc = d.gpu
    kernel_types_all = classify.KERNEL_TYPES
    kstats, type_cache, kernel_ids = acc.kstats, acc.type_cache, acc.kernel_ids
    time_by_kind, mem_dir, memset = acc.time_by_kind, acc.mem_dir, acc.memset
    n_sel = acc.n_sel
    tiny, n_kern_sel = acc.tiny, acc.n_kern_sel
    occ_w, occ_t, n_occ = acc.occ_w, acc.occ_t, acc.n_occ
    delay_thr = th["consecutive_kernel_delay_us"]

    union_us = acc.union_us
    has_union = acc.has_union
    if has_union:
        gpu_lo, gpu_hi = acc.gpu_lo, acc.gpu_hi
    else:
        gpu_lo = gpu_hi = 0.0
    span = gpu_hi - gpu_lo
    idle = span - union_us
    comp_idx = kernel_types_all.index(classify.COMPUTATION)
    comm_idx = kernel_types_all.index(classify.COMMUNICATION)
    compute = acc.type_total[comp_idx]
    non_compute = span - compute - idle
    kernel_types = []
    for mask, t_us in sorted(acc.parts.items(), key=lambda kv: -kv[1]):
        label = " overlapping ".join(t for b, t in enumerate(kernel_types_all) if mask & (1 << b))
        kernel_types.append({"kernel_type": label, "time_us": r2(t_us), "pct": pct(t_us, union_us)})

    streams_out = []
    tot_host = tot_kern = tot_other = 0.0
    for stream in sorted(acc.stream_state):
        _, host, kern, other = acc.stream_state[stream]
        streams_out.append(
            {"stream": stream, "host_wait_us": r2(host), "kernel_wait_us": r2(kern), "other_us": r2(other)}
        )
        tot_host += host
        tot_kern += kern
        tot_other += other
    tot_idle = tot_host + tot_kern + tot_other

    # ---- kernels ----
    def kstat(nid: int, st: list[float]) -> dict[str, Any]:
        n = int(st[0])
        mean = st[1] / n
        var = (st[2] - n * mean * mean) / (n - 1) if n > 1 else 0.0
        name = names[nid]
        ktype = classify.kernel_type(name)
        return {
            "name": name,
            "kernel_type": ktype,
            # Precision describes math; a NCCL int8 reduction or a memcpy has none worth reporting.
            "precision": classify.precision_of(name) if ktype == classify.COMPUTATION else "n/a",
            "count": n,
            "total_us": r2(st[1]),
            "mean_us": r2(mean),
            "min_us": r2(st[3]),
            "max_us": r2(st[4]),
            "std_us": r2(math.sqrt(max(var, 0.0))),
            "pct_of_gpu_op_time": pct(st[1], sum(time_by_kind)),
        }

    kernel_time = time_by_kind[OP_KERNEL]
    by_time = sorted(kstats.items(), key=lambda kv: (-kv[1][1], names[kv[0]]))[: opts.top_k]
    by_count = sorted(kstats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], names[kv[0]]))[: opts.top_k]
    prec: dict[str, list[float]] = {p: [0, 0.0] for p in classify.PRECISIONS}
    tc_time = 0.0
    comp_kernel_time = 0.0
    for nid, st in kstats.items():
        # Precision and Tensor Core use are properties of computation kernels only (not NCCL or memory).
        if nid not in kernel_ids or type_cache.get(nid) != comp_idx:
            continue
        name = names[nid]
        p = prec[classify.precision_of(name)]
        p[0] += st[0]
        p[1] += st[1]
        comp_kernel_time += st[1]
        if classify.uses_tensor_cores(name):
            tc_time += st[1]
    precision = [
        {"precision": p, "count": int(v[0]), "time_us": r2(v[1]), "pct": pct(v[1], comp_kernel_time)}
        for p, v in prec.items()
        if v[0]
    ]

    # ---- launch delay ----
    ld = acc.delays.summary()
    launch = {
        "count": ld.count,
        "mean_us": r2(ld.mean),
        "p50_us": r2(ld.p50),
        "p95_us": r2(ld.p95),
        "p99_us": r2(ld.p99),
        "max_us": r2(ld.max),
        "quantiles": ld.method,
        "over_cutoffs": [
            {"cutoff_us": c, "count": k, "pct": pct(k, ld.count)}
            for c, k in zip(LAUNCH_DELAY_CUTOFFS_US, ld.over, strict=True)
        ],
        "histogram": {"edges_us": [float(e) for e in HIST_EDGES_US], "counts": ld.hist},
        "cpu_launch_mean_us": r2(acc.launch_cpu_sum / acc.launch_cpu_n) if acc.launch_cpu_n else None,
        "negative_raw_count": acc.n_negative_delays,
        "clipped_at_zero": acc.clip_delays,
        "launch_calls": "all" if acc.all_launch_calls else "hta",
    }

    # ---- wall window for CPU-side metrics ----
    if mode == "window":
        cpu_lo, cpu_hi = win_lo, win_hi
    elif steps_in:
        cpu_lo, cpu_hi = steps_in[0][1], max(s[1] + s[2] for s in steps_in)
    else:
        cpu_lo, cpu_hi = -math.inf, math.inf

    # ---- synchronisation ----
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
    glo = gpu_lo if mode != "window" else win_lo
    ghi = gpu_hi if mode != "window" else win_hi
    for ts, dur in zip(d.gs_ts, d.gs_dur, strict=True):
        if mode == "all" or (glo - 1) <= ts <= (ghi + 1) or not has_union:
            gsync_n += 1
            gsync_t += dur
    sync = {
        "calls": sum(int(v[0]) for v in sync_by.values()),
        "time_us": r2(sync_time),
        "gpu_events": gsync_n,
        "gpu_time_us": r2(gsync_t),
        "by_name": [
            {"name": names[nid], "count": int(v[0]), "total_us": r2(v[1])}
            for nid, v in sorted(sync_by.items(), key=lambda kv: -kv[1][1])
        ],
    }
    sync_activity = gsync_t if gsync_n else sync_time
    act_total = kernel_time + time_by_kind[OP_MEMCPY] + time_by_kind[OP_MEMSET] + sync_activity

    # ---- steps ----
    durs = [s[2] for s in steps_in]
    mean, std = mean_std(durs)
    k_sigma = th["step_outlier_sigma"]
    thr = (mean + k_sigma * std) if mean is not None and std is not None else None
    sdurs = sorted(durs)
    first = steps_in[0][1] if steps_in else 0.0
    steps_out = {
        "count": len(durs),
        "mean_us": r2(mean),
        "p50_us": r2(quantile(sdurs, 0.5)),
        "p95_us": r2(quantile(sdurs, 0.95)),
        "max_us": r2(sdurs[-1]) if sdurs else None,
        "min_us": r2(sdurs[0]) if sdurs else None,
        "std_us": r2(std),
        "outlier_sigma": k_sigma,
        "outlier_threshold_us": r2(thr),
        "outliers": [
            {"step": s[0], "duration_us": r2(s[2])} for s in steps_in if thr is not None and std and s[2] > thr
        ],
        "durations": [{"step": s[0], "start_us": r2(s[1] - first), "duration_us": r2(s[2])} for s in steps_in[:10000]],
        "histogram": histogram(durs),
    }

    # ---- DataLoader share ----
    dl_merged = intervals.merge(zip(d.dl_ts, (t + du for t, du in zip(d.dl_ts, d.dl_dur, strict=True)), strict=True))
    step_total = sum(durs)
    if steps_in:
        step_iv = intervals.merge((s[1], s[1] + s[2]) for s in steps_in)
        dl_time = intervals.intersection_length(dl_merged, step_iv)
    else:
        dl_time = intervals.total(dl_merged)
    dataloader = {
        "time_us": r2(dl_time),
        "step_time_us": r2(step_total),
        "share_pct": pct_or_none(dl_time, step_total),
        "events": len(d.dl_ts),
    }

    # ---- annotations ----
    ann: dict[tuple[int, int], list[float]] = {}
    ann_durs: dict[tuple[int, int], list[float]] = {}
    for nid, gpu, ts, dur in zip(d.a_name, d.a_gpu, d.a_ts, d.a_dur, strict=True):
        if not (cpu_lo <= ts <= cpu_hi) and not (gpu and glo <= ts <= ghi):
            continue
        key = (gpu, nid)
        arec = ann.get(key)
        if arec is None:
            ann[key] = [1, dur, dur]
            ann_durs[key] = [dur]
        else:
            arec[0] += 1
            arec[1] += dur
            arec[2] = max(arec[2], dur)
            lst = ann_durs[key]
            if len(lst) < 100_000:
                lst.append(dur)

    def ann_list(gpu: int) -> list[dict[str, Any]]:
        rows = [(k, v) for k, v in ann.items() if k[0] == gpu]
        rows.sort(key=lambda kv: -kv[1][1])
        return [
            {
                "name": names[k[1]],
                "count": int(v[0]),
                "total_us": r2(v[1]),
                "mean_us": r2(v[1] / v[0]),
                "max_us": r2(v[2]),
                "histogram": histogram(ann_durs[k]),
            }
            for k, v in rows[: max(opts.top_k, 50)]
        ]

    # ---- communication ----
    comm_t = acc.type_total[comm_idx]
    overlap = acc.overlap_us(comm_idx, comp_idx)
    n_comm = sum(int(st[0]) for nid, st in kstats.items() if type_cache.get(nid) == comm_idx)

    top_cpu = sorted(((n, r) for n, r in d.cpu_agg.items() if r[0] != 1), key=lambda kv: -kv[1][2])[: opts.top_k]

    device = _device(d.meta, d.devices)
    dist = d.meta.get("distributedInfo")
    return {
        "rank": rd.rank,
        "label": rd.label,
        "sources": [f.name for f in rd.files],
        "complete": all(f.complete for f in rd.files),
        "gpu_analysis": {"mode": d.gpu_mode, "reason": d.gpu_mode_reason},
        "has_gpu": bool(d.n_kernels + d.n_memcpy + d.n_memset),
        "device": device,
        "distributed": (
            {"world_size": _int_or_none(dist.get("world_size")), "backend": _str_or_none(dist.get("backend"))}
            if isinstance(dist, dict)
            else None
        ),
        "counts": {
            "events": d.events,
            "gpu_kernels": d.n_kernels,
            "gpu_memcpy": d.n_memcpy,
            "gpu_memset": d.n_memset,
            "gpu_ops_analyzed": n_sel,
            "cpu_ops": d.cpu_ops,
            "runtime_calls": d.runtime_calls,
            "invalid_events": d.invalid_events,
        },
        "window": {
            "start_us": r2(gpu_lo) if has_union else (r2(cpu_lo) if math.isfinite(cpu_lo) else None),
            "end_us": r2(gpu_hi) if has_union else (r2(cpu_hi) if math.isfinite(cpu_hi) else None),
            "duration_us": r2(span if has_union else (cpu_hi - cpu_lo if math.isfinite(cpu_lo) else 0.0)) or 0.0,
            "steps": [s[0] for s in steps_in],
            "last_step_dropped": last_step_dropped,
        },
        "temporal_breakdown": {
            "gpu_span_us": r2(span),
            "idle_time_us": r2(idle),
            "compute_time_us": r2(compute),
            "non_compute_time_us": r2(non_compute),
            "idle_pct": pct(idle, span),
            "compute_pct": pct(compute, span),
            "non_compute_pct": pct(non_compute, span),
        },
        "idle_breakdown": {
            "host_wait_us": r2(tot_host),
            "kernel_wait_us": r2(tot_kern),
            "other_us": r2(tot_other),
            "host_wait_pct": pct(tot_host, tot_idle),
            "kernel_wait_pct": pct(tot_kern, tot_idle),
            "other_pct": pct(tot_other, tot_idle),
            "consecutive_kernel_delay_us": delay_thr,
            "per_stream": streams_out,
        },
        "gpu_activity": {
            "kernel_time_us": r2(kernel_time),
            "memcpy_time_us": r2(time_by_kind[OP_MEMCPY]),
            "memset_time_us": r2(time_by_kind[OP_MEMSET]),
            "sync_time_us": r2(sync_activity),
            "kernel_pct": pct(kernel_time, act_total),
            "memcpy_pct": pct(time_by_kind[OP_MEMCPY], act_total),
            "memset_pct": pct(time_by_kind[OP_MEMSET], act_total),
            "sync_pct": pct(sync_activity, act_total),
        },
        "kernel_types": kernel_types,
        "top_kernels_by_time": [kstat(nid, st) for nid, st in by_time],
        "top_kernels_by_count": [kstat(nid, st) for nid, st in by_count],
        "distinct_kernels": len(kstats),
        "precision": precision,
        "launch_delay": launch,
        "sync": sync,
        "memory_ops": {
            "memcpy": [
                {
                    "direction": k,
                    "count": int(v[0]),
                    "bytes": int(v[1]),
                    "time_us": r2(v[2]),
                    "bandwidth_gbps": r2(v[1] / v[2] / 1000.0) if v[2] > 0 else None,
                }
                for k, v in sorted(mem_dir.items())
            ],
            "memset": {
                "count": int(memset[0]),
                "bytes": int(memset[1]),
                "time_us": r2(memset[2]),
                "bandwidth_gbps": r2(memset[1] / memset[2] / 1000.0) if memset[2] > 0 else None,
            },
        },
        "steps": steps_out,
        "dataloader": dataloader,
        "annotations": {"cpu": ann_list(0), "gpu": ann_list(1)},
        "communication": {
            "kernel_count": n_comm,
            "comm_time_us": r2(comm_t),
            "compute_time_us": r2(compute),
            "overlap_time_us": r2(overlap),
            "overlap_pct_of_comm": pct_or_none(overlap, comm_t),
            "comm_pct_of_span": pct_or_none(comm_t, span),
        },
        "occupancy": {
            "kernels_with_occupancy": n_occ,
            "weighted_mean_occupancy_pct": r2(occ_w / occ_t) if occ_t > 0 else None,
            "tensor_core_time_us": r2(tc_time),
            "tensor_core_pct_of_compute": pct_or_none(tc_time, comp_kernel_time),
        },
        "top_cpu_ops": [{"name": n, "count": int(r[1]), "total_us": r2(r[2])} for n, r in top_cpu],
        "_internal": {"tiny_kernels": tiny, "kernels_selected": n_kern_sel, "step_total_us": step_total},
    }


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _device(meta: dict[str, Any], devices: set[int]) -> dict[str, Any] | None:
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
