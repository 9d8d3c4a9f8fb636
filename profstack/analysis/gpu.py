"""GPU-side analysis in one pass over GPU ops in start order, with state that does not grow with the trace.

``GpuAccumulator`` takes GPU ops in start order and keeps only bounded aggregates: per-name kernel stats,
per-stream idle state, one open interval per kernel type (closed ones are folded into the type-overlap
partition every few thousand), and the launch-delay distribution (exact up to 65,536 launches, then a
sketch with 0.1 % relative error).

``GpuFeed`` collects a file's ops (compact ``OpColumns``) and launches (``LaunchJoin``) while it is parsed.
Bounded (the streaming pass), it hands the oldest pending ops over in start order, keeping back the
newest ``REORDER_WINDOW_OPS`` in file order (multi-stream traces are out of start order by a few thousand
ops) and any op a ProfilerStep not yet parsed could still select differently; launches are pruned to the
newest ``LAUNCH_CAPACITY``. Kineto writes a kernel a few events before or after its launch and all
ProfilerSteps before the GPU section, so these bounds hold with a wide margin. When a trace breaks them
(an op far behind its launch, ops out of order beyond the window, steps that change the selection after
ops were handed over) the feed raises ``StreamingAbort`` and the file is parsed again unbounded (the
buffered pass: everything waits for ``finish``), as files merged into one rank always are.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from profstack.analysis import classify, intervals, native
from profstack.analysis.errors import StepWindowError
from profstack.analysis.options import LAUNCH_DELAY_CUTOFFS_US, AnalysisOptions
from profstack.analysis.sketch import DelayDistribution
from profstack.analysis.timebins import TimeBins

#: series of ``GpuAccumulator.timeline`` (busy time per bin; launches: calls per bin, and their CPU time)
GPU_SERIES = ("busy", *classify.KERNEL_TYPES, "launch_calls", "launch_time")

_NAN = math.nan
_INF = math.inf

#: The accumulator's clock: integer nanoseconds. Kineto writes µs floats with ns precision (relative to
#: ``baseTimeNanoseconds`` in torch >= 2), older traces whole µs, XSpace ps/ns; every op becomes an integer interval
#: ``[start_ns, end_ns)``, so unions and sums are exact and do not depend on the order of additions (the C loops
#: give the same integers). Two time models (``AnalysisOptions.hta_compat``):
#:
#: * exact (default): ``start = ns_of(ts)``, ``end = start + ns_of(dur)``: the trace's own resolution. A duration
#:   keeps every ns the profiler wrote even where the start, an absolute epoch-µs float (~1.7e15 µs: a double
#:   holds it to 0.25 µs), does not.
#: * HTA (``hta_compat``): ``start = ceil(ts)``, ``end = floor(ts + dur)`` in whole µs, as HolisticTraceAnalysis
#:   rounds (an op inside one whole µs counts 0), expressed in the same integers (× 1000).
NS_PER_US = 1000


def ns_of(x: float) -> int:
    """``x`` µs as the nearest integer ns (ties to even), exactly for every double: the integer part times 1000 plus
    the fraction's ns (``x - floor(x)`` is exact). Raises as ``math.floor`` does on infinity and NaN."""
    i = math.floor(x)
    return i * 1000 + round((x - i) * 1000.0)


def start_ns(ts: float, hta: bool) -> int:
    """An op's start in the time model: ``ns_of(ts)``, or HTA's ``ceil(ts)`` whole µs."""
    return math.ceil(ts) * 1000 if hta else ns_of(ts)


def end_ns(ts: float, dur: float, start: int, hta: bool) -> int:
    """An op's end (``start`` is ``start_ns(ts, hta)``): ``start + ns_of(dur)``, or HTA's ``floor(ts + dur)``."""
    return math.floor(ts + dur) * 1000 if hta else start + ns_of(dur)


def _us_column(col: array[float], base_us: float) -> array[float]:
    """Relative ns (``col``) as µs on the host's clock: one correctly rounded division (a whole µs stays exact:
    HTA's model gives the timeline it always gave), then the whole-µs base (C: ``us_column``)."""
    return array(
        "d", map(operator.add, map(operator.truediv, col, itertools.repeat(1000.0)), itertools.repeat(base_us))
    )


def us_of(t_ns: float) -> float:
    """ns (an int, or a float holding an integer) as µs, correctly rounded once (exact for whole µs); infinity and
    NaN stay what they are."""
    if isinstance(t_ns, float) and not math.isfinite(t_ns):
        return t_ns
    return int(t_ns) / 1000


OP_KERNEL = 0
OP_MEMCPY = 1
OP_MEMSET = 2
OP_SYNC = 3  # a cuda_sync row (Stream Sync, Context Sync, Stream Wait Event): GPU time like HTA, not a GPU op

#: launch-call classes, encoded in the imaginary part of a ``LaunchJoin`` entry (start + 1j * code):
#: code >= 0: a call in HTA's launch-call set, its duration; code < 0: another call that may launch GPU work,
#: duration ``-code - 1``; NaN: a synchronisation call (joins cuda_sync rows, never a launch delay)
HTA_LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",  # MTIA
    }
)


def launch_code(dur: float, klass: int) -> float:
    """The imaginary part stored for a launch: ``klass`` 0 = HTA set, 1 = other launch, 2 = sync call."""
    if klass == 0:
        return dur
    if klass == 1:
        return -dur - 1.0
    return _NAN


Step = tuple[int, float, float]  # number, start, duration

#: streams with a row of their own in the idle breakdown; ops on further streams share the row ``OTHER_STREAM``
#: (a hostile trace with a stream per op would otherwise grow state and summary with its ops)
MAX_STREAMS = 1024
OTHER_STREAM = -(2**31)

# Bounds of the streaming pass (module constants so tests can shrink them to exercise every path).
REORDER_WINDOW_OPS = 1 << 13  # newest ops (file order) held back: later ops may start before them
DRAIN_BATCH_OPS = 1 << 13  # ops handed over at a time
LAUNCH_CAPACITY = 1 << 16  # launches kept for ops still to come (up to twice this between prunes)


class StreamingAbort(Exception):
    """The trace breaks an assumption of the bounded streaming pass; parse it again buffered."""


