"""Activity over time in bounded memory: series of time bins whose width doubles as the covered span grows.

``TimeBins`` holds ``MAX_BINS`` bins per series, all series sharing one grid (origin, width). Values are
added as intervals (busy time, split over the bins they cover) or points (counts). When an addition falls
outside the grid, bins are added on that side; when the grid would exceed ``MAX_BINS``, neighbouring bins
are summed pairwise and the width doubles, so memory is fixed and the resolution is at least
span / ``MAX_BINS``. ``resample`` maps the bins onto an output grid (e.g. the analysed window in 100 bins),
splitting a bin's value by overlap: exact for interval series, proportional for counts.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import repeat
from math import floor
from operator import ge, mul

from profstack.analysis import native

MAX_BINS = 1024
_START_WIDTH_US = 1.0
_EXACT_BIN = 2**52  # |bin index| below this: (b + 1) * width is an exact float
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class TimeBins:
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
        """``add_interval`` for many (pairs): the grid grows once, then one tight loop."""
        pairs = [p for p in spans if p[1] > p[0]]
        if pairs:
            self._add(k, list(map(_FIRST, pairs)), list(map(_SECOND, pairs)))

    def add_spans(self, k: int, starts: Sequence[float], ends: Sequence[float]) -> None:
        """``add_intervals(k, zip(starts, ends))`` without a tuple per interval (columns in, e.g. ``Merged``)."""
        if len(starts) != len(ends):
            raise ValueError(f"{len(starts)} starts but {len(ends)} ends")
        if not starts:
            return
        if any(map(ge, starts, ends)):  # some are empty: skip them, as add_interval does (rare)
            self.add_intervals(k, zip(starts, ends, strict=True))
            return
        self._add(k, starts, ends)

    def _add(self, k: int, starts: Sequence[float], ends: Sequence[float]) -> None:
        """Add non-empty intervals ``[starts[i], ends[i]]`` in order, each exactly as ``add_interval`` would.

        The grid grows once; the bins of all ends are found in C (``floor(t * 2**-p)``: the width is a power
        of two, so the product is exactly the quotient); then one loop adds each interval's time."""
        self._cover(min(starts), max(ends))
        s, w, f = self.series[k], self.width, self.first
        accel = native.ACCEL
        if accel is not None and accel.bins_add(s, w, f, starts, ends) is not NotImplemented:
            return  # the loop below, in C (profstack/analysis/csrc/), the same additions in the same order
        last = len(s) - 1
        inv = repeat(1.0 / w)
        firsts = map(floor, map(mul, starts, inv))
        lasts = map(floor, map(mul, ends, inv))
        hi_bin = f + last
        for lo, hi, bin_lo, bin_hi in zip(starts, ends, firsts, lasts, strict=True):
            if bin_lo == bin_hi and f <= bin_lo <= hi_bin:  # within one bin of the grid: nearly every interval
                s[bin_lo - f] += hi - lo
                continue
            i, j = bin_lo - f, bin_hi - f
            i = 0 if i < 0 else last if i > last else i
            j = 0 if j < 0 else last if j > last else j
            if i == j:
                s[i] += hi - lo
                continue
            s[i] += (f + i + 1) * w - lo
            for b in range(i + 1, j):
                s[b] += w
            s[j] += hi - (f + j) * w

    def add_points(self, k: int, points: Sequence[float]) -> None:
        """Count each point in its bin ``floor(t / width)``.

        Sorted once (in C; a batch's points come nearly in order), each bin's count is the difference of two
        bisections at its lattice edges ``b * width`` (exact: the width is a power of two and ``b`` below
        2**52), so the Python work is per bin, not per point. A bin gets its count in one addition: a points
        series holds whole numbers, so this equals adding 1 per point."""
        if not points:
            return
        ordered = sorted(points)
        self._cover(ordered[0], ordered[-1])
        s, w, f = self.series[k], self.width, self.first
        last = len(s) - 1
        b, b_hi = floor(ordered[0] / w), floor(ordered[-1] / w)
        if max(-b, b_hi) >= _EXACT_BIN:  # bin edges no longer exact floats (hostile times only): one by one
            for t in ordered:
                i = floor(t / w) - f
                s[0 if i < 0 else i if i <= last else last] += 1
            return
        done, n = 0, len(ordered)
        while done < n:  # at most one step per bin of the grid (<= MAX_BINS) plus one per non-empty bin
            upto = n if b >= b_hi else bisect_left(ordered, (b + 1) * w, done)
            if upto > done:
                i = b - f
                s[0 if i < 0 else i if i <= last else last] += upto - done
                done = upto
                b += 1
            else:  # this bin is empty: go to the next point's
                b = max(b + 1, floor(ordered[done] / w))

    def merge(self, other: TimeBins, shift: float = 0.0) -> None:
        """Add another grid's series (same names), its clock moved by ``shift`` µs."""
        base = other.origin
        if base is None:
            return
        for k in range(len(self.names)):
            for b, v in enumerate(other.series[k]):
                if v:
                    lo = base + shift + b * other.width
                    self._add_spread(k, lo, lo + other.width, v)

    def _add_spread(self, k: int, lo: float, hi: float, value: float) -> None:
        """Add ``value`` spread evenly over [lo, hi]."""
        self._cover(lo, hi)
        s, w, f = self.series[k], self.width, self.first
        o = f * w
        span = hi - lo
        i = min(max(math.floor(lo / w) - f, 0), len(s) - 1)
        j = min(max(math.floor(hi / w) - f, 0), len(s) - 1)
        for b in range(i, j + 1):
            a, z = max(lo, o + b * w), min(hi, o + (b + 1) * w)
            if z > a:
                s[b] += value * (z - a) / span

    def integral(self, k: int, starts: Sequence[float], ends: Sequence[float]) -> float:
        """Series ``k``'s value over the intervals ``[starts[i], ends[i]]`` (disjoint, e.g. a ``Merged``), each bin's
        value taken as spread evenly over its width: exact for intervals made of whole bins, otherwise the bin's
        average (the resolution is ``width``). Time outside the grid holds nothing."""
        o = self.origin
        if o is None:
            return 0.0
        s, w = self.series[k], self.width
        last = len(s) - 1
        total = 0.0
        for lo, hi in zip(starts, ends, strict=True):
            if not hi > lo:
                continue
            i = max(math.floor((lo - o) / w), 0)
            j = min(math.floor((hi - o) / w), last)
            for b in range(i, j + 1):
                a0 = o + b * w
                x0, x1 = max(lo, a0), min(hi, a0 + w)
                if x1 > x0:
                    total += s[b] * (x1 - x0) / w
        return total

    def resample(self, k: int, lo: float, hi: float, n: int) -> list[float]:
        """Series ``k`` on ``n`` equal bins over [lo, hi] (each source bin split by overlap)."""
        out = [0.0] * n
        o = self.origin
        if o is None or not hi > lo or n <= 0:
            return out
        ow = (hi - lo) / n
        w = self.width
        for b, v in enumerate(self.series[k]):
            if not v:
                continue
            a0, a1 = o + b * w, o + (b + 1) * w
            if a1 <= lo or a0 >= hi:
                continue
            i = max(int((a0 - lo) / ow), 0)
            j = min(int((a1 - lo) / ow), n - 1)
            for c in range(i, j + 1):
                x0, x1 = max(a0, lo + c * ow), min(a1, lo + (c + 1) * ow)
                if x1 > x0:
                    out[c] += v * (x1 - x0) / w
        return out
