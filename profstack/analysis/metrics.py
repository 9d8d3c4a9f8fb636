"""Per-rank metrics computed from the compact columns of one or more parsed files (stateless)."""

from __future__ import annotations

import bisect
import itertools
import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profstack.analysis import classify, intervals
from profstack.analysis.errors import StepWindowError
from profstack.analysis.options import LAUNCH_DELAY_CUTOFFS_US, AnalysisOptions
from profstack.analysis.parse import OP_KERNEL, OP_MEMCPY, OP_MEMSET, FileData, SymbolTable
from profstack.analysis.stats import histogram, mean_std, pct, pct_or_none, quantile, r2

_NAN = math.nan
_COLUMNS = (
    "g_name",
    "g_kind",
    "g_ts",
    "g_dur",
    "g_stream",
    "g_corr",
    "g_bytes",
    "g_occ",
    "r_corr",
    "r_ts",
    "r_dur",
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
_TS_COLUMNS = frozenset({"g_ts", "r_ts", "s_ts", "gs_ts", "a_ts", "dl_ts", "st_ts"})


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


def merge_files(rank: int, label: str, files: Sequence[FileData]) -> RankData:
    """Concatenate columns; timestamps shift onto the earliest file's clock (one file: no shift)."""
    if len(files) == 1:
        return RankData(rank, label, list(files), files[0])
    base = min(f.time_offset_us for f in files)
    out = FileData(name=label, size_bytes=sum(f.size_bytes or 0 for f in files), rank=rank)
    out.time_offset_us = base
    out.meta = next((f.meta for f in files if f.meta), {})
    for f in files:
        shift = f.time_offset_us - base
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
            "cpu_ops",
            "runtime_calls",
            "n_kernels",
            "n_memcpy",
            "n_memset",
        ):
            setattr(out, attr, getattr(out, attr) + getattr(f, attr))
        out.devices |= f.devices
    return RankData(rank, label, list(files), out)


class _Launches:
    """correlation id -> launch index: a direct-address int32 table (5 bytes per id in the range) when
    ids are reasonably dense, which real traces are (range/launches is about 5), else a dict."""

    def __init__(self, d: FileData) -> None:
        self.lo = 0
        self.table: array[int] | None = None
        self.index: dict[int, int] = {}
        self.seen = bytearray()
        self.seen_set: set[int] = set()
        self.r_ts = d.r_ts
        self.r_dur = d.r_dur
        n = len(d.r_corr)
        if n == 0:
            return
        lo, hi = min(d.r_corr), max(d.r_corr)
        if hi - lo <= 24 * n + (1 << 20) and n < 2**31:
            self.lo = lo
            size = hi - lo + 1
            table = array("i", [-1]) * size
            for i, c in enumerate(d.r_corr):
                table[c - lo] = i
            self.table = table
            self.seen = bytearray(size)
        else:
            self.index = {c: i for i, c in enumerate(d.r_corr)}

    def first_use(self, corr: int) -> bool:
        """True the first time a correlation id is asked for (a graph launch feeds many kernels)."""
        if corr in self.seen_set:
            return False
        self.seen_set.add(corr)
        return True

    def lookup(self, corr: int) -> tuple[float, float]:
        i = self.index.get(corr)
        if i is None:
            return _NAN, _NAN
        return self.r_ts[i], self.r_dur[i]


def _steps(d: FileData) -> list[tuple[int, float, float]]:
    seen: dict[tuple[int, float], tuple[int, float, float]] = {}
    for num, ts, dur in zip(d.st_num, d.st_ts, d.st_dur, strict=True):
        seen[(num, ts)] = (num, ts, dur)
    return sorted(seen.values(), key=lambda s: s[1])


