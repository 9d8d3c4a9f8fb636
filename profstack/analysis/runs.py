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
_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.(?P<ms>\d{13})\.pt\.trace\.json(?:\.gz)?$")


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


def _compatible(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """``Identity.conflict(..., same_process=False) is None`` on two ``cross_process_key()``s."""
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


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


class _Bucket:
    """The active entries of one identity key in the sweep: how many per rank, and per block.

    A block (a tree of ``_Sweep.blocks``, never shared between buckets) is a set of the bucket's entries
    already known to be in one run; its root stays the key here after its own entry leaves, as the run
    still holds the entries counted."""

    __slots__ = ("blocks", "ranks")

    def __init__(self) -> None:
        self.ranks: dict[int, int] = {}
        self.blocks: dict[int, int] = {}


class _Sweep:
    """``group_runs``' sweep over the entries whose span has start <= end, taken by span start."""

    def __init__(self, entries: Sequence[Entry], runs: _Forest) -> None:
        self.entries, self.runs = entries, runs
        self.blocks = _Forest(len(entries))
        self.keys = [e.identity.cross_process_key() for e in entries]
        self.buckets: dict[tuple[Any, ...], _Bucket] = {}
        self.ending: list[tuple[float, int]] = []  # heap of (span end, entry) of the active entries

    def leave_before(self, lo: float) -> None:
        """Drop the active entries whose span ends before ``lo`` (they overlap no later entry)."""
        ending, buckets = self.ending, self.buckets
        while ending and ending[0][0] < lo:
            j = heapq.heappop(ending)[1]
            bucket = buckets[self.keys[j]]
            rank = self.entries[j].rank
            bucket.ranks[rank] -= 1
            if not bucket.ranks[rank]:
                del bucket.ranks[rank]
            root = self.blocks.find(j)
            bucket.blocks[root] -= 1
            if not bucket.blocks[root]:
                del bucket.blocks[root]
            if not bucket.ranks:
                del buckets[self.keys[j]]

    def join(self, i: int) -> None:
        """Join entry ``i`` to every active entry of another rank whose identity does not contradict it."""
        rank, key, buckets = self.entries[i].rank, self.keys[i], self.buckets
        if any(v is None for v in key):
            near = [k for k in buckets if _compatible(key, k)]
        else:
            near = [k for k in itertools.product(*((v, None) for v in key)) if k in buckets]
        for k in near:
            bucket = buckets[k]
            if len(bucket.ranks) > 1:  # one run, holding a rank other than this one
                self.runs.union(i, next(iter(bucket.blocks)))
            elif rank not in bucket.ranks:  # all of one other rank: each block joins, and they are one block
                roots = list(bucket.blocks)
                for root in roots:
                    self.runs.union(i, root)
                for root in roots[1:]:
                    self.blocks.parent[root] = roots[0]
                bucket.blocks = {roots[0]: sum(bucket.blocks.values())}

    def enter(self, i: int, hi: float) -> None:
        """Make entry ``i`` (span end ``hi``) active."""
        key = self.keys[i]
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = _Bucket()
        rank = self.entries[i].rank
        bucket.ranks[rank] = bucket.ranks.get(rank, 0) + 1
        bucket.blocks[i] = 1
        heapq.heappush(self.ending, (hi, i))


def group_runs(entries: Sequence[Entry]) -> list[list[int]]:
    """Indices of ``entries`` per run, runs in time order: entries of different ranks overlapping in time join.

    Two entries join when they are of different ranks, both have a span, the spans overlap (closed ranges:
    touching ends overlap) and ``Identity.conflict(..., same_process=False)`` is None; a run is a connected
    set of such pairs, so two entries of one rank are in one run through a third.

    Near-linear, without testing every pair: a sweep by span start holds the *active* entries (those whose
    span reaches the current start; each overlaps the next entry and every other active one), bucketed by
    identity key (``Identity.cross_process_key``). Among the active entries of one bucket, any two of
    different ranks were joined when the later one arrived, so a bucket holding two or more ranks is all one
    run and a new entry joins it through any one of its entries; a bucket of one other rank is joined block
    by block, after which it is one block. The new entry visits the buckets whose key does not contradict
    its own: for a key without unknowns, the at most 2**len(key) keys equal to it with some fields unknown;
    for a key with an unknown field, every active bucket. So the cost is O(n log n) plus, per entry with an
    unknown world size or backend, the number of distinct identity keys active at its start (a handful in
    practice). A span whose start is after its end (only a damaged partial has one) can only join a span
    that covers it; those are tested directly against the spans that start before its end (O(n) each); a
    span with a NaN end overlaps nothing.
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
