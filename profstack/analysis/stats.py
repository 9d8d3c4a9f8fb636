"""Small statistics helpers (pure Python)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import overload

from profstack.analysis.summary import Histogram

# log-spaced histogram edges in µs; the last bucket is open-ended
HIST_EDGES_US: tuple[float, ...] = (0.0, 1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0)


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (pandas/numpy default)."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def histogram(values: Sequence[float], edges: Sequence[float] = HIST_EDGES_US) -> Histogram:
    """counts[i] = values in [edges[i], edges[i+1]); the last bucket is open-ended, values below edges[0]
    land in the first bucket."""
    counts = [0] * len(edges)
    inner = list(edges[1:])
    pos = bisect.bisect_right
    for v in values:
        counts[pos(inner, v)] += 1
    return {"edges_us": [float(e) for e in edges], "counts": counts}


def sorted_histogram_counts(sorted_values: Sequence[float], edges: Sequence[float] = HIST_EDGES_US) -> list[int]:
    """``histogram(...)["counts"]`` for values already sorted: one bisect per edge instead of per value."""
    counts = [0] * len(edges)
    prev = 0
    for i in range(1, len(edges)):
        cut = bisect.bisect_left(sorted_values, edges[i])
        counts[i - 1] = cut - prev
        prev = cut
    counts[-1] = len(sorted_values) - prev
    return counts


@overload
def r2(x: float) -> float: ...
@overload
def r2(x: float | None) -> float | None: ...
def r2(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0


def pct_or_none(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 3) if whole > 0 else None


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    n = len(values)
    if n == 0:
        return None, None
    m = sum(values) / n
    var = sum((v - m) ** 2 for v in values) / n
    return m, math.sqrt(var)