@dataclass(frozen=True)
class Selection:
    """Which GPU ops and which wall window are analysed."""

    mode: str  # "all" | "hta" (HTA's last-step rule) | "window" (--steps, or no launches) | "none"
    win_lo: float = -_INF
    win_hi: float = _INF
    #: the last step's start and end: whole µs (ceil, floor) in HTA's time model, as written in the exact one
    last_start: float = 0
    last_end: float = 0
    include_last: bool = False
    steps_in: tuple[Step, ...] = ()
    last_step_dropped: bool = False
    need_launch: bool = False  # window mode: keep only ops joined to a launch (HTA), not by their own start
    hta_compat: bool = False  # the last-step rule compares ceil(launch start) with the whole-µs bounds above

    def launch_selected(self, rts: float) -> bool:
        """Whether an op launched at ``rts`` would be analysed (what ``_add_ops`` decides, by the launch)."""
        if self.mode == "all":
            return True
        if self.mode == "window":
            return self.win_lo <= rts < self.win_hi
        if self.mode == "hta":
            rc = math.ceil(rts) if self.hta_compat and math.isfinite(rts) else rts
            return rc <= self.last_end if self.include_last else rc < self.last_start
        return False

    @property
    def gpu_key(self) -> tuple[object, ...]:
        """What decides the GPU op selection (the streaming pass freezes this)."""
        return (
            self.mode,
            self.win_lo,
            self.win_hi,
            self.last_start,
            self.last_end,
            self.include_last,
            self.need_launch,
            self.hta_compat,
        )


def dedupe_steps(nums: Sequence[int], starts: Sequence[float], durs: Sequence[float]) -> list[Step]:
    seen: dict[tuple[int, float], Step] = {}
    for num, ts, dur in zip(nums, starts, durs, strict=True):
        seen[(num, ts)] = (num, ts, dur)
    return sorted(seen.values(), key=lambda s: s[1])


def step_range(steps: Sequence[Step]) -> str:
    if not steps:
        return "no ProfilerStep"
    nums = [s[0] for s in steps]
    return f"steps {min(nums)}..{max(nums)}"


def select(steps: Sequence[Step], opts: AnalysisOptions, *, has_launches: bool, label: str) -> Selection:
    """HTA 0.5.0's selection: with two or more steps, GPU ops launched in the last step are dropped."""
    if opts.steps is not None:
        a, b = opts.steps
        chosen = tuple(s for s in steps if a <= s[0] <= b)
        if not chosen:
            raise StepWindowError(f"no ProfilerStep in {a}:{b} (trace has {step_range(steps)})", source=label)
        need = has_launches and not opts.steps_keep_unlaunched
        return Selection("window", chosen[0][1], max(s[1] + s[2] for s in chosen), steps_in=chosen, need_launch=need)
    if len({s[0] for s in steps}) < 2:
        return Selection("all", steps_in=tuple(steps))
    hta = opts.hta_compat
    incl = opts.include_last_step
    last_start: float
    last_end: float
    if hta:  # HTA compares whole µs: ceil(launch start) with ceil(last start) / floor(last end)
        last_start = math.ceil(max(s[1] for s in steps))
        last_end = math.floor(max(s[1] + s[2] for s in steps))
        steps_in = tuple(steps) if incl else tuple(s for s in steps if math.ceil(s[1]) < last_start)
    else:
        last_start = max(s[1] for s in steps)
        last_end = max(s[1] + s[2] for s in steps)
        steps_in = tuple(steps) if incl else tuple(s for s in steps if s[1] < last_start)
    if not has_launches:
        # no launch was recorded at all (activity-only trace): select GPU ops by their own start
        # instead of dropping every one of them as HTA would
        if hta:
            hi = (last_end if incl else last_start) + 1e-9
        else:
            hi = math.nextafter(last_end, _INF) if incl else last_start
        return Selection("window", steps_in[0][1], hi, last_start, last_end, incl, steps_in, not incl, hta_compat=hta)
    return Selection("hta", -_INF, _INF, last_start, last_end, incl, steps_in, not incl, hta_compat=hta)


