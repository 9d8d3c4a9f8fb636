"""Launch-delay distribution in bounded memory: exact up to a sample limit, then a log-bucket sketch.

The sketch is DDSketch's scheme (bucket i holds |v| in (γ^(i-1), γ^i], γ = (1+α)/(1-α)): every quantile
it returns is within relative error α of a true sample value at that rank. Counts over cutoffs, the
histogram, mean and max stay exact in both modes.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from profstack.analysis.stats import HIST_EDGES_US, quantile, sorted_histogram_counts

_TINY_US = 1e-9  # |v| below this is counted as zero


@dataclass(frozen=True)
class DelaySummary:
    count: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    over: list[int]  # count above each cutoff
    hist: list[int]  # counts per histogram bucket
    method: str  # "exact", or the sketch and its error bound


class DelayDistribution:
    """Streaming summary of launch delays (µs, may be negative)."""

    def __init__(
        self,
        cutoffs: Sequence[float],
        *,
        edges: Sequence[float] = HIST_EDGES_US,
        exact_limit: int = 1 << 16,
        relative_accuracy: float = 1e-3,
    ) -> None:
        if not 0 < relative_accuracy < 1:
            raise ValueError("relative_accuracy must be in (0, 1)")
        self.cutoffs = tuple(cutoffs)
        self.edges = tuple(edges)
        self.exact_limit = exact_limit
        self.relative_accuracy = relative_accuracy
        self._gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
        self._log_gamma = math.log(self._gamma)
        self._buf: array[float] = array("d")
        self._sketched = False
        self._pos: dict[int, int] = {}
        self._neg: dict[int, int] = {}
        self._zero = 0
        self.count = 0
        self.total = 0.0
        self.max = -math.inf
        self.over = [0] * len(self.cutoffs)
        self.hist = [0] * len(self.edges)

    def extend(self, values: array[float]) -> None:
        self._buf.extend(values)
        if len(self._buf) >= self.exact_limit:
            self._sketched = True
            self._spill()

    def _bucket(self, v: float) -> int:
        return math.ceil(math.log(v) / self._log_gamma)

    def _spill(self) -> None:
        """Fold the buffered values into the exact counters and the sketch, then drop them."""
        vals = sorted(self._buf)
        self._buf = array("d")
        self._account(vals)
        n = len(vals)
        z0 = bisect.bisect_left(vals, -_TINY_US)
        z1 = bisect.bisect_right(vals, _TINY_US, z0)
        self._zero += z1 - z0
        # positives ascending: one bisect per bucket touched, not per value
        i = z1
        while i < n:
            b = self._bucket(vals[i])
            upper = self._gamma**b
            j = bisect.bisect_right(vals, upper, i)
            if j == i:  # rounding put vals[i] just above γ^b
                b += 1
                j = bisect.bisect_right(vals, self._gamma**b, i)
            self._pos[b] = self._pos.get(b, 0) + (j - i)
            i = j
        # negatives: walk from -0 towards -inf, i.e. descending index from z0-1
        j = z0
        while j > 0:
            b = self._bucket(-vals[j - 1])
            lower = -(self._gamma**b)
            i = bisect.bisect_left(vals, lower, 0, j)
            if i == j:
                b += 1
                i = bisect.bisect_left(vals, -(self._gamma**b), 0, j)
            self._neg[b] = self._neg.get(b, 0) + (j - i)
            j = i

    def _account(self, sorted_vals: Sequence[float]) -> None:
        n = len(sorted_vals)
        if not n:
            return
        self.count += n
        self.total += math.fsum(sorted_vals)
        self.max = max(self.max, sorted_vals[-1])
        over, hist = self._counts(sorted_vals)
        self.over = [a + b for a, b in zip(self.over, over, strict=True)]
        self.hist = [a + b for a, b in zip(self.hist, hist, strict=True)]

    def _counts(self, sorted_vals: Sequence[float]) -> tuple[list[int], list[int]]:
        """Values above each cutoff, and histogram counts (``stats.histogram``'s buckets)."""
        n = len(sorted_vals)
        over = [n - bisect.bisect_right(sorted_vals, c) for c in self.cutoffs]
        return over, sorted_histogram_counts(sorted_vals, self.edges)

    def summary(self) -> DelaySummary:
        """count, mean, p50/p95/p99, max, over-cutoff counts, histogram and the quantile method."""
        if not self._sketched:
            vals = sorted(self._buf)
            count = len(vals)
            over, hist = self._counts(vals)
            return DelaySummary(
                count=count,
                mean=math.fsum(vals) / count if count else None,
                p50=quantile(vals, 0.5),
                p95=quantile(vals, 0.95),
                p99=quantile(vals, 0.99),
                max=vals[-1] if vals else None,
                over=over,
                hist=hist,
                method="exact",
            )
        if self._buf:
            self._spill()
        return DelaySummary(
            count=self.count,
            mean=self.total / self.count,
            p50=self._quantile(0.5),
            p95=self._quantile(0.95),
            p99=self._quantile(0.99),
            max=self.max,
            over=list(self.over),
            hist=list(self.hist),
            method=f"sketch (relative error <= {self.relative_accuracy:g})",
        )

    def _quantile(self, q: float) -> float:
        rank = math.floor(q * (self.count - 1))
        seen = 0
        g = self._gamma
        for b in sorted(self._neg, reverse=True):
            seen += self._neg[b]
            if seen > rank:
                return -2 * g**b / (g + 1)
        seen += self._zero
        if seen > rank:
            return 0.0
        for b in sorted(self._pos):
            seen += self._pos[b]
            if seen > rank:
                return min(2 * g**b / (g + 1), self.max)
        return self.max
