"""Which files make one run: successive profiling cycles of one process are merged, anything else is kept apart.

The rule (docs/analysis.md, "Runs"):

* Files of one rank are **successive cycles of one run** when, taken in time order, each next file
  1. carries no identity that contradicts the previous one: the same ``baseTimeNanoseconds`` (Kineto's
     per-process clock base, set once when the profiler is created in a process), the same worker name from
     ``tensorboard_trace_handler``'s file name (``<host>_<pid>.<ms>.pt.trace.json``), the same
     ``distributedInfo`` world size and backend; a key missing in either file is not evidence either way;
  2. starts after the previous one ends (no overlap),
  3. continues the step numbering (torch numbers ``ProfilerStep#N`` across the cycles of one profiler;
     a new profiler starts again), and
  4. starts at most ``max_cycle_gap_s`` (default 30 minutes) after it ends.
  A file that fails any test starts (or joins) another run of that rank.
* Entries of different ranks belong to one run when their time ranges overlap (ranks of one job run at the
  same time) and their world size / backend do not contradict each other.
* Merged cycles are laid end to end: the unprofiled time between two cycles is not GPU idle time.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from profstack.analysis.parse import FileData

#: default largest gap between two schedule cycles of one run
DEFAULT_MAX_CYCLE_GAP_S = 1800.0

# torch.profiler.tensorboard_trace_handler: f"{worker_name}.{time.time_ns() // 1_000_000}.pt.trace.json[.gz]"
# (milliseconds, 13 digits), since torch 2.x f"{worker_name}.{time.time_ns()}.pt.trace.json" (nanoseconds, 19)
_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.(?P<ms>\d{13}|\d{19})\.pt\.trace\.json(?:\.gz)?$")


@dataclass(frozen=True)
class Identity:
    """What a file says about the process that wrote it (None: the file does not say)."""

    process_clock: int | float | None = None
    worker: str | None = None
    world_size: int | None = None
    backend: str | None = None

    def conflict(self, other: Identity, *, same_process: bool) -> str | None:
        """Why the two cannot be one run (None: no contradiction)."""
        keys = _SAME_PROCESS if same_process else _CROSS_PROCESS
        for key in keys:
            a, b = getattr(self, key), getattr(other, key)
            if a is not None and b is not None and a != b:
                what = {
                    "process_clock": "baseTimeNanoseconds (another process)",
                    "worker": "worker name (another process)",
                    "world_size": "world size",
                    "backend": "distributed backend",
                }[key]
                return f"{what} {a} vs {b}"
        return None

    def cross_process_key(self) -> tuple[Any, ...]:
        """The fields ``conflict(..., same_process=False)`` compares, in its order (None: unknown)."""
        return tuple(getattr(self, key) for key in _CROSS_PROCESS)


#: the fields two files of one process must not contradict / two ranks of one run must not contradict
_SAME_PROCESS = ("process_clock", "worker", "world_size", "backend")
_CROSS_PROCESS = ("world_size", "backend")


def identity_of(fd: FileData) -> Identity:
    meta = fd.meta
    base = meta.get("baseTimeNanoseconds")
    dist = meta.get("distributedInfo")
    world = dist.get("world_size") if isinstance(dist, dict) else None
    backend = dist.get("backend") if isinstance(dist, dict) else None
    match = _HANDLER_NAME.match(PurePath(fd.name).name)
    return Identity(
        process_clock=base if isinstance(base, int | float) and not isinstance(base, bool) and base > 0 else None,
        worker=match.group("worker") if match else None,
        world_size=world if isinstance(world, int) and not isinstance(world, bool) else None,
        backend=backend if isinstance(backend, str) and backend else None,
    )


def file_span(fd: FileData) -> tuple[float, float] | None:
    """The file's time range on an absolute clock: GPU ops, ProfilerSteps and launches together."""
    lo, hi = float("inf"), -float("inf")
    ops = fd.gpu_feed.ops if fd.gpu_feed is not None else None
    if ops is not None and len(ops):
        lo = min(lo, *ops.ts)
        hi = max(hi, *(t + d for t, d in zip(ops.ts, ops.dur, strict=True)))
    acc = fd.gpu
    if acc is not None and acc.ops_lo <= acc.ops_hi:  # every op, not only the analysed steps' union
        lo, hi = min(lo, acc.ops_lo), max(hi, acc.ops_hi)
    elif acc is not None and acc.has_union:
        lo, hi = min(lo, acc.gpu_lo), max(hi, acc.gpu_hi)
    if fd.st_ts:
        lo = min(lo, *fd.st_ts)
        hi = max(hi, *(t + d for t, d in zip(fd.st_ts, fd.st_dur, strict=True)))
    if fd.launch_span is not None:
        lo, hi = min(lo, fd.launch_span[0]), max(hi, fd.launch_span[1])
    tl = fd.cpu_timeline
    if ".xplane.pb" in fd.name and tl.lo <= tl.hi:
        # one device of an XSpace (profstack.analysis.xplane.expand): the host's events, shared by the host's devices,
        # are its time too, so the devices of one host are one run even where their own work does not overlap
        lo, hi = min(lo, tl.lo), max(hi, tl.hi)
    if lo > hi:
        return None
    return fd.time_offset_us + lo, fd.time_offset_us + hi


