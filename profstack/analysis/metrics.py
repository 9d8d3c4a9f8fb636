"""One rank: merge its files' compact columns, then compose the per-section analyzers (analyzers/)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from profstack.analysis import op_types
from profstack.analysis.analyzers import kernels, rank_info, synchronisation, time_breakdown
from profstack.analysis.analyzers import steps as steps_analyzer
from profstack.analysis.analyzers.activity import activity
from profstack.analysis.analyzers.annotations import annotation_stats
from profstack.analysis.analyzers.communication import communication
from profstack.analysis.analyzers.cuda_graphs import cuda_graphs
from profstack.analysis.analyzers.data_loading import dataloader
from profstack.analysis.analyzers.host_side import host_collective_spans, idle_causes
from profstack.analysis.analyzers.launch_delay import launch_delay
from profstack.analysis.analyzers.memory import memory
from profstack.analysis.analyzers.memory_ops import memory_ops
from profstack.analysis.analyzers.view import RankView, rank_view, window
from profstack.analysis.gpu import GpuFeed, LaunchGaps, StepFrontier, dedupe_steps, select
from profstack.analysis.options import AnalysisOptions, RuleThresholds
from profstack.analysis.parse import FileData, SymbolTable
from profstack.analysis.summary import RankSummary

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
            "gpu_fractional",
            "flow_starts",
            "flow_finishes",
        ):
            setattr(out, attr, getattr(out, attr) + getattr(f, attr))
        if out.first_gpu_ts is None and f.first_gpu_ts is not None:
            out.first_gpu_ts = f.first_gpu_ts + shift
        if f.launch_span is not None:
            lo, hi = f.launch_span[0] + shift, f.launch_span[1] + shift
            prev = out.launch_span
            out.launch_span = (min(prev[0], lo), max(prev[1], hi)) if prev is not None else (lo, hi)
        out.devices |= f.devices
        out.cpu_timeline.merge(f.cpu_timeline, shift)
        tid_offset = len(out.memory.tids)
        out.memory.tids.update({(f.name, t): i + tid_offset for t, i in f.memory.tids.items()})
        out.memory.extend(f.memory, shift, tid_offset)
        out.memory_attributed = out.memory_attributed and f.memory_attributed
    return RankData(rank, label, list(files), out)


@dataclass(frozen=True)
class RankInternal:
    """What the rules need beyond the published rank summary (never written to summary.json)."""

    tiny_kernels: int  # kernels shorter than the tiny_kernel_us threshold
    kernels_selected: int  # kernels in the analysed window
    step_total_us: float  # sum of the analysed steps' durations
    gpu_op_raw_us: float = 0.0  # analysed kernels, memcpy and memset as written
    gpu_op_rounded_us: float = 0.0  # the same after HTA's whole-µs rounding (what every GPU total uses)
    duplicate_gpu_ops: int = 0  # analysed GPU ops that repeat the op before them on their stream
    streams_folded_ops: int = 0  # GPU ops on streams beyond gpu.MAX_STREAMS (one shared idle-breakdown row)
    launch_gaps: LaunchGaps = field(default_factory=LaunchGaps)  # launches without a GPU row (whole files)


@dataclass(frozen=True)
class RankAnalysis:
    summary: RankSummary
    internal: RankInternal


def _op_types(rd: RankData, v: RankView) -> op_types.OpTypes | None:
    """The op input classes of the rank's untyped computation kernels (profstack.analysis.op_types), as the main
    pass collected them from its files, where they can change the precision section: None where they cannot."""
    names, untyped, total = kernels.untyped_computation(v)
    if not names or total <= 0 or untyped < op_types.MIN_UNTYPED_SHARE * total:
        return None
    out: op_types.OpTypes | None = None
    for f in rd.files:
        # not collected (the option off, or the header said record_shapes was off), or the trailing metadata says so
        if f.op_types is None or f.meta.get("record_shapes") in (0, False):
            continue
        got = f.op_types.result(names)
        if out is None:
            out = got
        else:
            out.merge(got)
    return out


def time_resolution_ns(v: RankView, *, hta_compat: bool) -> float | None:
    """The resolution the rank's GPU times have (None without GPU ops): whole µs in HTA's time model or for a trace
    that writes whole µs (2021 Kineto); else the spacing of doubles at its clock values, at least 1 ns (what Kineto
    writes). torch >= 2 writes µs since ``baseTimeNanoseconds`` (~5e12: 1 ns); an absolute epoch clock (~1.7e15 µs)
    holds starts to 0.25 µs only, though each duration keeps its ns (``gpu.end_ns``)."""
    acc = v.acc
    if not acc.ops_lo <= acc.ops_hi:  # no GPU op (every one may have rounded away in HTA's model)
        return None
    if hta_compat or not v.d.gpu_fractional:
        return 1000.0
    largest = max(abs(acc.ops_lo), abs(acc.ops_hi))
    return max(1.0, math.ulp(largest) * 1000.0) if math.isfinite(largest) else None


def analyze_rank(rd: RankData, symbols: SymbolTable, opts: AnalysisOptions, th: RuleThresholds) -> RankAnalysis:
    """Compute the rank summary (schema ``$defs/rank``): one stateless analyzer per section."""
    d = rd.data
    names = symbols.names
    steps = dedupe_steps(d.st_num, d.st_ts, d.st_dur)
    sel = select(steps, opts, has_launches=d.n_launch_records > 0, label=rd.label)

    # ---- GPU ops: joined to launches, in start order (streamed during the parse, or from columns) ----
    if d.gpu is None:
        feed = d.gpu_feed
        if feed is None:
            feed = GpuFeed(names, th.as_dict(), StepFrontier(opts), bounded=False, hta_compat=opts.hta_compat)
        d.gpu = feed.finish(sel)
        d.gpu_feed = None
    v = rank_view(d, names, d.gpu, sel)

    sync, sync_activity = synchronisation.sync(v)
    ops = _op_types(rd, v) if opts.op_types else None
    ck = kernels.compute_kernels(v, ops)
    step_total = steps_analyzer.step_total(v)
    host = host_collective_spans(v)
    idle = time_breakdown.idle_breakdown(v, th)
    idle["causes"] = idle_causes(v, host.merged)
    summary: RankSummary = {
        "rank": rd.rank,
        "label": rd.label,
        "sources": [f.name for f in rd.files],
        "complete": all(f.complete for f in rd.files),
        "gpu_analysis": rank_info.gpu_analysis(v),
        "has_gpu": rank_info.has_gpu(v),
        "device": rank_info.device(v),
        "distributed": rank_info.distributed(v),
        "counts": rank_info.counts(v),
        "window": window(v),
        "time_resolution_ns": time_resolution_ns(v, hta_compat=opts.hta_compat),
        "temporal_breakdown": time_breakdown.temporal_breakdown(v),
        "idle_breakdown": idle,
        "gpu_activity": time_breakdown.gpu_activity(v, sync_activity, sync["time_us"]),
        "kernel_types": time_breakdown.kernel_types(v),
        "top_kernels_by_time": kernels.top_kernels_by_time(v, opts.top_k, ops, ck.context),
        "top_kernels_by_count": kernels.top_kernels_by_count(v, opts.top_k, ops, ck.context),
        "distinct_kernels": len(v.acc.kstats),
        "precision": ck.precision,
        "conversion_kernels": ck.conversions,
        "launch_delay": launch_delay(v),
        "sync": sync,
        "memory_ops": memory_ops(v),
        "steps": steps_analyzer.steps(v, th),
        "dataloader": dataloader(v, step_total),
        "annotations": annotation_stats(v, opts.top_k),
        "communication": communication(v, step_total, host),
        "occupancy": kernels.occupancy(v, ck),
        "top_cpu_ops": rank_info.top_cpu_ops(v, opts.top_k),
        "timeline": activity(v),
        "memory": memory(v),
        "cuda_graphs": cuda_graphs(v),
    }
    internal = RankInternal(
        tiny_kernels=v.acc.tiny,
        kernels_selected=v.acc.n_kern_sel,
        step_total_us=step_total,
        gpu_op_raw_us=v.acc.raw_us,
        gpu_op_rounded_us=float(sum(v.acc.time_by_kind)),
        duplicate_gpu_ops=v.acc.n_duplicates,
        streams_folded_ops=v.acc.n_stream_folded + sum(f.streams_folded for f in rd.files),
        launch_gaps=v.acc.launch_gaps,
    )
    return RankAnalysis(summary, internal)
