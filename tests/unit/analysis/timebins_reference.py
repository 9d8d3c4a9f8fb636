"""``TimeBins``' adding methods as they were before they counted in C (commit 8c93b9c): one Python step per
point and per interval end.

Kept verbatim (grid growth included) as the reference the fast ``add_points`` / ``add_intervals`` must equal
bit for bit (tests/unit/analysis/test_timebins_fast.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence

MAX_BINS = 1024
_START_WIDTH_US = 1.0
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class ReferenceTimeBins:
    """Named series of time bins on one shared, growing grid (µs).

    The grid is a lattice: bin ``k`` covers ``[k * width, (k + 1) * width)`` and ``width`` is a power of two
    (µs); the series hold lattice bins ``first .. first + n - 1``, exactly those the data's extent touches,
    and ``width`` is the smallest that fits the extent in ``MAX_BINS``. So the grid depends only on the data
    added, never on the order or the batches it came in (the streaming and buffered passes agree)."""

    __slots__ = ("first", "hi", "lo", "names", "series", "width")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.width = _START_WIDTH_US
        self.first = 0  # lattice index of series[k][0]
        self.lo = math.inf  # extent of the data added
        self.hi = -math.inf
        self.series: list[list[float]] = [[] for _ in self.names]

    @property
    def origin(self) -> float | None:
        return self.first * self.width if self.lo <= self.hi else None

    @property
    def n(self) -> int:
        return len(self.series[0]) if self.series else 0

    @property
    def empty(self) -> bool:
        return self.origin is None

    def _span(self, w: float) -> tuple[int, int]:
        return math.floor(self.lo / w), math.floor(self.hi / w)

    def _cover(self, lo: float, hi: float) -> None:
        """Grow the grid (left, right, coarser) until [lo, hi] fits."""
        if lo >= self.lo and hi <= self.hi:
            return
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        a, b = self._span(self.width)
        while b - a + 1 > MAX_BINS:
            self._coarsen()
            a, b = self._span(self.width)
        if not self.n:
            self.first = a
            for s in self.series:
                s.extend([0.0] * (b - a + 1))
            return
        left = self.first - a
        right = b - (self.first + self.n - 1)
        for s in self.series:
            if left > 0:
                s[:0] = [0.0] * left
            if right > 0:
                s.extend([0.0] * right)
        if left > 0:
            self.first = a

    def _coarsen(self) -> None:
        """Double the width: lattice bins 2k and 2k + 1 become bin k."""
        new_first = self.first // 2
        for k, s in enumerate(self.series):
            out: list[float] = []
            for i, v in enumerate(s):
                j = (self.first + i) // 2 - new_first
                if j == len(out):
                    out.append(v)
                else:
                    out[j] += v
            self.series[k] = out
        self.first = new_first
        self.width *= 2

    def add_interval(self, k: int, lo: float, hi: float) -> None:
        """Add the busy time of [lo, hi] to series ``k``, split over the bins it covers."""
        if not hi > lo:
            return
        self._cover(lo, hi)
        s, w, f = self.series[k], self.width, self.first
        o = f * w
        i = min(max(math.floor(lo / w) - f, 0), len(s) - 1)
        j = min(max(math.floor(hi / w) - f, 0), len(s) - 1)
        if i == j:
            s[i] += hi - lo
            return
        s[i] += o + (i + 1) * w - lo
        for b in range(i + 1, j):
            s[b] += w
        s[j] += hi - (o + j * w)

    def add_intervals(self, k: int, spans: Iterable[tuple[float, float]]) -> None:
        """``add_interval`` for many: the grid grows once, then one tight loop."""
        pairs = [(lo, hi) for lo, hi in spans if hi > lo]
        if not pairs:
            return
        self._cover(min(map(_FIRST, pairs)), max(map(_SECOND, pairs)))
        s, w, f = self.series[k], self.width, self.first
        last = len(s) - 1
        floor = math.floor
        for lo, hi in pairs:
            i = floor(lo / w) - f
            j = floor(hi / w) - f
            i = 0 if i < 0 else last if i > last else i
            j = 0 if j < 0 else last if j > last else j
            if i == j:
                s[i] += hi - lo
                continue
            s[i] += (f + i + 1) * w - lo
            for b in range(i + 1, j):
                s[b] += w
            s[j] += hi - (f + j) * w

    def add_points(self, k: int, points: Sequence[float], weight: float = 1.0) -> None:
        if not points:
            return
        self._cover(min(points), max(points))
        s, w, f = self.series[k], self.width, self.first
        last = len(s) - 1
        floor = math.floor
        for t in points:
            b = floor(t / w) - f
            s[0 if b < 0 else b if b <= last else last] += weight