@dataclass
class Chain:
    files: list[FileData]
    spans: list[tuple[float, float] | None]

    @property
    def end(self) -> float:
        return max((s[1] for s in self.spans if s is not None), default=-float("inf"))


@dataclass
class Split:
    """One rank's files grouped into runs, with why any two were kept apart."""

    chains: list[list[FileData]]
    overlaps: list[tuple[str, str]] = field(default_factory=list)
    separated: list[tuple[str, str, str]] = field(default_factory=list)  # (file a, file b, reason)


def split_cycles(files: Sequence[FileData], max_gap_us: float) -> Split:
    """Group one rank's files (any order) into chains of successive cycles; see the module docstring."""
    spans = [file_span(f) for f in files]
    order = sorted(range(len(files)), key=lambda i: (spans[i] is None, spans[i] or (0.0, 0.0), files[i].name))
    chains: list[Chain] = []
    out = Split(chains=[])
    for i in order:
        fd, span = files[i], spans[i]
        ident = identity_of(fd)
        best: Chain | None = None
        why: tuple[str, str, str] | None = None
        overlap: tuple[str, str] | None = None
        for chain in sorted(chains, key=lambda c: -c.end):
            last = chain.files[-1]
            reason = identity_of(last).conflict(ident, same_process=True)
            if reason is None and (span is None or chain.spans[-1] is None):
                reason = "no timestamps to place the file in time"
            elif reason is None and span is not None and span[0] < chain.end:
                overlap = overlap or (last.name, fd.name)
                continue
            elif reason is None and span is not None and span[0] - chain.end > max_gap_us:
                reason = f"{(span[0] - chain.end) / 3.6e9:.1f} h apart (more than {max_gap_us / 6e7:.0f} min)"
            elif reason is None and fd.st_num and last.st_num and min(fd.st_num) <= max(last.st_num):
                reason = f"ProfilerStep numbers restart (#{min(fd.st_num)} after #{max(last.st_num)}): another session"
            if reason is None:
                best = chain
                break
            why = why or (last.name, fd.name, reason)
        if best is not None:
            best.files.append(fd)
            best.spans.append(span)
            continue
        if overlap is not None:
            out.overlaps.append(overlap)
        elif why is not None:
            out.separated.append(why)
        chains.append(Chain([fd], [span]))
    out.chains = [c.files for c in chains]
    return out


def gaps_removed(files: Sequence[FileData]) -> list[float]:
    """Per file (in the given time order), the unprofiled time before it that merging removes (cumulative µs)."""
    out: list[float] = []
    removed = 0.0
    prev_end: float | None = None
    for fd in files:
        span = file_span(fd)
        if span is not None and prev_end is not None and span[0] > prev_end:
            removed += span[0] - prev_end
        out.append(removed)
        if span is not None:
            prev_end = max(prev_end, span[1]) if prev_end is not None else span[1]
    return out


@dataclass
class Entry:
    """One analysed rank entry, as the run grouping sees it."""

    rank: int
    label: str
    files: list[str]
    span: tuple[float, float] | None
    identity: Identity


class _Forest:
    """Union-find over ``0 .. n-1``."""

    __slots__ = ("parent",)

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        self.parent[self.find(i)] = self.find(j)

    def link(self, root: int, j: int) -> None:
        """Join ``j``'s set to the set whose root is ``root`` (which stays its root)."""
        other = self.find(j)
        if other != root:
            self.parent[other] = root