class GpuAccumulator:
    """Per-rank GPU metrics from ops fed in start order (ties in file order).

    Until ``finish`` the state is on the integer ns clock (``NS_PER_US``): the ``*_ns`` fields, and ``kstats``,
    ``stream_state``, ``graphs`` and ``parts``. ``finish`` publishes them in µs, what the analyzers read:
    ``union_us``, ``span_us``, ``gpu_lo`` / ``gpu_hi``, ``type_total``, ``time_by_kind``, ``sync_us``, and the four
    containers converted in place. Closed intervals (``closed``, float columns) are kept relative to ``base_ns``
    (the first op's start, down to a whole µs), so that they stay exact doubles on an epoch clock."""

    FLUSH_INTERVALS = 4096

    def __init__(
        self,
        names: list[str],
        selection: Selection,
        th: dict[str, float],
        *,
        all_launch_calls: bool = False,
        clip_delays: bool = True,
        hta_compat: bool = False,
    ) -> None:
        self.names = names
        self.selection = selection
        self.hta_compat = hta_compat
        self.tiny_us = th["tiny_kernel_us"]
        self.delay_thr_ns = th["consecutive_kernel_delay_us"] * 1000.0
        n_types = len(classify.KERNEL_TYPES)
        self.type_cache: dict[int, int] = {}  # name id -> index into classify.KERNEL_TYPES
        self.kstats: dict[int, list[float]] = {}  # nid -> [count, sum, sumsq, min, max] (all GPU ops, like HTA)
        self.kernel_ids: set[int] = set()
        self.mem_dir: dict[str, list[float]] = {}
        self.dir_cache: dict[int, list[float]] = {}
        self.memset: list[float] = [0, 0, 0.0]
        self.time_by_kind_ns = [0.0, 0.0, 0.0]
        self.time_by_kind = [0.0, 0.0, 0.0]  # µs, set by ``finish``
        self.delays = DelayDistribution(LAUNCH_DELAY_CUTOFFS_US)
        self.all_launch_calls = all_launch_calls
        self.clip_delays = clip_delays
        self.n_negative_delays = 0
        self.sync_ns = 0.0
        self.sync_us = 0.0
        self.n_sync = 0
        self.raw_us = 0.0  # analysed kernels, memcpy and memset: their durations as written, before HTA's rounding
        self.base_ns: int | None = None  # origin of ``closed`` (set by ``add`` from the first op)
        self.n_duplicates = 0  # ops equal to the op before them on their stream (name, launch, start, duration)
        self.n_stream_folded = 0  # ops on streams beyond MAX_STREAMS (idle breakdown row OTHER_STREAM)
        self.launch_cpu_sum = 0.0
        self.launch_cpu_n = 0
        self.occ_w = self.occ_t = 0.0
        self.n_occ = self.tiny = self.n_kern_sel = self.n_sel = 0
        # union sweep: one open interval per kernel type, index n_types + 1 = all types (n_types = OTHER,
        # which counts in the busy union but, like HTA, in no kernel-type class)
        self.open_s = [0.0] * (n_types + 2)
        self.open_e = [-_INF] * (n_types + 2)
        self.closed = [intervals.Merged() for _ in range(n_types)]
        self.n_closed = 0
        self.type_total_ns = [0.0] * n_types
        self.type_total = [0.0] * n_types  # µs, set by ``finish``
        self.union_ns = 0.0
        self.union_us = 0.0
        self.span_us = 0.0  # gpu_hi - gpu_lo, exact (set by ``finish``)
        self.gpu_lo_ns: float = _NAN  # an int once an interval closed
        self.gpu_hi_ns: float = _NAN
        self.gpu_lo = _NAN  # µs, set by ``finish``
        self.gpu_hi = _NAN
        self.ops_lo = _INF  # every op's first start / last end, analysed or not (set by ``GpuFeed.finish``)
        self.ops_hi = -_INF
        self.parts: dict[int, float] = {}
        # stream -> [latest end, host_wait, kernel_wait, other, and the previous op's ts, dur, correlation, name id]
        self.stream_state: dict[int, list[float]] = {}
        self.finished = False
        self.timeline = TimeBins(GPU_SERIES)  # busy time over time, from the folded intervals
        # CUDA graph launches: correlation -> [ops, GPU time, signature of the op names, first op's name id]
        self.graphs: dict[int, list[float]] = {}
        self.graphs_untracked = 0  # graph launches beyond MAX_GRAPH_LAUNCHES
        self.graph_first_unseen = 0  # graph launches whose first op was not next to the second
        self.launch_gaps = LaunchGaps()  # launches no GPU row answered (set by ``GpuFeed.finish``)

    def add(
        self,
        ops: OpColumns,
        order: Sequence[int],
        join: LaunchJoin,
        *,
        stop_s: float = _INF,
        settle: float = _INF,
        by_op_start: bool = True,
    ) -> int:
        """Consume ops ``order[0], order[1], ...`` (start order) until one starts after ``stop_s`` or is not
        settled (its launch, or without a launch and ``by_op_start`` its own start, is after ``settle``).
        Returns how many were consumed; each is joined to its launch through ``join`` on the way.

        The per-op loop runs in C (``native.ACCEL``, a transliteration of ``_add_ops``) where that module is
        built; the two leave the same state to the bit (tests/unit/analysis/test_gpu_native.py)."""
        if self.base_ns is None and len(order):
            self.base_ns = ops.s[order[0]] // 1000 * 1000  # a whole µs: the timeline converts with one division
        accel = native.ACCEL
        r = NotImplemented if accel is None else accel.add_ops(self, ops, order, join, stop_s, settle, by_op_start)
        if r is NotImplemented:  # no C module, or it declined (an input outside its exact range) and changed nothing
            r = self._add_ops(ops, order, join, stop_s, settle, by_op_start)
        (
            taken,
            n_sel,
            n_kern,
            tiny,
            n_occ,
            occ_w,
            occ_t,
            cpu_sum,
            cpu_n,
            n_neg,
            n_sync,
            sync_ns,
            raw_us,
            n_dup,
            n_fold,
            n_closed,
            delays,
            launch_s,
            launch_e,
        ) = r
        self.n_sel += n_sel
        self.n_kern_sel += n_kern
        self.tiny += tiny
        self.n_occ += n_occ
        self.occ_w += occ_w
        self.occ_t += occ_t
        self.launch_cpu_sum += cpu_sum
        self.launch_cpu_n += cpu_n
        self.n_negative_delays += n_neg
        self.n_sync += n_sync
        self.sync_ns += sync_ns
        self.raw_us += raw_us
        self.n_duplicates += n_dup
        self.n_stream_folded += n_fold
        if delays:
            self.delays.extend(delays)
        if launch_s:
            self._add_launches(launch_s, launch_e)
        self.n_closed = n_closed
        if n_closed >= self.FLUSH_INTERVALS:
            self._flush()
        return taken  # type: ignore[no-any-return]

    def _add_ops(  # noqa: PLR0917 - the C module's positional signature
        self,
        ops: OpColumns,
        order: Sequence[int],
        join: LaunchJoin,
        stop_s: float,
        settle: float,
        by_op_start: bool,
    ) -> tuple[Any, ...]:
        """The per-op loop of ``add``: updates the per-name, per-type and per-stream state in place and returns
        the batch's counters and sums for ``add`` to fold in (``csrc/`` returns the same tuple)."""
        sel = self.selection
        mode = sel.mode
        in_window, hta = mode == "window", mode == "hta"
        select_none = mode == "none"
        win_lo, win_hi, last_start, last_end, incl = (
            sel.win_lo,
            sel.win_hi,
            sel.last_start,
            sel.last_end,
            sel.include_last,
        )
        s_col, ts_col, dur_col, name_col, kind_col = ops.s, ops.ts, ops.dur, ops.name, ops.kind
        stream_col, corr_col, bytes_col, occ_col = ops.stream, ops.corr, ops.nbytes, ops.occ
        launch_get, used, used_add = join.launches.get, join.used, join.used.add
        no_launch = complex(_NAN, _NAN)
        ceil, floor = math.ceil, math.floor
        whole_us = self.hta_compat  # HTA's time model: whole µs, start up and end down (else ns as written)
        base = self.base_ns if self.base_ns is not None else 0
        names = self.names
        type_cache, kstats, kernel_ids = self.type_cache, self.kstats, self.kernel_ids
        time_by_kind, memset, dir_cache = self.time_by_kind_ns, self.memset, self.dir_cache
        kernel_types_all = classify.KERNEL_TYPES
        tiny_us, delay_thr = self.tiny_us, self.delay_thr_ns
        open_s, open_e, closed = self.open_s, self.open_e, self.closed
        n_types = len(kernel_types_all)
        all_t = n_types + 1
        all_s, all_e = open_s[all_t], open_e[all_t]
        all_calls, clip = self.all_launch_calls, self.clip_delays
        n_neg = n_sync = n_dup = n_fold = 0
        sync_ns = raw_us = 0.0
        need_launch = sel.need_launch
        union_ns, gpu_lo, gpu_hi = self.union_ns, self.gpu_lo_ns, self.gpu_hi_ns
        type_total = self.type_total_ns
        stream_state = self.stream_state
        state_get = stream_state.get
        delays = array("d")
        add_delay = delays.append
        launch_s, launch_e = array("d"), array("d")
        ff_c, ff_n, ff_d = -1, -1, 0.0
        add_launch, add_launch_end = launch_s.append, launch_e.append
        n_closed = self.n_closed
        cpu_sum = 0.0
        cpu_n = n_sel = n_kern = tiny = n_occ = 0
        occ_w = occ_t = 0.0
        taken = 0
        for i in order:
            s = s_col[i]
            if s > stop_s:
                break
            ts = ts_col[i]
            corr = corr_col[i]
            launch = launch_get(corr, no_launch) if corr >= 0 else no_launch
            rts = launch.real
            has_launch = rts == rts  # noqa: PLR0124 - NaN test in the per-op loop
            if has_launch:
                if rts > settle:
                    break
            elif (ts if by_op_start else -_INF) > settle:
                break
            elif corr >= 0:
                join.missing(corr)  # leaves without a launch: a launch arriving later must be noticed
            taken += 1
            first = has_launch and corr not in used
            if first:
                used_add(corr)
            if select_none:
                continue
            if in_window:
                if need_launch and not has_launch:
                    continue  # like HTA: an op no launch can be correlated with is not in any step
                ref = rts if has_launch else ts
                if ref < win_lo or ref >= win_hi:  # half-open: a launch at the end belongs to the next step
                    continue
            elif hta:
                if not has_launch:
                    continue  # HTA keeps only GPU ops whose launch it can correlate
                rc = ceil(rts) if whole_us else rts
                if incl:
                    if rc > last_end:
                        continue
                elif rc >= last_start:
                    continue
            dur = dur_col[i]
            if whole_us:
                e = floor(ts + dur) * 1000
            else:  # s + ns_of(dur), inlined
                fl = floor(dur)
                e = s + fl * 1000 + round((dur - fl) * 1000.0)
            nid = name_col[i]
            kt = type_cache.get(nid)
            if kt is None:
                kt = classify.type_index(names[nid])
                type_cache[nid] = kt
            kind = kind_col[i]
            rd_us = e - s
            if rd_us < 0:  # noqa: PLR1730 - hot loop; within one whole µs: no time left (HTA's own value: -1 µs)
                rd_us = 0
            if kind == OP_SYNC:
                n_sync += 1
                sync_ns += rd_us
            else:
                n_sel += 1
                raw_us += dur
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
                    n_kern += 1
                    kernel_ids.add(nid)
                    if dur < tiny_us:
                        tiny += 1
                    occ = occ_col[i]
                    if occ >= 0:
                        n_occ += 1
                        occ_w += occ * dur
                        occ_t += dur
                elif kind == OP_MEMCPY:
                    md = dir_cache.get(nid)
                    if md is None:
                        md = self.mem_dir.setdefault(classify.memcpy_direction(names[nid]), [0, 0, 0.0])
                        dir_cache[nid] = md
                    md[0] += 1
                    md[1] += bytes_col[i]
                    md[2] += dur
                else:
                    memset[0] += 1
                    memset[1] += bytes_col[i]
                    memset[2] += dur
                if first:
                    rdur = launch.imag  # >= 0: HTA's launch-call set; < 0: another launch; NaN: a sync call
                    if rdur >= 0 or (all_calls and rdur < 0):
                        if rdur < 0:
                            rdur = -rdur - 1.0
                        # HTA's rounding: ceil(op start) - floor(launch end); exact: the ns as written
                        launch_end = floor(rts + rdur) * 1000 if whole_us else ns_of(rts) + ns_of(rdur)
                        delay = float(s - launch_end) / 1000.0
                        if delay < 0:
                            n_neg += 1
                            if clip:
                                delay = 0.0  # HTA clips negative launch delays at zero
                        add_delay(delay)
                        cpu_sum += rdur
                        cpu_n += 1
                        add_launch(rts)
                        add_launch_end(rts + rdur)
                    ff_c, ff_n, ff_d = corr, nid, rd_us  # a CUDA graph's first op, should more follow
                elif has_launch:  # one launch, several GPU ops: a CUDA graph
                    self._graph_op(corr, nid, rd_us, (ff_n, ff_d) if ff_c == corr else None)
            # ---- sweep: unions per kernel type and overall ----
            if e > s:
                if kt == n_types:
                    pass  # OTHER (e.g. Stream Sync): busy, but in no kernel-type class, like HTA
                elif s <= open_e[kt]:
                    if e > open_e[kt]:  # noqa: PLR1730 - hot loop
                        open_e[kt] = e
                else:
                    if open_e[kt] > open_s[kt]:
                        m = closed[kt]
                        m.starts.append(open_s[kt] - base)
                        m.ends.append(open_e[kt] - base)
                        type_total[kt] += open_e[kt] - open_s[kt]
                        n_closed += 1
                    open_s[kt] = s
                    open_e[kt] = e
                if s <= all_e:
                    if e > all_e:  # noqa: PLR1730 - hot loop
                        all_e = e
                else:
                    if all_e > all_s:
                        union_ns += all_e - all_s
                        if gpu_lo != gpu_lo:  # noqa: PLR0124 - first interval
                            gpu_lo = all_s
                        gpu_hi = all_e
                    all_s = s
                    all_e = e
            if kind == OP_SYNC:
                continue  # HTA's idle breakdown looks at kernels, memcpy and memset only
            # ---- HTA idle breakdown per stream ----
            stream = stream_col[i]
            ss = state_get(stream)
            if ss is None:
                if len(stream_state) >= MAX_STREAMS:
                    n_fold += 1
                    stream = OTHER_STREAM
                    ss = state_get(stream)
                if ss is None:
                    stream_state[stream] = [e, 0.0, 0.0, 0.0, ts, dur, corr, nid]
                    continue
            prev_end = ss[0]
            gap = s - prev_end
            if gap > 0:
                if has_launch and (ceil(rts) * 1000 if whole_us else ns_of(rts)) > prev_end:  # launched after it ended
                    ss[1] += gap
                elif gap < delay_thr:
                    ss[2] += gap
                else:
                    ss[3] += gap
                ss[0] = e
            else:  # overlaps the ops before it on its stream (PDL, a copy): no idle time (HTA: a negative gap)
                if e > prev_end:
                    ss[0] = e
                if ts == ss[4] and dur == ss[5] and corr == ss[6] and nid == ss[7]:
                    n_dup += 1  # the same op (name, launch, start, duration) twice on one stream: a copied event
            ss[4] = ts
            ss[5] = dur
            ss[6] = corr
            ss[7] = nid
        open_s[all_t], open_e[all_t] = all_s, all_e
        self.union_ns, self.gpu_lo_ns, self.gpu_hi_ns = union_ns, gpu_lo, gpu_hi
        return (
            taken,
            n_sel,
            n_kern,
            tiny,
            n_occ,
            occ_w,
            occ_t,
            cpu_sum,
            cpu_n,
            n_neg,
            n_sync,
            sync_ns,
            raw_us,
            n_dup,
            n_fold,
            n_closed,
            delays,
            launch_s,
            launch_e,
        )

    def _flush(self) -> None:
        """Fold the closed intervals that lie wholly in the past into the type-overlap partition.

        Every future interval starts at or after the earliest open interval's start (ops arrive in start
        order), so time before that horizon is final.
        """
        n_types = len(self.closed)
        open_starts = [self.open_s[t] for t in range(n_types) if self.open_e[t] > -_INF]
        if not open_starts:
            return
        horizon = min(open_starts) - (self.base_ns or 0)  # ``closed`` is relative to base_ns
        prefix: list[intervals.Merged] = []
        kept = 0
        for t, m in enumerate(self.closed):
            cut = bisect.bisect_right(m.ends, horizon)  # ends are ascending in a merged set
            pre = intervals.Merged()
            pre.starts = m.starts[:cut]
            pre.ends = m.ends[:cut]
            rest = intervals.Merged()
            rest.starts = m.starts[cut:]
            rest.ends = m.ends[cut:]
            if len(rest) and rest.starts[0] < horizon:  # straddles the horizon: split it
                pre.starts.append(rest.starts[0])
                pre.ends.append(horizon)
                rest.starts[0] = horizon
            prefix.append(pre)
            self.closed[t] = rest
            kept += len(rest)
        self._add_timeline(prefix)
        self._add_parts(intervals.partition_by_set(prefix))
        self.n_closed = kept

    MAX_GRAPH_LAUNCHES = 100_000

    def _graph_op(self, corr: int, nid: int, dur: float, first: tuple[int, float] | None) -> None:
        g = self.graphs.get(corr)
        if g is None:
            if len(self.graphs) >= self.MAX_GRAPH_LAUNCHES:
                self.graphs_untracked += 1
                return
            if first is None:
                self.graph_first_unseen += 1
                g = self.graphs[corr] = [1.0, 0.0, 0.0, -1.0]
            else:
                g = self.graphs[corr] = [1.0, first[1], float(first[0] % 1000003), float(first[0])]
        g[0] += 1
        g[1] += dur
        g[2] = float((int(g[2]) * 1000003 + nid) % 2305843009213693951)

    def _add_launches(self, starts: array[float], ends: array[float]) -> None:
        tl = self.timeline
        tl.add_points(GPU_SERIES.index("launch_calls"), starts)
        tl.add_spans(GPU_SERIES.index("launch_time"), starts, ends)

    def _add_timeline(self, sets: Sequence[intervals.Merged]) -> None:
        """Busy time per kernel type and overall (the union of the types) into ``timeline`` (µs, as the host-side
        series: ``sets`` are ns relative to ``base_ns``)."""
        tl = self.timeline
        base_us = float((self.base_ns or 0) // 1000)  # base_ns is a whole µs (``add``), exact as a double

        def us(col: array[float]) -> array[float]:
            c_us = getattr(native.ACCEL, "us_column", None)
            out = NotImplemented if c_us is None else c_us(col, base_us)
            return _us_column(col, base_us) if out is NotImplemented else out

        for t, m in enumerate(sets):
            if len(m):
                tl.add_spans(1 + t, us(m.starts), us(m.ends))
        union = intervals.union(sets)
        if len(union):
            tl.add_spans(0, us(union.starts), us(union.ends))

    def _add_parts(self, parts: dict[int, float]) -> None:
        for mask, t_ns in parts.items():
            self.parts[mask] = self.parts.get(mask, 0.0) + t_ns

    def finish(self) -> None:
        """Close the open intervals and publish the totals in µs (``_publish``); final afterwards."""
        if self.finished:
            return
        self.finished = True
        n_types = len(self.closed)
        base = self.base_ns or 0
        for t in range(n_types):
            if self.open_e[t] > self.open_s[t]:
                self.closed[t].starts.append(self.open_s[t] - base)
                self.closed[t].ends.append(self.open_e[t] - base)
                self.type_total_ns[t] += self.open_e[t] - self.open_s[t]
            self.open_e[t] = -_INF
        all_s, all_e = self.open_s[n_types + 1], self.open_e[n_types + 1]
        if all_e > all_s:
            self.union_ns += all_e - all_s
            if self.gpu_lo_ns != self.gpu_lo_ns:
                self.gpu_lo_ns = all_s
            self.gpu_hi_ns = all_e
        self._add_timeline(self.closed)
        self._add_parts(intervals.partition_by_set(self.closed))
        self.closed = [intervals.Merged() for _ in range(n_types)]
        self._publish()

    def _publish(self) -> None:
        """The ns totals as µs, each converted once and correctly rounded (whole µs stay exact: HTA's model gives
        the numbers it always gave); per-kernel sums stay exact integers until here."""
        self.union_us = us_of(self.union_ns)
        self.type_total = [us_of(t) for t in self.type_total_ns]
        self.time_by_kind = [us_of(t) for t in self.time_by_kind_ns]
        self.sync_us = us_of(self.sync_ns)
        self.parts = {mask: us_of(t) for mask, t in self.parts.items()}
        if self.gpu_lo_ns == self.gpu_lo_ns:
            self.gpu_lo, self.gpu_hi = us_of(self.gpu_lo_ns), us_of(self.gpu_hi_ns)
            self.span_us = us_of(int(self.gpu_hi_ns) - int(self.gpu_lo_ns))
        for st in self.kstats.values():
            st[1], st[2], st[3], st[4] = int(st[1]) / 1000, int(st[2]) / 1_000_000, st[3] / 1000, st[4] / 1000
        for ss in self.stream_state.values():
            ss[0], ss[1], ss[2], ss[3] = us_of(ss[0]), us_of(ss[1]), us_of(ss[2]), us_of(ss[3])
        for g in self.graphs.values():
            g[1] = us_of(g[1])

    @property
    def has_union(self) -> bool:
        return self.gpu_lo == self.gpu_lo

    def overlap_us(self, a: int, b: int) -> float:
        """Time during which kernel types ``a`` and ``b`` both run."""
        both = (1 << a) | (1 << b)
        return sum(t for mask, t in self.parts.items() if mask & both == both)


class StepFrontier:
    """What the ProfilerSteps seen so far already decide, assuming later steps start no earlier.

    Kineto writes steps in start order, all before the GPU section; a concatenated or regenerated trace
    may interleave them with GPU ops. Either way an op is *settled* once no later step can change
    whether it is selected, and the streaming pass only lets settled ops leave its buffer.
    """

    def __init__(self, opts: AnalysisOptions) -> None:
        self.window = opts.steps
        self.include_last = opts.include_last_step
        self.hta_compat = opts.hta_compat
        self.nums: set[int] = set()
        self.max_start = -_INF
        self.max_end = -_INF
        self.win_lo = _NAN
        self.win_hi = -_INF
        self.past_window = False
        self.out_of_order = False

    def add(self, num: int, ts: float, dur: float) -> None:
        if ts < self.max_start:
            self.out_of_order = True
        self.nums.add(num)
        self.max_start = max(self.max_start, ts)
        self.max_end = max(self.max_end, ts + dur)
        if self.window is not None:
            a, b = self.window
            if a <= num <= b:
                if self.past_window:
                    self.out_of_order = True  # a step of the window after a later-numbered one
                if self.win_lo != self.win_lo:
                    self.win_lo = ts
                self.win_hi = max(self.win_hi, ts + dur)
            elif num > b:
                self.past_window = True

    def horizon(self, has_launches: bool) -> tuple[float, bool]:
        """(H, by_op_start): an op is settled when its launch start (or, with ``by_op_start`` and no
        launch, its own start) is <= H; an op without a launch is settled (dropped) otherwise.

        No later step starting at or after the latest one seen changes a settled op's selection.
        """
        if self.window is not None:
            if self.past_window:
                return _INF, True
            if self.win_lo != self.win_lo:
                return -_INF, True
            return math.nextafter(self.win_hi, -_INF), True  # ref < win_hi
        if len(self.nums) < 2 or not has_launches:
            return -_INF, True  # a second step or a first launch would still change the rule
        if not self.hta_compat:
            if self.include_last:
                return self.max_end, False  # rts <= max_end
            return math.nextafter(self.max_start, -_INF), False  # rts < max_start
        if self.include_last:
            return float(math.floor(self.max_end)), False  # ceil(rts) <= floor(max_end)
        return float(math.ceil(self.max_start) - 1), False  # ceil(rts) < ceil(max_start)


class OpColumns:
    """GPU ops (kernels, memcpy, memset) in file order, a few dozen bytes each."""

    __slots__ = ("corr", "dur", "kind", "name", "nbytes", "occ", "s", "stream", "ts")

    def __init__(self) -> None:
        self.s: array[int] = array("q")  # start in ns (gpu.start_ns: exact, or HTA's ceil(ts) µs): the sort key
        self.ts: array[float] = array("d")
        self.dur: array[float] = array("d")
        self.name: array[int] = array("i")
        self.kind: array[int] = array("b")
        self.stream: array[int] = array("i")
        self.corr: array[int] = array("q")
        self.nbytes: array[int] = array("q")
        self.occ: array[float] = array("f")

    def __len__(self) -> int:
        return len(self.s)

    def drop(self, taken: Sequence[int]) -> None:
        """Remove the rows ``taken`` (a prefix of the file order in the common case)."""
        k = len(taken)
        if k and max(taken) == k - 1:  # distinct indices: exactly the first k rows
            for n in self.__slots__:
                del getattr(self, n)[:k]
            return
        gone = bytearray(len(self))
        for i in taken:
            gone[i] = 1
        keep = [i for i in range(len(self)) if not gone[i]]
        for n in self.__slots__:
            col = getattr(self, n)
            setattr(self, n, array(col.typecode, [col[i] for i in keep]))

    def extend(self, other: OpColumns, shift: float, *, hta_compat: bool = False) -> None:
        """Append another file's ops, their clock moved by ``shift`` µs (starts in the time model given)."""
        for n in self.__slots__:
            src = getattr(other, n)
            if shift and n == "ts":
                src = array("d", (v + shift for v in src))
            elif shift and n == "s":
                src = array("q", (start_ns(v + shift, hta_compat) for v in other.ts))
            getattr(self, n).extend(src)


@dataclass
class LaunchGaps:
    """Launch calls whose GPU row never came (``LaunchJoin.gaps``): ``kernels``, kernel (graph, MTIA function)
    launches, each of which enqueues GPU work, so its row is missing; ``at_stop`` of them launched after the last
    launch whose op was recorded (still queued or running when the profiler stopped: expected at the end of every
    window); ``maybe_empty``: copies, memsets and other calls that may enqueue nothing (CUDA returns without any GPU
    work for 0 bytes, and CUPTI writes no row), not counted as missing. Sync calls are no launches."""

    kernels: int = 0
    at_stop: int = 0
    maybe_empty: int = 0

    def merge(self, other: LaunchGaps) -> None:
        self.kernels += other.kernels
        self.at_stop += other.at_stop
        self.maybe_empty += other.maybe_empty


class LaunchJoin:
    """Launches by correlation id, and which ids already gave their launch delay (a graph feeds many ops).

    Bounded: above twice ``capacity`` it keeps the newest ``capacity`` and remembers the dropped ids for
    two prunes, so an op naming one of them is noticed (``StreamingAbort``) rather than left unjoined.
    A pruned launch that no op used has no GPU row (an op after it would have aborted the streaming pass): counted
    in ``pruned_gaps`` on the way (``gaps`` adds the launches still held at the end).
    """

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        # start + 1j * duration: one 32-byte object per launch, a third of a (start, duration) tuple's
        self.launches: dict[int, complex] = {}
        self.used: set[int] = set()
        self.pruned: set[int] = set()
        self.pruned_before: set[int] = set()
        self.unjoined: set[int] = set()  # ids of ops analysed without a launch
        self.maybe_empty: set[int] = set()  # ids of held launch calls that may enqueue nothing (parse._KERNEL_LAUNCH)
        self.pruned_gaps = LaunchGaps()
        self.count = 0
        self.first_ts: float | None = None
        self.last_end = -_INF

    def add(
        self, corrs: array[int], starts: array[float], durs: array[float], maybe_empty: array[int] | None = None
    ) -> None:
        """A batch's launches; ``maybe_empty[k]`` is 1 for a call that may enqueue nothing (a copy, a memset...)."""
        if not corrs:
            return
        accel = native.ACCEL
        late = NotImplemented if accel is None else accel.join_launches(self, corrs, starts, durs)
        if late is NotImplemented:  # no C module, or it declined: the same steps in Python
            self._add(corrs, starts, durs)
        elif late is not None:
            raise StreamingAbort(f"the launch of correlation {late} came after its GPU op was analysed")
        if maybe_empty is not None and any(maybe_empty):
            self.maybe_empty.update(itertools.compress(corrs, maybe_empty))
        self._prune()

    def _unmatched(
        self, ids: set[int], out: LaunchGaps, at_stop_after: float, selected: Callable[[float], bool] | None = None
    ) -> None:
        """Count the launches ``ids`` (held, no op used them) into ``out``; sync calls (NaN code) are no launches, and
        with ``selected`` only launches whose op would have been analysed count."""
        launches, maybe_empty = self.launches, self.maybe_empty
        for c in ids:
            z = launches[c]
            if z.imag != z.imag:
                continue
            if selected is not None and not selected(z.real):
                continue
            if c in maybe_empty:
                out.maybe_empty += 1
            elif z.real > at_stop_after:
                out.at_stop += 1
            else:
                out.kernels += 1

    def gaps(self, selection: Selection | None = None) -> LaunchGaps:
        """The launches no op used, over the whole file (after the last op was handed over); with ``selection``,
        of those held only the ones whose op it would have analysed (pruned ones all count)."""
        out = LaunchGaps(self.pruned_gaps.kernels, self.pruned_gaps.at_stop, self.pruned_gaps.maybe_empty)
        unused = self.launches.keys() - self.used
        if unused:
            launches = self.launches
            # the latest launch whose op was recorded: kernel launches after it were still queued or running when
            # the profiler stopped (only computed where a kernel launch lacks its row)
            kernels = [c for c in unused if c not in self.maybe_empty and launches[c].imag == launches[c].imag]
            last_used = max((launches[c].real for c in self.used if c in launches), default=-_INF) if kernels else _INF
            self._unmatched(unused, out, last_used, None if selection is None else selection.launch_selected)
        return out

    def _add(self, corrs: array[int], starts: array[float], durs: array[float]) -> None:
        first = min(starts)  # the earliest launch, whatever order the file writes them in
        if self.first_ts is None or first < self.first_ts:
            self.first_ts = first
        self.last_end = max(self.last_end, *map(float.__add__, starts, durs))
        self.count += len(corrs)
        unjoined = self.unjoined
        if unjoined and not unjoined.isdisjoint(corrs):
            late = next(c for c in corrs if c in unjoined)
            raise StreamingAbort(f"the launch of correlation {late} came after its GPU op was analysed")
        self.launches.update(zip(corrs, map(complex, starts, durs), strict=True))

    def _prune(self) -> None:
        if self.capacity is not None and len(self.launches) > 2 * self.capacity:
            # dicts keep insertion order: the oldest launches come first
            cut = len(self.launches) - self.capacity
            self.pruned_before = self.pruned
            self.pruned = set(itertools.islice(self.launches, cut))
            unused = self.pruned - self.used
            if unused:  # older than ``capacity`` newer launches: never at the stop
                self._unmatched(unused, self.pruned_gaps, _INF)
            self.launches = dict(itertools.islice(self.launches.items(), cut, None))
            self.used &= self.launches.keys()
            if self.maybe_empty:
                self.maybe_empty &= self.launches.keys()

    def missing(self, corr: int) -> None:
        if corr in self.pruned or corr in self.pruned_before:
            raise StreamingAbort(f"GPU op with correlation {corr} came long after its launch")
        if self.capacity is not None:
            if len(self.unjoined) >= 4 * self.capacity:
                self.unjoined.clear()  # bounded: a launch this far behind its op goes unnoticed
            self.unjoined.add(corr)

    def merge(self, other: LaunchJoin) -> None:
        self.launches.update(other.launches)
        self.maybe_empty |= other.maybe_empty
        self.pruned_gaps.merge(other.pruned_gaps)
        self.count += other.count
        self.last_end = max(self.last_end, other.last_end)


class GpuFeed:
    """Collects GPU ops and launches while a file is parsed and hands ops to the accumulator in start order.

    Bounded (streaming): once ``window + chunk`` ops are pending, the oldest are sorted by start and
    handed over, except the newest ``window`` in file order (a later op may still start before them) and
    any op a later ProfilerStep could still select differently. Unbounded (buffered): everything waits
    for ``finish``, as for files merged into one rank.
    """

    def __init__(
        self,
        names: list[str],
        th: dict[str, float],
        frontier: StepFrontier,
        *,
        bounded: bool,
        window: int | None = None,
        chunk: int | None = None,
        launch_capacity: int | None = None,
        all_launch_calls: bool = False,
        clip_delays: bool = True,
        hta_compat: bool = False,
    ) -> None:
        self.ops = OpColumns()
        self.all_launch_calls = all_launch_calls
        self.clip_delays = clip_delays
        self.hta_compat = hta_compat  # the time model of ``ops.s`` and of the accumulator (gpu.start_ns)
        self.th = th
        self.bounded = bounded
        self.window = REORDER_WINDOW_OPS if window is None else window
        self.chunk = DRAIN_BATCH_OPS if chunk is None else chunk
        cap = LAUNCH_CAPACITY if launch_capacity is None else launch_capacity
        self.join = LaunchJoin(cap if bounded else None)
        self.frontier = frontier
        self.acc = GpuAccumulator(
            names,
            Selection("none"),
            th,
            all_launch_calls=all_launch_calls,
            clip_delays=clip_delays,
            hta_compat=hta_compat,
        )
        self.last_s = -(1 << 63)  # start of the last op handed over: a later-arriving op must not precede it
        self.frozen = False  # ops no longer wait to be settled: the selection below is assumed final
        self.frozen_selection: Selection | None = None
        self.handed = 0
        self.checked = 0  # pending ops already checked against ``last_s``
        self.next_drain = self.window + self.chunk
        # first start and last end of every op handed over, selected or not: the file's GPU time range
        # (``runs.file_span``), which the accumulator's union (only the analysed steps) does not give
        self.ops_lo = _INF
        self.ops_hi = -_INF

    def step(self, num: int, ts: float, dur: float) -> None:
        self.frontier.add(num, ts, dur)
        if self.handed and self.frontier.out_of_order and not self.frozen:
            raise StreamingAbort("ProfilerSteps are out of start order after GPU ops were analysed")
        self.next_drain = self.window + self.chunk  # the new step may settle pending ops

    def after_batch(self, selection_now: Callable[[int], Selection]) -> None:
        """Called once per parsed batch (its launches already added, its ops appended)."""
        self._check_order()
        if self.bounded and len(self.ops) > self.next_drain:
            self._drain(selection_now, final=False)

    def _check_order(self) -> None:
        new = self.ops.s[self.checked :]
        if self.handed and new and min(new) < self.last_s:
            raise StreamingAbort(f"GPU ops are out of start order beyond {self.window} ops")
        self.checked = len(self.ops)

    def _drain(self, selection_now: Callable[[int], Selection], *, final: bool) -> None:
        ops = self.ops
        n = len(ops)
        stop_s: float
        if final:
            candidates, stop_s = n, _INF
        else:
            candidates = n - self.window
            stop_s = min(ops.s[candidates:]) if candidates < n else _INF  # an int: ns starts are beyond 2**53
            if not self.frozen and n > 4 * (self.window + self.chunk):
                # ops are not settling (no steps yet, or steps far behind): assume the steps seen are
                # all there is; ``finish`` checks that assumption and aborts if it was wrong
                self.frozen = True
        if candidates <= 0:
            return
        if self.frozen:
            if self.frozen_selection is None:
                self.frozen_selection = selection_now(self.join.count)
            self.acc.selection = self.frozen_selection
        else:
            self.acc.selection = selection_now(self.join.count)  # settled ops are selected alike under any later one
        settle, by_op_start = (_INF, True) if final or self.frozen else self.frontier.horizon(self.join.count > 0)
        s_col = ops.s
        prefix = s_col[:candidates]
        if all(map(operator.le, prefix, itertools.islice(prefix, 1, None))):  # in start order already (in C)
            order: Sequence[int] = range(candidates)
        else:
            order = sorted(range(candidates), key=s_col.__getitem__)  # stable: ties stay in file order
        taken = self.acc.add(ops, order, self.join, stop_s=stop_s, settle=settle, by_op_start=by_op_start)
        if taken:
            handed = order[:taken]
            ts_col, dur_col = ops.ts, ops.dur
            if isinstance(handed, range):
                lo, hi = min(ts_col[:taken]), max(map(operator.add, ts_col[:taken], dur_col[:taken]))
            else:
                lo, hi = min(ts_col[i] for i in handed), max(ts_col[i] + dur_col[i] for i in handed)
            self.ops_lo, self.ops_hi = min(self.ops_lo, lo), max(self.ops_hi, hi)
            self.last_s = s_col[order[taken - 1]]
            self.handed += taken
            ops.drop(order[:taken] if isinstance(order, list) else range(taken))
            self.checked = len(ops)
        if not final and taken < candidates:
            self.next_drain = n + self.chunk  # blocked: wait for a step or more ops
        else:
            self.next_drain = self.window + self.chunk

    def finish(self, final: Selection) -> GpuAccumulator:
        """Hand over everything under the final selection; abort when an earlier hand-over assumed another."""
        if self.handed:
            if self.frozen_selection is not None and self.frozen_selection.gpu_key != final.gpu_key:
                raise StreamingAbort("a ProfilerStep or launch after the first GPU ops changed which ops are analysed")
            if self.frontier.out_of_order:
                raise StreamingAbort("ProfilerSteps are out of start order after GPU ops were analysed")
        self._check_order()
        if self.frozen_selection is not None:
            self.frozen_selection = final  # equal to it when anything was handed over (checked above)
        self._drain(lambda _n: final, final=True)
        self.acc.finish()
        self.acc.ops_lo, self.acc.ops_hi = self.ops_lo, self.ops_hi
        self.acc.launch_gaps = self.join.gaps(final)
        return self.acc

    def release_join(self) -> None:
        """After ``finish``: drop the launches the join still holds (a 4 GB trace's ~270,000 pending ones are
        ~20 MB), which the accumulator no longer reads, before the file's memory attribution runs."""
        self.join = LaunchJoin(None)

    def empty(self) -> GpuFeed:
        """A new unbounded feed with the same names, thresholds and step options."""
        return GpuFeed(
            self.acc.names,
            self.th,
            self.frontier,
            bounded=False,
            all_launch_calls=self.all_launch_calls,
            clip_delays=self.clip_delays,
            hta_compat=self.hta_compat,
        )

    def merge(self, other: GpuFeed, shift: float) -> None:
        """Add another (unbounded, unfinished) file's pending ops and launches, its clock moved by ``shift``."""
        self.ops.extend(other.ops, shift, hta_compat=self.hta_compat)
        if shift:
            other.join.launches = {c: z + shift for c, z in other.join.launches.items()}
        self.join.merge(other.join)
