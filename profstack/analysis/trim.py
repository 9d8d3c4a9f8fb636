"""The trimmed timeline: a time window of a trace, chosen by steps, that Perfetto and HTA both open.

What is kept
    The window is a union of step ranges (``choose_window``): by default (``"median"``) the median-length
    ProfilerStep with its neighbours, plus the slowest step; ``"slowest"`` the slowest step with its
    neighbours; ``(a, b)`` ProfilerStep#a..#b; ``"all"`` (or a trace without steps) the whole trace.
    Inside the window every event kind on every thread and stream is kept (CPU ops, annotations, runtime
    calls, kernels, memcpy/memset, flows, instants) together with what links to it from outside: the
    launch (runtime call) and ``ac2g`` flow of a GPU op in the window even when the launch started
    before the window, and the GPU ops launched in the window even when they ran after it.

The cap (``max_events``)
    Events are ranked by kind (``TIERS``): GPU rows (GPU ops, their launches and flows, ProfilerSteps)
    first, then user annotations, other runtime calls, CPU ops (and other CPU-side events), Python
    functions last. A cap fills the tiers in that order; the tier that does not fit whole keeps its
    earliest part of the window (time bins, exact to one event), lower tiers are dropped. What was
    dropped is counted in the result (``TrimReport``) and in the file's top-level ``"profstack"`` key.

Overlapping events on one track
    Perfetto drops complete (``X``) events that overlap another on the same track without nesting
    properly (docs/platform-facts.md B). Each track's events are re-ordered by start in a bounded buffer
    and laid out on lanes: an event that would partially overlap one on its track moves to a sibling
    track, a tid no event of the trace uses (the pid's largest integer tid + 1, + 2, ...; string tids:
    ``"<tid> lane n"``), named ``"<thread> (overlap k)"`` by a ``thread_name`` metadata event. Only
    ``tid`` changes; ``args.stream`` stays, so analysis tools still see the stream. A thread's Python
    functions (``python_function``) go to a sibling track ``"<thread> (python)"`` the same way: Kineto
    writes them apart from the thread's ops and they do not nest with them.

Rank metadata
    ``distributedInfo`` is written first, before ``traceEvents``, as ``{"rank": N, ...}`` with a space
    after the colon: HTA 0.5.0 takes a file's rank from the first line matching ``"rank":\\s+(\\d+)``
    (``hta/common/trace_file.py``). Processes are named ``rank N · <name>`` (``process_name``) so Perfetto
    shows the rank.

Memory stays bounded for GB traces: three streaming passes (steps and metadata; counts per tier and the
correlation ids the window needs; writing), a per-track reorder buffer, and sets sized by the window.
"""

from __future__ import annotations

import bisect
import gzip
import heapq
import json
import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import msgspec

from profstack.analysis.errors import AnalysisOptionsError, StepWindowError, TraceError
from profstack.analysis.jsonstream import EventStream, raw_events
from profstack.analysis.options import GIB
from profstack.analysis.parse import STEP_PREFIX, _LongStrings, enqueues_gpu_work
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource, rank_from_name

#: Timeline window modes (``"A:B"`` step ranges as well); the CLI and the pipeline config take these.
WINDOW_MODES = ("median", "slowest", "all")
DEFAULT_WINDOW = "median"

#: Kinds in the order a cap keeps them.
TIERS = ("gpu", "annotation", "runtime", "cpu", "python")
T_GPU, T_ANNOT, T_RUNTIME, T_CPU, T_PYTHON = range(5)

_GPU_CATS = frozenset(
    {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "gpu_user_annotation", "cuda_sync"}
)
_GPU_OP_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver"})
_LAUNCH_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu", "async"})
_STEP_CATS_EXCLUDED = frozenset({"gpu_user_annotation"})  # the GPU projection of a step is not a step

_BINS = 4096  # time bins of the window for the cap's cut
_REORDER = 4096  # X events held back per track to lay them out in start order
_MAX_LANES = 16  # sibling tracks per track; beyond, an overlap is left (and counted)
#: Kineto writes a thread's CPU ops, its runtime calls and its Python functions in separate sections of the
#: file, each in start order: each group is laid out on its own lanes (sibling tids do not collide).
_GROUPS = 4  # gpu, runtime, cpu (ops, annotations, other), python
_PYTHON_GROUP = 3  # python_function events: on a sibling track of their thread, even without overlaps
_MAX_META = 200_000  # metadata events kept (hostile input bound)
_MAX_CORR = 4_000_000  # correlation ids remembered for the window's launches (bounded)
_KEEP_META = ("schemaVersion", "deviceProperties", "baseTimeNanoseconds", "traceName", "displayTimeUnit")


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None
    name: str | None = None  # metadata events (process_name / thread_name)


