"""Interval arithmetic on (start, end) pairs: union, total length, intersection, type partition."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals as a sorted list of disjoint intervals (empty/negative ones dropped)."""
    out: list[Interval] = []
    cur_s = cur_e = 0.0
    have = False
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if not have:
            cur_s, cur_e, have = s, e, True
        elif s <= cur_e:
            cur_e = max(cur_e, e)
        else:
            out.append((cur_s, cur_e))
            cur_s, cur_e = s, e
    if have:
        out.append((cur_s, cur_e))
    return out


def total(merged: Sequence[Interval]) -> float:
    return sum(e - s for s, e in merged)


def intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of the intersection of two merged (sorted, disjoint) interval lists."""
    i = j = 0
    acc = 0.0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            acc += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return acc


def clip(merged: Sequence[Interval], lo: float, hi: float) -> list[Interval]:
    out = []
    for s, e in merged:
        s2, e2 = max(s, lo), min(e, hi)
        if e2 > s2:
            out.append((s2, e2))
    return out


def partition_by_set(groups: Sequence[Sequence[Interval]]) -> dict[int, float]:
    """Time during which exactly the set of groups ``mask`` is active (bit i = group i), per mask.

    Each group must already be merged. Mirrors HTA's overlapping kernel-type breakdown.
    """
    points: list[tuple[float, int]] = []
    for idx, merged in enumerate(groups):
        bit = 1 << idx
        for s, e in merged:
            points.append((s, bit))
            points.append((e, -bit))
    points.sort()
    out: dict[int, float] = {}
    running = 0
    prev_t = 0.0
    for t, delta in points:
        if running > 0 and t > prev_t:
            out[running] = out.get(running, 0.0) + (t - prev_t)
        running += delta
        prev_t = t
    return out