class _Pool:
    """Active entries of the sweep that share their values on some identity fields, in blocks.

    A block (a tree of the projection's block forest) is a set of the pool's entries already known to be in
    one run, keyed by its root, with how many of its active entries each rank has; ``multi`` holds the
    blocks with two or more ranks, ``single`` the others by their one rank. A block keeps its root as key
    after the root's own entry has left: the run still holds the entries counted."""

    __slots__ = ("blocks", "multi", "single")

    def __init__(self) -> None:
        self.blocks: dict[int, dict[int, int]] = {}
        self.multi: set[int] = set()
        self.single: dict[int, set[int]] = {}

    def add(self, i: int, rank: int) -> None:
        self.blocks[i] = {rank: 1}
        self.single.setdefault(rank, set()).add(i)

    def remove(self, root: int, rank: int) -> None:
        """One active entry of ``rank`` in block ``root`` leaves."""
        ranks = self.blocks[root]
        was_multi = len(ranks) > 1
        ranks[rank] -= 1
        if ranks[rank]:
            return
        del ranks[rank]
        if not ranks:
            del self.blocks[root]
            self._unfile(self.single, rank, root)
        elif was_multi and len(ranks) == 1:
            self.multi.discard(root)
            self.single.setdefault(next(iter(ranks)), set()).add(root)

    @staticmethod
    def _unfile(single: dict[int, set[int]], rank: int, root: int) -> None:
        roots = single[rank]
        roots.discard(root)
        if not roots:
            del single[rank]

    def join(self, runs: _Forest, blocks: _Forest, root: int, rank: int) -> None:
        """Join the run ``root`` (of an entry of ``rank`` overlapping every active entry) to each block
        holding an entry of another rank; those blocks become one."""
        own = self.single.pop(rank, None)
        targets = [*self.multi, *(b for roots in self.single.values() for b in roots)]
        self.multi.clear()
        self.single.clear()
        if own is not None:
            self.single[rank] = own
        if not targets:
            return
        for block in targets:
            runs.link(root, block)
        base = max(targets, key=lambda b: len(self.blocks[b]))
        ranks = self.blocks[base]
        for block in targets:
            if block != base:
                blocks.parent[block] = base
                for r, count in self.blocks.pop(block).items():
                    ranks[r] = ranks.get(r, 0) + count
        if len(ranks) > 1:
            self.multi.add(base)
        else:
            self.single.setdefault(next(iter(ranks)), set()).add(base)


class _Sweep:
    """``group_runs``' sweep over the entries whose span has start <= end, taken by span start.

    Every active entry (one whose span reaches the current start) is in one pool per set of identity
    fields (``Identity.cross_process_key``; a field set is a bit mask): the pool of its values on those
    fields, an unknown value (None) being a value of its own. The entries that do not contradict a key
    whose known fields are F are exactly those in the pools of projection F whose values are, field by
    field, the key's or None: 2**len(F) pools, which partition them."""

    def __init__(self, entries: Sequence[Entry], runs: _Forest) -> None:
        self.entries, self.runs = entries, runs
        keys = [e.identity.cross_process_key() for e in entries]
        width = len(_CROSS_PROCESS)
        self.masks = range(1 << width)
        self.known = [sum(1 << f for f, v in enumerate(k) if v is not None) for k in keys]
        self.values = [[tuple(v for f, v in enumerate(k) if m >> f & 1) for m in self.masks] for k in keys]
        self.blocks = [_Forest(len(entries)) for _ in self.masks]
        self.pools: list[dict[tuple[Any, ...], _Pool]] = [{} for _ in self.masks]
        self.ending: list[tuple[float, int]] = []  # heap of (span end, entry) of the active entries

    def leave_before(self, lo: float) -> None:
        """Drop the active entries whose span ends before ``lo`` (they overlap no later entry)."""
        ending = self.ending
        while ending and ending[0][0] < lo:
            j = heapq.heappop(ending)[1]
            rank = self.entries[j].rank
            for m in self.masks:
                pools, values = self.pools[m], self.values[j][m]
                pool = pools[values]
                pool.remove(self.blocks[m].find(j), rank)
                if not pool.blocks:
                    del pools[values]

    def join(self, i: int) -> None:
        """Join entry ``i`` to every active entry of another rank whose identity does not contradict it."""
        m, rank = self.known[i], self.entries[i].rank
        pools, root = self.pools[m], self.runs.find(i)
        for values in itertools.product(*((v, None) for v in self.values[i][m])):
            pool = pools.get(values)
            if pool is not None:
                pool.join(self.runs, self.blocks[m], root, rank)

    def enter(self, i: int, hi: float) -> None:
        """Make entry ``i`` (span end ``hi``) active."""
        rank = self.entries[i].rank
        for m in self.masks:
            pools, values = self.pools[m], self.values[i][m]
            pool = pools.get(values)
            if pool is None:
                pool = pools[values] = _Pool()
            pool.add(i, rank)
        heapq.heappush(self.ending, (hi, i))