class _TrimEvent(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float | None = None
    dur: float = 0.0
    pid: int | str | None = None
    tid: int | str | None = None
    id: int | str | None = None
    args: _Args | None = None


_TRIM = msgspec.json.Decoder(_TrimEvent)
_ANY = msgspec.json.Decoder()
_ENC = msgspec.json.Encoder()


@dataclass(frozen=True)
class StepInfo:
    num: int
    start: float
    end: float

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Window:
    """The chosen time window: sorted, disjoint ``intervals`` (µs, trace clock), None for the whole trace."""

    mode: str
    intervals: tuple[tuple[float, float], ...] | None
    steps: tuple[int, ...] = ()
    median_step: int | None = None
    slowest_step: int | None = None

    def contains(self, ts: float, end: float) -> bool:
        if self.intervals is None:
            return True
        return any(ts <= hi and end >= lo for lo, hi in self.intervals)


@dataclass
class TrimReport:
    """What one trimmed timeline holds (also written to the file's top-level ``"profstack"`` key)."""

    source: str
    rank: int
    mode: str
    steps: list[int]
    intervals_us: list[list[float]] | None
    median_step: int | None
    slowest_step: int | None
    max_events: int | None
    written: int = 0  # events in traceEvents, metadata included
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    moved_to_overlap_tracks: int = 0
    unresolved_overlaps: int = 0
    truncated_input: bool = False

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def describe(self) -> str:
        """One line for the CLI: window, events, what the cap dropped."""
        if self.intervals_us is None:
            where = "whole trace"
        else:
            where = f"steps {_steps_text(self.steps)}"
            if self.mode == "median" and self.slowest_step is not None:
                where += f" (median #{self.median_step} with neighbours, slowest #{self.slowest_step})"
        text = f"{where}, {self.written:,} events"
        if self.dropped_total:
            parts = ", ".join(f"{n:,} {t}" for t, n in self.dropped.items() if n)
            text += f"; the {self.max_events:,}-event cap dropped {parts}"
        if self.moved_to_overlap_tracks:
            text += f"; {self.moved_to_overlap_tracks:,} overlapping events moved to sibling tracks"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rank": self.rank,
            "mode": self.mode,
            "steps": self.steps,
            "intervals_us": self.intervals_us,
            "median_step": self.median_step,
            "slowest_step": self.slowest_step,
            "max_events": self.max_events,
            "written": self.written,
            "kept": dict(self.kept),
            "dropped": dict(self.dropped),
            "moved_to_overlap_tracks": self.moved_to_overlap_tracks,
            "unresolved_overlaps": self.unresolved_overlaps,
            "truncated_input": self.truncated_input,
        }