def analyze_rank(rd: RankData, symbols: SymbolTable, opts: AnalysisOptions, th: dict[str, float]) -> dict[str, Any]:
    """Compute the rank summary (schema ``$defs/rank``)."""
    d = rd.data
    names = symbols.names
    ceil, floor = math.ceil, math.floor
    steps = _steps(d)

    # ---- which GPU ops are analysed (step window, or HTA's last-step rule) ----
    win_lo = -math.inf
    win_hi = math.inf
    steps_in: list[tuple[int, float, float]] = steps
    mode = "all"
    last_step_dropped = False
    if opts.steps is not None:
        a, b = opts.steps
        steps_in = [s for s in steps if a <= s[0] <= b]
        if not steps_in:
            raise StepWindowError(f"no ProfilerStep in {a}:{b} (trace has {_step_range(steps)})", source=rd.label)
        win_lo = steps_in[0][1]
        win_hi = max(s[1] + s[2] for s in steps_in)
        mode = "window"
    elif len({s[0] for s in steps}) >= 2:
        mode = "hta"
        last_start = ceil(max(s[1] for s in steps))
        last_end = floor(max(s[1] + s[2] for s in steps))
        if not opts.include_last_step:
            steps_in = [s for s in steps if ceil(s[1]) < last_start]
            last_step_dropped = True
        if not d.r_corr:
            # no launch was recorded at all (activity-only trace): select GPU ops by their own start
            # instead of dropping every one of them as HTA would
            mode = "window"
            win_lo = steps_in[0][1]
            win_hi = (last_start if not opts.include_last_step else last_end) + 1e-9

    launches = _Launches(d)
    g_name, g_kind, g_ts, g_dur = d.g_name, d.g_kind, d.g_ts, d.g_dur
    g_stream, g_corr, g_bytes, g_occ = d.g_stream, d.g_corr, d.g_bytes, d.g_occ

    type_cache: dict[int, int] = {}  # name id -> index into classify.KERNEL_TYPES
    kstats: dict[int, list[float]] = {}  # nid -> [count, sum, sumsq, min, max] (all GPU ops, like HTA)
    kernel_ids: set[int] = set()  # names seen as real kernels (not memcpy/memset)
    mem_dir: dict[str, list[float]] = {}
    memset: list[float] = [0, 0, 0.0]
    time_by_kind = [0.0, 0.0, 0.0]
    delays = array("d")
    launch_cpu = array("d")
    # selected ops, HTA-rounded: start, end, launch start (NaN: none), type, stream
    sel_s = array("d")
    sel_e = array("d")
    sel_l = array("d")
    sel_t = array("b")
    sel_stream = array("i")
    occ_w = occ_t = 0.0
    n_occ = 0
    tiny = 0
    n_kern_sel = 0
    tiny_us = th["tiny_kernel_us"]
    kernel_types_all = classify.KERNEL_TYPES
    table, tab_lo, seen = launches.table, launches.lo, launches.seen
    r_ts_col, r_dur_col = d.r_ts, d.r_dur
    n_tab = len(table) if table is not None else 0
    dir_cache: dict[int, list[float]] = {}  # memcpy name id -> its direction's accumulator
    hta_incl = opts.include_last_step
    in_window = mode == "window"
    hta = mode == "hta"
    for i in range(len(g_ts)):
        ts = g_ts[i]
        dur = g_dur[i]
        corr = g_corr[i]
        k = corr - tab_lo
        if table is not None:
            ri = table[k] if 0 <= k < n_tab else -1
            if ri >= 0:
                rts = r_ts_col[ri]
                rdur = r_dur_col[ri]
            else:
                rts = rdur = _NAN
        elif corr >= 0:
            rts, rdur = launches.lookup(corr)
        else:
            rts = rdur = _NAN
        has_launch = rts == rts  # noqa: PLR0124 - NaN test in the per-op loop
        if in_window:
            ref = rts if has_launch else ts
            if ref < win_lo or ref >= win_hi:  # half-open: a launch at the end belongs to the next step
                continue
        elif hta:
            if not has_launch:
                continue  # HTA keeps only GPU ops whose launch it can correlate
            rc = ceil(rts)
            if hta_incl:
                if rc > last_end:
                    continue
            elif rc >= last_start:
                continue
        s: float = ceil(ts)
        e: float = floor(ts + dur)
        nid = g_name[i]
        kt = type_cache.get(nid)
        if kt is None:
            kt = kernel_types_all.index(classify.kernel_type(names[nid]))
            type_cache[nid] = kt
        sel_s.append(s)
        sel_e.append(e)
        sel_l.append(ceil(rts) if has_launch else _NAN)
        sel_t.append(kt)
        sel_stream.append(g_stream[i])
        kind = g_kind[i]
        rd_us = e - s
        time_by_kind[kind] += rd_us
        st = kstats.get(nid)
        if st is None:
            kstats[nid] = [1, rd_us, rd_us * rd_us, rd_us, rd_us]
        else:
            st[0] += 1
            st[1] += rd_us
            st[2] += rd_us * rd_us
            if rd_us < st[3]:  # noqa: PLR1730 - branch is cheaper than min() here
                st[3] = rd_us
            if rd_us > st[4]:  # noqa: PLR1730
                st[4] = rd_us
        if kind == OP_KERNEL:
            n_kern_sel += 1
            kernel_ids.add(nid)
            if dur < tiny_us:
                tiny += 1
            occ = g_occ[i]
            if occ >= 0:
                n_occ += 1
                occ_w += occ * dur
                occ_t += dur
        elif kind == OP_MEMCPY:
            md = dir_cache.get(nid)
            if md is None:
                md = mem_dir.setdefault(classify.memcpy_direction(names[nid]), [0, 0, 0.0])
                dir_cache[nid] = md
            md[0] += 1
            md[1] += g_bytes[i]
            md[2] += dur
        elif kind == OP_MEMSET:
            memset[0] += 1
            memset[1] += g_bytes[i]
            memset[2] += dur
        if has_launch:
            if table is not None:
                if seen[k]:
                    continue
                seen[k] = 1
            elif not launches.first_use(corr):
                continue
            delays.append(ts - (rts + rdur))
            launch_cpu.append(rdur)
    n_sel = len(sel_s)
    del launches

    # ---- one sweep in start order: unions per kernel type and overall, HTA idle breakdown per stream ----
    order: Iterable[int]
    if all(a <= b for a, b in itertools.pairwise(sel_s)):
        order = range(n_sel)
    else:
        order = sorted(range(n_sel), key=sel_s.__getitem__)
    merged_by_type = [intervals.Merged() for _ in kernel_types_all]
    all_merged = intervals.Merged()
    delay_thr = th["consecutive_kernel_delay_us"]
    stream_state: dict[int, list[float]] = {}  # stream -> [prev_end, host_wait, kernel_wait, other]
    # open interval per type (index 3 = all types); flushed into the Merged columns when a gap appears
    open_s = [0.0, 0.0, 0.0, 0.0]
    open_e = [-math.inf, -math.inf, -math.inf, -math.inf]
    targets = [*merged_by_type, all_merged]
    t_starts = [m.starts.append for m in targets]
    t_ends = [m.ends.append for m in targets]
    all_s = 0.0
    all_e = -math.inf
    all_starts, all_ends = all_merged.starts.append, all_merged.ends.append
    state_get = stream_state.get
    for j in order:
        s = sel_s[j]
        e = sel_e[j]
        if e > s:
            t = sel_t[j]
            if s <= open_e[t]:
                if e > open_e[t]:  # noqa: PLR1730 - hot loop
                    open_e[t] = e
            else:
                if open_e[t] > open_s[t]:
                    t_starts[t](open_s[t])
                    t_ends[t](open_e[t])
                open_s[t] = s
                open_e[t] = e
            if s <= all_e:
                if e > all_e:  # noqa: PLR1730 - hot loop
                    all_e = e
            else:
                if all_e > all_s:
                    all_starts(all_s)
                    all_ends(all_e)
                all_s = s
                all_e = e
        stream = sel_stream[j]
        ss = state_get(stream)
        if ss is None:
            stream_state[stream] = [e, 0.0, 0.0, 0.0]
            continue
        prev_end = ss[0]
        gap = s - prev_end
        if sel_l[j] > prev_end:  # launched after the previous op ended; NaN (no launch) compares False
            ss[1] += gap
        elif gap < delay_thr:
            ss[2] += gap
        else:
            ss[3] += gap
        ss[0] = e
    open_s[3], open_e[3] = all_s, all_e
    for t, target in enumerate(targets):
        if open_e[t] > open_s[t]:
            target.starts.append(open_s[t])
            target.ends.append(open_e[t])
    del order, sel_s, sel_e, sel_l, sel_t, sel_stream

    union_us = intervals.total(all_merged)
    if len(all_merged):
        gpu_lo, gpu_hi = all_merged.lo, all_merged.hi
    else:
        gpu_lo = gpu_hi = 0.0
    span = gpu_hi - gpu_lo
    idle = span - union_us
    comp_idx = kernel_types_all.index(classify.COMPUTATION)
    comm_idx = kernel_types_all.index(classify.COMMUNICATION)
    compute = intervals.total(merged_by_type[comp_idx])
    non_compute = span - compute - idle
    parts = intervals.partition_by_set(merged_by_type)
    kernel_types = []
    for mask, t_us in sorted(parts.items(), key=lambda kv: -kv[1]):
        label = " overlapping ".join(t for b, t in enumerate(kernel_types_all) if mask & (1 << b))
        kernel_types.append({"kernel_type": label, "time_us": r2(t_us), "pct": pct(t_us, union_us)})

    streams_out = []
    tot_host = tot_kern = tot_other = 0.0
    for stream in sorted(stream_state):
        _, host, kern, other = stream_state[stream]
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
    sd = sorted(delays)
    n_launch = len(sd)
    launch = {
        "count": n_launch,
        "mean_us": r2(sum(sd) / n_launch) if n_launch else None,
        "p50_us": r2(quantile(sd, 0.5)),
        "p95_us": r2(quantile(sd, 0.95)),
        "p99_us": r2(quantile(sd, 0.99)),
        "max_us": r2(sd[-1]) if sd else None,
        "over_cutoffs": [
            {"cutoff_us": c, "count": (k := n_launch - bisect.bisect_right(sd, c)), "pct": pct(k, n_launch)}
            for c in LAUNCH_DELAY_CUTOFFS_US
        ],
        "histogram": histogram(sd),
        "cpu_launch_mean_us": r2(sum(launch_cpu) / len(launch_cpu)) if launch_cpu else None,
    }
    del sd, delays

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
        if mode == "all" or (glo - 1) <= ts <= (ghi + 1) or not len(all_merged):
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
    comm_m = merged_by_type[comm_idx]
    comp_m = merged_by_type[comp_idx]
    comm_t = intervals.total(comm_m)
    overlap = intervals.intersection_length(comm_m, comp_m)
    n_comm = sum(int(st[0]) for nid, st in kstats.items() if type_cache.get(nid) == comm_idx)

    top_cpu = sorted(((n, r) for n, r in d.cpu_agg.items() if r[0] != 1), key=lambda kv: -kv[1][2])[: opts.top_k]

    device = _device(d.meta, d.devices)
    dist = d.meta.get("distributedInfo")
    return {
        "rank": rd.rank,
        "label": rd.label,
        "sources": [f.name for f in rd.files],
        "complete": all(f.complete for f in rd.files),
        "has_gpu": bool(len(g_ts)),
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
            "start_us": r2(gpu_lo) if len(all_merged) else (r2(cpu_lo) if math.isfinite(cpu_lo) else None),
            "end_us": r2(gpu_hi) if len(all_merged) else (r2(cpu_hi) if math.isfinite(cpu_hi) else None),
            "duration_us": r2(span if len(all_merged) else (cpu_hi - cpu_lo if math.isfinite(cpu_lo) else 0.0)) or 0.0,
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


def _step_range(steps: Sequence[tuple[int, float, float]]) -> str:
    if not steps:
        return "no ProfilerStep"
    nums = [s[0] for s in steps]
    return f"steps {min(nums)}..{max(nums)}"


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