def group_runs(entries: Sequence[Entry]) -> list[list[int]]:
    """Indices of ``entries`` per run, runs in time order: entries of different ranks overlapping in time join.

    Two entries join when they are of different ranks, both have a span, the spans overlap (closed ranges:
    touching ends overlap) and ``Identity.conflict(..., same_process=False)`` is None; a run is a connected
    set of such pairs, so two entries of one rank are in one run through a third.

    Without testing every pair: a sweep by span start keeps the *active* entries, those whose span reaches
    the current start, so each overlaps the entry at hand; of every earlier entry that overlaps it, it is
    active. They are pooled by identity (``_Sweep``), and in each pool held in blocks already known to be
    in one run; the entry joins each block of a pool that does not contradict it holding another rank, and
    those blocks become one (the larger block's rank counts absorb the smaller's). Each entry makes one
    block per pool, and a visited block is merged away, so the work is O(n log n) for each of the 2**2
    pools of an identity, whatever the spans, ranks and identities (one run of 10,000 ranks all
    overlapping, the fan-out case, included). A span whose start is after its end (only a damaged
    partial's negative duration makes one) can only join a span covering it: each such span is tested
    directly against the spans that start before its end, O(n) each. A span with a NaN end overlaps
    nothing (nor does a missing span).
    """
    runs = _Forest(len(entries))
    spans: list[tuple[float, float]] = []
    ordered: list[int] = []  # entries with start <= end
    inverted: list[int] = []  # entries with start > end
    for i, e in enumerate(entries):
        span = e.span if e.span is not None else (float("nan"), float("nan"))
        spans.append(span)
        if span[0] <= span[1]:
            ordered.append(i)
        elif span[0] > span[1]:
            inverted.append(i)
        # else a NaN: `<=` with NaN is False, so it overlaps nothing (no span: the same)
    ordered.sort(key=lambda i: spans[i][0])
    sweep = _Sweep(entries, runs)
    for i in ordered:
        sweep.leave_before(spans[i][0])
        sweep.join(i)
        sweep.enter(i, spans[i][1])
    starts = [spans[i][0] for i in ordered]
    for i in inverted:
        a = entries[i]
        for j in ordered[: bisect.bisect_right(starts, spans[i][1])]:  # b.start <= a.end ...
            b = entries[j]
            if (
                spans[i][0] <= spans[j][1]  # ... and a.start <= b.end
                and a.rank != b.rank
                and a.identity.conflict(b.identity, same_process=False) is None
            ):
                runs.union(i, j)
    return _in_time_order(entries, runs)


def _in_time_order(entries: Sequence[Entry], runs: _Forest) -> list[list[int]]:
    """The runs as index lists in index order, by first span start, then first file (ties: first index)."""
    groups: dict[int, list[int]] = {}
    for i in range(len(entries)):
        groups.setdefault(runs.find(i), []).append(i)

    def start(members: list[int]) -> tuple[float, str]:
        spans = [entries[i].span for i in members if entries[i].span is not None]
        first = min((s[0] for s in spans if s is not None), default=float("inf"))
        return (first, entries[members[0]].files[0] if entries[members[0]].files else "")

    return sorted(groups.values(), key=start)


def run_label(files: Sequence[str]) -> str:
    """A run's label: its files, shortened when there are many."""
    names = list(dict.fromkeys(files))
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]} … {names[-1]} ({len(names)} files)"


def run_record(run_id: str, members: Sequence[Entry], spans: Sequence[tuple[float, float] | None]) -> dict[str, Any]:
    files = [f for e in members for f in e.files]
    known = [s for s in spans if s is not None]
    start = min((s[0] for s in known), default=None)
    end = max((s[1] for s in known), default=None)
    return {
        "id": run_id,
        "label": run_label(files),
        "files": files,
        "ranks": [e.label for e in members],
        "start_us": round(start, 3) if start is not None else None,
        "duration_us": round(end - start, 3) if start is not None and end is not None else None,
    }