def _steps_text(steps: Sequence[int]) -> str:
    if not steps:
        return "none"
    runs: list[str] = []
    start = prev = steps[0]
    for s in [*steps[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        runs.append(f"#{start}" if start == prev else f"#{start}-#{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(runs)


def step_bounds(text: str) -> tuple[int, int]:
    """``A:B`` or ``N`` (step numbers) -> (A, B), bounds unchecked; ValueError on any other text.

    The one parser of a step range: ``--steps`` and ``--timeline-window`` both use it."""
    parts = text.strip().split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise ValueError(text)


def parse_window(text: str | tuple[int, int] | None) -> str | tuple[int, int]:
    """``median`` | ``slowest`` | ``all`` | ``A:B`` (or ``N``) -> a mode or a step range; one-line errors."""
    if text is None:
        return DEFAULT_WINDOW
    if isinstance(text, tuple):
        a, b = text
    else:
        t = text.strip().lower()
        if t in WINDOW_MODES:
            return t
        try:
            a, b = step_bounds(t)
        except ValueError:
            raise AnalysisOptionsError(
                f"timeline window must be median, slowest, all or A:B (step numbers), got {text!r}"
            ) from None
    if a > b:
        raise AnalysisOptionsError(f"timeline window {a}:{b} is empty")
    return (a, b)


def choose_window(steps: Sequence[StepInfo], spec: str | tuple[int, int], *, label: str = "") -> Window:
    """The window for ``spec`` over ``steps`` (deduplicated CPU ProfilerSteps, any order)."""
    by_time = sorted(steps, key=lambda s: (s.start, s.num))
    if isinstance(spec, tuple):
        a, b = spec
        chosen = [s for s in by_time if a <= s.num <= b]
        if not chosen:
            have = f"steps {by_time[0].num}..{by_time[-1].num}" if by_time else "no ProfilerStep"
            raise StepWindowError(f"no ProfilerStep in {a}:{b} (trace has {have})", source=label)
        return Window(f"{a}:{b}", _union([(s.start, s.end) for s in chosen]), tuple(s.num for s in chosen))
    if spec == "all" or not by_time:
        return Window("all" if spec == "all" else f"{spec} (no steps: whole trace)", None)
    slow_i = max(range(len(by_time)), key=lambda i: (by_time[i].dur, -i))
    if spec == "slowest":
        picked = by_time[max(slow_i - 1, 0) : slow_i + 2]
        return Window(
            "slowest",
            _union([(s.start, s.end) for s in picked]),
            tuple(s.num for s in picked),
            slowest_step=by_time[slow_i].num,
        )
    order = sorted(range(len(by_time)), key=lambda i: (by_time[i].dur, i))
    med_i = order[(len(order) - 1) // 2]
    idx = sorted({*range(max(med_i - 1, 0), min(med_i + 2, len(by_time))), slow_i})
    picked = [by_time[i] for i in idx]
    return Window(
        "median",
        _union([(s.start, s.end) for s in picked]),
        tuple(s.num for s in picked),
        median_step=by_time[med_i].num,
        slowest_step=by_time[slow_i].num,
    )


def _union(spans: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    out: list[list[float]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


# ---------------------------------------------------------------------------------------------- passes


def _events(
    source: TraceSource, max_decompressed: int, max_event: int, partial: list[bool]
) -> Iterator[tuple[bytes, _TrimEvent | None, EventStream]]:
    """(raw, decoded or None when undecodable, stream) for every event; a truncated tail ends it."""
    with source.open() as fh:
        # hostile names: strings beyond parse.MAX_STRING_BYTES are cut before the splitter buffers them, as
        # in the analysis pass, so a 200 MB kernel name costs neither memory nor output size here either
        chunks = _LongStrings().filter(iter_chunks(fh, max_decompressed=max_decompressed))
        stream = EventStream(chunks, max_value_bytes=max_event)
        try:
            for raw in raw_events(stream):
                try:
                    ev: _TrimEvent | None = _TRIM.decode(raw)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    ev = None
                yield raw, ev, stream
        except TraceError as exc:
            if not exc.partial_ok:
                raise
            partial[0] = True
        yield b"", None, stream  # sentinel: the stream's metadata is complete


def _tier(ev: _TrimEvent) -> int:
    cat = ev.cat
    if cat in _GPU_CATS or cat in _LAUNCH_FLOW_CATS:
        return T_GPU
    if ev.name.startswith(STEP_PREFIX):
        return T_GPU
    if cat in _RUNTIME_CATS:
        a = ev.args
        if a is not None and a.correlation is not None and enqueues_gpu_work(ev.name):
            return T_GPU  # a launch: it goes with its GPU op
        return T_RUNTIME
    if cat == "user_annotation":
        return T_ANNOT
    if cat == "python_function":
        return T_PYTHON
    return T_CPU


def _corr(ev: _TrimEvent) -> int | None:
    if ev.cat in _LAUNCH_FLOW_CATS:
        return ev.id if isinstance(ev.id, int) else None
    a = ev.args
    return a.correlation if a is not None else None


@dataclass
class _Plan:
    window: Window
    keep_corr: set[int]
    lo: float
    width: float
    cut_bin: list[int]  # per tier: bins < cut_bin kept whole
    cut_take: list[int]  # per tier: events of bin cut_bin kept (first in file order)
    budget: int | None

    def bin_of(self, ts: float) -> int:
        if self.width <= 0:
            return 0
        b = int((ts - self.lo) / self.width)
        return 0 if b < 0 else _BINS - 1 if b >= _BINS else b


def _candidate(ev: _TrimEvent, window: Window, keep: set[int] | None) -> tuple[bool, int]:
    """(in the timeline, tier) for a non-metadata event."""
    ts = ev.ts
    if ts is None or ts != ts:  # noqa: PLR0124 - NaN
        return False, 0
    tier = _tier(ev)
    end = ts + max(ev.dur, 0.0) if ev.ph == "X" else ts
    if window.contains(ts, end):
        return True, tier
    if keep is not None and (ev.cat in _GPU_OP_CATS or ev.cat in _RUNTIME_CATS or ev.cat in _LAUNCH_FLOW_CATS):
        c = _corr(ev)
        if c is not None and c in keep:
            return True, T_GPU  # the launch / flow / GPU op linked to the window
    return False, tier


@dataclass
class _Scan:
    steps: list[StepInfo]
    meta: dict[str, Any]
    threads: dict[tuple[Any, Any], str]
    events: int
    lo: float  # earliest start of a timed event (inf when none)
    hi: float
    max_tid: dict[Any, int] = field(default_factory=dict)  # per pid, the largest integer tid seen


def _scan_steps(source: TraceSource, max_decompressed: int, max_event: int, partial: list[bool]) -> _Scan:
    """Pass 1: ProfilerSteps, top-level metadata, thread names and the time span."""
    steps: dict[tuple[int, float], StepInfo] = {}
    threads: dict[tuple[Any, Any], str] = {}
    meta: dict[str, Any] = {}
    n = 0
    lo, hi = math.inf, -math.inf
    marker = STEP_PREFIX.encode()
    max_tid: dict[Any, int] = {}
    for raw, ev, stream in _events(source, max_decompressed, max_event, partial):
        if not raw:
            meta = stream.meta
            break
        n += 1
        if ev is None:
            continue
        tid = ev.tid
        if (
            isinstance(tid, int)
            and not isinstance(tid, bool)
            and tid > max_tid.get(ev.pid, 0)
            and (ev.pid in max_tid or len(max_tid) < 100_000)
        ):
            max_tid[ev.pid] = tid
        if ev.ph == "M":
            if ev.name == "thread_name" and ev.args is not None and ev.args.name and len(threads) < 10_000:
                threads[(ev.pid, ev.tid)] = ev.args.name
            continue
        ts = ev.ts
        if ts is None or ts != ts:  # noqa: PLR0124 - NaN
            continue
        lo = min(lo, ts)
        hi = max(hi, ts + max(ev.dur, 0.0) if ev.ph == "X" else ts)
        if marker not in raw or ev.ph != "X" or ev.cat in _STEP_CATS_EXCLUDED:
            continue
        if not ev.name.startswith(STEP_PREFIX):
            continue
        try:
            num = int(ev.name[len(STEP_PREFIX) :])
        except ValueError:
            continue
        steps[(num, ts)] = StepInfo(num, ts, ts + max(ev.dur, 0.0))
    return _Scan(list(steps.values()), meta, threads, n, lo, hi, max_tid)


def _plan(
    source: TraceSource,
    window: Window,
    *,
    span: tuple[float, float],
    max_events: int | None,
    max_decompressed: int,
    max_event: int,
) -> tuple[_Plan, set[Any]]:
    """Pass 2: the correlation ids the window needs, and per tier and time bin how many events it keeps."""
    lo, hi = span if window.intervals is None else (window.intervals[0][0], window.intervals[-1][1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = 0.0
    width = (hi - lo) / _BINS
    keep: set[int] = set()
    counts = [[0] * _BINS for _ in TIERS]
    pids_named: set[Any] = set()
    pids: set[Any] = set()
    linked = 0
    windowed = window.intervals is not None
    for raw, ev, _ in _events(source, max_decompressed, max_event, [False]):
        if not raw:
            break
        if ev is None:
            continue
        if ev.ph == "M":
            if ev.name == "process_name":
                pids_named.add(ev.pid)
            continue
        ok, tier = _candidate(ev, window, keep)
        if not ok:
            continue
        if len(pids) < 4096:
            pids.add(ev.pid)
        ts = float(ev.ts)  # type: ignore[arg-type]  # _candidate checked it
        if windowed and tier == T_GPU and ev.cat not in _LAUNCH_FLOW_CATS:
            c = _corr(ev)
            if c is not None:
                if not window.contains(ts, ts + max(ev.dur, 0.0)):
                    linked += 1
                elif len(keep) < _MAX_CORR:
                    keep.add(c)
        counts[tier][_bin(ts, lo, width)] += 1
    cut_bin = [_BINS] * len(TIERS)
    cut_take = [0] * len(TIERS)
    if max_events is not None:
        left = max_events
        if linked:
            left = max(left - linked // 50 - 16, 0)  # slack: links found late in file order
        for t in range(len(TIERS)):
            total = sum(counts[t])
            if total <= left:
                left -= total
                continue
            acc = 0
            for b in range(_BINS):
                if acc + counts[t][b] > left:
                    cut_bin[t], cut_take[t] = b, left - acc
                    break
                acc += counts[t][b]
            cut_bin[t + 1 :] = [-1] * (len(TIERS) - t - 1)
            break
    return _Plan(window, keep, lo, width, cut_bin, cut_take, max_events), pids - pids_named


def _bin(ts: float, lo: float, width: float) -> int:
    if width <= 0:
        return 0
    b = int((ts - lo) / width)
    return 0 if b < 0 else _BINS - 1 if b >= _BINS else b


class _Lane:
    """One lane: disjoint segments (runs of events in start order), each with its stack of open ends and
    its top-level intervals.

    Kineto writes some sections of a track out of order as a whole (steps 3-4, then 1-2): an event that
    falls in a gap between top-level events already placed splits the segment there and starts its own,
    instead of going to a sibling track."""

    __slots__ = ("segs", "starts")
    _MAX_SEGMENTS = 1024

    def __init__(self) -> None:
        self.starts: list[float] = []  # segment starts, ascending
        self.segs: list[list[Any]] = []  # [start, end, last_start, stack, top-level starts, top-level ends]

    def place(self, ts: float, end: float) -> bool:
        starts, segs = self.starts, self.segs
        i = bisect.bisect_right(starts, ts) - 1
        nxt = starts[i + 1] if i + 1 < len(starts) else math.inf
        if end > nxt:
            return False  # would reach into a later segment
        if i >= 0:
            seg = segs[i]
            if ts >= seg[2]:
                stack = seg[3]
                while stack and stack[-1] <= ts:
                    stack.pop()
                if stack and end > stack[-1]:
                    return False  # partial overlap
                if not stack:
                    seg[4].append(ts)
                    seg[5].append(end)
                stack.append(end)
                seg[2] = ts
                seg[1] = max(seg[1], end)
                return True
            if ts < seg[1]:
                # out of the segment's order: only a gap between its top-level events can take it
                tl_s, tl_e = seg[4], seg[5]
                j = bisect.bisect_right(tl_s, ts) - 1
                if j < 0 or ts < tl_e[j] or j + 1 >= len(tl_s) or end > tl_s[j + 1]:
                    return False
                if len(segs) + 2 > self._MAX_SEGMENTS:
                    return False
                head = [seg[0], tl_e[j], tl_e[j], [], tl_s[: j + 1], tl_e[: j + 1]]
                tail = [tl_s[j + 1], seg[1], seg[2], seg[3], tl_s[j + 1 :], tl_e[j + 1 :]]
                new = [ts, end, ts, [end], array("d", [ts]), array("d", [end])]
                segs[i : i + 1] = [head, new, tail]
                starts[i : i + 1] = [head[0], ts, tail[0]]
                return True
        if len(segs) >= self._MAX_SEGMENTS:
            return False
        starts.insert(i + 1, ts)
        segs.insert(i + 1, [ts, end, ts, [end], array("d", [ts]), array("d", [end])])
        return True


class _Lanes:
    """Per-track layout onto lanes where events nest properly (see the module docstring)."""

    __slots__ = ("lanes",)

    def __init__(self) -> None:
        self.lanes: list[_Lane] = [_Lane()]

    def place(self, ts: float, end: float) -> int:
        """Lane index for [ts, end], or -1 when no lane (of ``_MAX_LANES``) takes it."""
        for k, lane in enumerate(self.lanes):
            if lane.place(ts, end):
                return k
        if len(self.lanes) < _MAX_LANES:
            lane = _Lane()
            lane.place(ts, end)
            self.lanes.append(lane)
            return len(self.lanes) - 1
        return -1


def _group(ev: _TrimEvent) -> int:
    cat = ev.cat
    if cat in _GPU_CATS:
        return 0
    if cat in _RUNTIME_CATS:
        return 1
    if cat == "python_function":
        return 3
    return 2


class _Writer:
    def __init__(self, sink: BinaryIO, max_events: int | None) -> None:
        self.sink = sink
        self.first = True
        self.written = 0
        self.max_events = max_events
        self.timed = 0

    def raw(self, data: bytes, *, timed: bool) -> bool:
        if timed:
            if self.max_events is not None and self.timed >= self.max_events:
                return False
            self.timed += 1
        self.sink.write(data if self.first else b",\n" + data)
        self.first = False
        self.written += 1
        return True


def trim_timeline(
    source: TraceSource,
    out: BinaryIO,
    *,
    window: str | tuple[int, int] | None = None,
    max_events: int | None,
    rank: int | None = None,
    compress: bool = False,
    max_decompressed_bytes: int = 20 * GIB,
    max_event_bytes: int = 256 << 20,
) -> TrimReport:
    """Write the timeline of ``source`` for ``window`` (``parse_window``) as Chrome-trace JSON.

    ``max_events`` caps the non-metadata events (see the module docstring for what goes first);
    ``rank`` names the rank when the trace has no ``distributedInfo`` (else from the file name, else 0).
    Streams: memory does not grow with the trace. A truncated or corrupt tail ends the output early (still
    valid JSON) instead of failing; an unusable input or an unknown step window raises TraceError.
    """
    spec = parse_window(window)
    partial = [False]
    try:
        scan = _scan_steps(source, max_decompressed_bytes, max_event_bytes, partial)
        if scan.events == 0 and partial[0]:
            raise TraceError("nothing readable before the damage", source=source.name)
        win = choose_window(scan.steps, spec, label=source.name)
        plan, unnamed_pids = _plan(
            source,
            win,
            span=(scan.lo, scan.hi),
            max_events=max_events,
            max_decompressed=max_decompressed_bytes,
            max_event=max_event_bytes,
        )
    except TraceError as exc:
        raise exc.with_source(source.name) from None
    dist = scan.meta.get("distributedInfo")
    file_rank = dist.get("rank") if isinstance(dist, dict) else None
    if isinstance(file_rank, int) and not isinstance(file_rank, bool):
        the_rank = file_rank
    else:
        guessed = rank_from_name(source.name)
        the_rank = rank if rank is not None else guessed if guessed is not None else 0
    report = TrimReport(
        source=source.name,
        rank=the_rank,
        mode=win.mode,
        steps=list(win.steps),
        intervals_us=None if win.intervals is None else [[round(a, 3), round(b, 3)] for a, b in win.intervals],
        median_step=win.median_step,
        slowest_step=win.slowest_step,
        max_events=max_events,
        truncated_input=partial[0],
    )
    sink: BinaryIO = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) if compress else out  # type: ignore[assignment]
    try:
        _write(
            source,
            sink,
            plan=plan,
            scan=scan,
            unnamed_pids=unnamed_pids,
            report=report,
            max_decompressed=max_decompressed_bytes,
            max_event=max_event_bytes,
        )
    except TraceError as exc:
        raise exc.with_source(source.name) from None
    finally:
        if compress:
            sink.close()
    return report


Item = tuple[float, float, int, bytes, Any]  # (start, end, sequence, raw event, tier) of a buffered X event
Track = tuple[Any, Any, int]  # (pid, tid, group)


def _write(
    source: TraceSource,
    sink: BinaryIO,
    *,
    plan: _Plan,
    scan: _Scan,
    unnamed_pids: set[Any],
    report: TrimReport,
    max_decompressed: int,
    max_event: int,
) -> None:
    """The output file, section by section (``_Timeline``): the header, the processes' names, the events in the
    window (metadata, then timed events within the cap, X events laid out per track), the overlap tracks' names,
    the footer."""
    out = _Timeline(sink, plan, scan, report)
    out.header(scan.meta)
    out.process_names(unnamed_pids)
    partial = [False]
    out.events(_events(source, max_decompressed, max_event, partial))
    out.flush_tracks()
    out.thread_names()
    report.truncated_input = report.truncated_input or partial[0]
    out.footer()


class _Timeline:
    """The writer of one trimmed timeline: its sections in file order, and the per-track layout of X events
    (a bounded reorder heap per track, then ``_Lanes``; an event that does not nest goes to a sibling track)."""

    def __init__(self, sink: BinaryIO, plan: _Plan, scan: _Scan, report: TrimReport) -> None:
        self.sink, self.plan, self.report = sink, plan, report
        self.rank = report.rank
        self.threads = scan.threads
        self.w = _Writer(sink, plan.budget)
        self.in_cut = [0] * len(TIERS)  # events of each tier taken from its cut bin so far
        self.buffers: dict[Track, list[Item]] = {}
        self.lanes: dict[Track, _Lanes] = {}
        self.new_tracks: dict[tuple[Any, Any], str] = {}  # (pid, sibling tid) -> its thread_name
        self.sibling: dict[tuple[Any, Any, int, int], Any] = {}  # (pid, tid, group, lane) -> the sibling's tid
        self.next_tid = {pid: t + 1 for pid, t in scan.max_tid.items()}
        self.seq = 0
        self.n_meta = 0

    # ---- sections ----

    def header(self, meta: dict[str, Any]) -> None:
        """``distributedInfo`` first (json.dumps writes '"rank": N' with the space HTA's regex needs, on the file's
        second line), the metadata kept, and the opening of ``traceEvents``."""
        dist = meta.get("distributedInfo")
        info: dict[str, Any] = {"rank": self.rank}
        if isinstance(dist, dict):
            info.update({k: v for k, v in dist.items() if k != "rank"})
        sink = self.sink
        sink.write(b'{\n  "distributedInfo": ' + json.dumps(info, allow_nan=False).encode() + b",\n")
        for key in _KEEP_META:
            if meta.get(key) is not None:
                sink.write(b'  "' + key.encode() + b'": ' + _ENC.encode(meta[key]) + b",\n")
        sink.write(b'  "traceEvents": [\n')

    def process_names(self, unnamed_pids: set[Any]) -> None:
        """``rank N`` for the processes the trace does not name."""
        for pid in sorted(unnamed_pids, key=str):
            name = {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {self.rank}"}}
            self.w.raw(_ENC.encode(name), timed=False)

    def events(self, events: Iterator[tuple[bytes, _TrimEvent | None, EventStream]]) -> None:
        """Every event of the trace in file order: metadata as it is (processes named with their rank), the
        window's other events within the cap, X events through their track's reorder heap."""
        plan, report = self.plan, self.report
        kept, dropped = report.kept, report.dropped
        window, keep_corr, budget = plan.window, plan.keep_corr, plan.budget
        cut_bin, cut_take, in_cut = plan.cut_bin, plan.cut_take, self.in_cut
        buffers, w, emit, seq = self.buffers, self.w, self._emit, self.seq
        for raw, ev, _ in events:
            if not raw:
                break
            if ev is None:
                continue
            if ev.ph == "M":
                self._metadata(raw, ev)
                continue
            ok, tier = _candidate(ev, window, keep_corr)
            if not ok:
                continue
            ts = float(ev.ts)  # type: ignore[arg-type]
            if budget is not None:  # the cap: the tier's bins before its cut bin, the first ones of the cut bin
                b = plan.bin_of(ts)
                cb = cut_bin[tier]
                if b > cb or (b == cb and in_cut[tier] >= cut_take[tier]):
                    dropped[TIERS[tier]] += 1
                    continue
                if b == cb:
                    in_cut[tier] += 1
            if ev.ph != "X":
                if w.raw(raw, timed=True):
                    kept[TIERS[tier]] += 1
                else:
                    dropped[TIERS[tier]] += 1
                continue
            track = (ev.pid, ev.tid, _group(ev))
            buf = buffers.get(track)
            if buf is None:
                buf = buffers[track] = []
            seq += 1
            heapq.heappush(buf, (ts, -(ts + max(ev.dur, 0.0)), seq, raw, tier))
            if len(buf) > _REORDER:
                ts0, neg_end, s0, raw0, tier0 = heapq.heappop(buf)
                emit((ts0, -neg_end, s0, raw0, tier0), track)
        self.seq = seq

    def flush_tracks(self) -> None:
        """The X events still held back, track by track in start order."""
        for track, buf in self.buffers.items():
            while buf:
                ts0, neg_end, s0, raw0, tier0 = heapq.heappop(buf)
                self._emit((ts0, -neg_end, s0, raw0, tier0), track)

    def thread_names(self) -> None:
        """A ``thread_name`` for each sibling track made for overlaps and Python functions."""
        for (pid, tid), name in self.new_tracks.items():
            meta = {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
            self.w.raw(_ENC.encode(meta), timed=False)

    def footer(self) -> None:
        """The end of ``traceEvents`` and the ``"profstack"`` key: what was kept and dropped (``TrimReport``)."""
        report = self.report
        report.written = self.w.written
        self.sink.write(b"\n  ],\n")
        self.sink.write(b'  "profstack": ' + _ENC.encode({"timeline": report.as_dict()}) + b"\n}\n")

    # ---- events ----

    def _metadata(self, raw: bytes, ev: _TrimEvent) -> None:
        """A metadata event as it is (``process_name`` prefixed with the rank), up to ``_MAX_META`` of them."""
        self.n_meta += 1
        if self.n_meta > _MAX_META:
            return
        data = raw
        if ev.name == "process_name" and ev.args is not None and ev.args.name is not None:
            try:
                obj = _ANY.decode(raw)
                obj["args"]["name"] = f"rank {self.rank} · {ev.args.name}"
                data = _ENC.encode(obj)
            except (msgspec.DecodeError, TypeError, KeyError):
                pass
        self.w.raw(data, timed=False)

    def _emit(self, item: Item, track: Track) -> None:
        """One X event, laid out on its track's lanes: lane 0 keeps the thread's tid, a later lane (or a Python
        function) gets a sibling track's."""
        ts, end, _, raw, tier = item
        report = self.report
        lay = self.lanes.get(track)
        if lay is None:
            lay = self.lanes[track] = _Lanes()
        k = lay.place(ts, end)
        python = track[2] == _PYTHON_GROUP  # Python functions get their own track next to the thread's
        if k > 0 or (python and k == 0):
            try:
                obj = _ANY.decode(raw)
                obj["tid"] = self._lane_tid(track[0], track[1], track[2], k)
                raw = _ENC.encode(obj)
                thread = self.threads.get((track[0], track[1]), track[1])
                what = ("python" + (f" overlap {k}" if k else "")) if python else f"overlap {k}"
                self.new_tracks.setdefault((track[0], obj["tid"]), f"{thread} ({what})")
                if k:
                    report.moved_to_overlap_tracks += 1
            except (msgspec.DecodeError, TypeError):
                report.unresolved_overlaps += 1
        elif k < 0:
            report.unresolved_overlaps += 1
        if self.w.raw(raw, timed=True):
            report.kept[TIERS[tier]] += 1
        else:
            report.dropped[TIERS[tier]] += 1

    def _lane_tid(self, pid: Any, tid: Any, group: int, k: int) -> Any:
        """A tid no event of the trace uses (integer tids: above the pid's largest), one per (track, lane)."""
        key = (pid, tid, group, k)
        new = self.sibling.get(key)
        if new is None:
            if isinstance(tid, int) and not isinstance(tid, bool):
                new = self.next_tid.get(pid, 1)
                self.next_tid[pid] = new + 1
            else:
                new = f"{tid} lane {group * _MAX_LANES + k}"
            self.sibling[key] = new
        return new


def trim_trace(
    source: TraceSource,
    out: BinaryIO,
    *,
    steps: tuple[int, int] | None,
    max_events: int | None,
    compress: bool = False,
    window: str | tuple[int, int] | None = None,
    rank: int | None = None,
    max_decompressed_bytes: int = 20 * GIB,
    max_event_bytes: int = 256 << 20,
) -> int:
    """``trim_timeline`` returning the number of events written. ``steps`` (A, B) is the step window;
    without it, ``window`` (default ``"all"`` here, for compatibility; the CLI and pipeline pass theirs)."""
    spec: str | tuple[int, int] = steps if steps is not None else (window if window is not None else "all")
    return trim_timeline(
        source,
        out,
        window=spec,
        max_events=max_events,
        rank=rank,
        compress=compress,
        max_decompressed_bytes=max_decompressed_bytes,
        max_event_bytes=max_event_bytes,
    ).written
