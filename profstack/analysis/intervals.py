"""Interval arithmetic on compact columns: union, total length, intersection, type partition."""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Iterable, Iterator, Sequence

from profstack.analysis import native


class Merged:
    """Sorted, disjoint intervals stored as two float columns (a few bytes per interval)."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: array[float] = array("d")
        self.ends: array[float] = array("d")

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self.starts, self.ends, strict=True)

    def add_sorted(self, s: float, e: float) -> None:
        """Append an interval whose start is >= every start added before (merging on overlap)."""
        if e <= s:
            return
        if self.ends and s <= self.ends[-1]:
            self.ends[-1] = max(self.ends[-1], e)
        else:
            self.starts.append(s)
            self.ends.append(e)

    @property
    def lo(self) -> float:
        return self.starts[0]

    @property
    def hi(self) -> float:
        return self.ends[-1]


def merge(intervals: Iterable[tuple[float, float]]) -> Merged:
    """Union of intervals (empty/negative ones dropped)."""
    out = Merged()
    starts, ends = out.starts, out.ends
    add_start, add_end = starts.append, ends.append
    for s, e in sorted(intervals):  # Merged.add_sorted, inlined
        if e <= s:
            continue
        if ends and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            add_start(s)
            add_end(e)
    return out


def merge_columns(starts: array[float], durs: array[float]) -> Merged:
    """``merge`` of the intervals ``[starts[i], starts[i] + durs[i])`` of two columns: in C where it is built
    (``union_spans``: 16 bytes an interval while it sorts, where the tuples of ``merge`` cost ~110: 46 MB for the
    400K host syncs of a 4 GB trace)."""
    cols = Merged()
    cols.starts = starts if starts.typecode == "d" else array("d", starts)
    cols.ends = array("d", map(operator.add, starts, durs))
    return _sort_and_sweep([cols])


def union(sets: Sequence[Merged]) -> Merged:
    """Union of merged sets: ``merge`` of all their intervals; one non-empty set is its own union."""
    nonempty = [m for m in sets if len(m)]
    if len(nonempty) == 1:
        return nonempty[0]
    return _sort_and_sweep(nonempty)


def _sort_and_sweep(sets: list[Merged]) -> Merged:
    """``merge`` of the intervals of ``sets``, sorted or not: the same sort and sweep in C where it is built
    (profstack/analysis/csrc/'s ``union_spans``; endpoints are copied), else in Python."""
    accel = native.ACCEL
    if accel is not None:
        r = accel.union_spans(sets)
        if r is not NotImplemented:
            out = Merged()
            out.starts, out.ends = r
            return out
    return merge(itertools.chain.from_iterable(sets))


def total(merged: Merged) -> float:
    # per-interval differences: summing absolute timestamps (~1e15 us) first would lose precision
    return sum(e - s for s, e in zip(merged.starts, merged.ends, strict=True))


def intersection_length(a: Merged, b: Merged) -> float:
    """Length of the intersection of two merged interval sets."""
    i = j = 0
    acc = 0.0
    a_s, a_e, b_s, b_e = a.starts, a.ends, b.starts, b.ends
    na, nb = len(a_s), len(b_s)
    while i < na and j < nb:
        s = max(a_s[i], b_s[j])
        e = min(a_e[i], b_e[j])
        if e > s:
            acc += e - s
        if a_e[i] < b_e[j]:
            i += 1
        else:
            j += 1
    return acc


def partition_by_set(groups: Sequence[Merged]) -> dict[int, float]:
    """Time during which exactly the set of groups ``mask`` is active (bit i = group i), per mask.

    Mirrors HTA's overlapping kernel-type breakdown. At equal times an end sorts before a start.
    """
    out: dict[int, float] = {}
    active = [g for g in groups if len(g)]
    if len(active) == 1:  # one group: no overlap to resolve
        g = active[0]
        return {1 << groups.index(g): total(g)}
    accel = native.ACCEL
    if accel is not None:  # the same sorted sweep in C, the same additions in the same order
        pairs = accel.partition(list(groups))
        if pairs is not NotImplemented:
            return dict(pairs)
    points: list[tuple[float, int]] = []
    for i, g in enumerate(groups):
        bit = 1 << i
        points.extend(zip(g.starts, itertools.repeat(bit)))
        points.extend(zip(g.ends, itertools.repeat(-bit)))
    points.sort()
    running = 0
    prev_t = 0.0
    get = out.get
    for t, delta in points:
        if running > 0 and t > prev_t:
            out[running] = get(running, 0.0) + (t - prev_t)
        running += delta
        prev_t = t
    return out
