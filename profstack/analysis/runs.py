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
        keys = ("process_clock", "worker", "world_size", "backend") if same_process else ("world_size", "backend")
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


def group_runs(entries: Sequence[Entry]) -> list[list[int]]:
    """Indices of ``entries`` per run, runs in time order: entries of different ranks overlapping in time join."""
    n = len(entries)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            a, b = entries[i], entries[j]
            if a.rank == b.rank or a.span is None or b.span is None:
                continue
            overlap = a.span[0] <= b.span[1] and b.span[0] <= a.span[1]
            if overlap and a.identity.conflict(b.identity, same_process=False) is None:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)

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
