"""The C-counted ``TimeBins.add_points`` / ``add_intervals`` equal the one-step-per-value reference bit for bit."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis.timebins import MAX_BINS, TimeBins
from tests.unit.analysis.timebins_reference import ReferenceTimeBins

# times as Kineto writes them (µs, ns decimals), around 0 (relative clocks) and far from it (epoch µs), plus
# exact bin edges (multiples of powers of two), where floor(t / w) and floor(t * (1 / w)) could first differ
_edge = st.builds(lambda m, p: m * 2.0**p, st.integers(-(2**20), 2**20), st.integers(-4, 40))
# (times within 1e-6 of zero are left out: with a hostile 1e300 µs in the grid, floor(t / width) of such a time
# underflows to -0.0 in the reference, which bins a tiny negative time at 0; the bisection compares exactly)
_time = st.one_of(
    st.floats(-1e7, 1e7, allow_nan=False, allow_infinity=False).filter(lambda t: t == 0 or abs(t) >= 1e-6),
    st.floats(1.6e15, 1.9e15, allow_nan=False, allow_infinity=False),
    _edge,
    # hostile CPU-op times (the parser bounds GPU ops, not CPU starts): bins beyond exact float edges
    st.floats(2.0**52, 1e300, allow_nan=False, allow_infinity=False),
)
_length = st.one_of(
    st.floats(-5.0, 5.0, allow_nan=False),  # zero and negative lengths are skipped
    st.floats(0.0, 1e6, allow_nan=False),
    st.floats(0.0, 1e12, allow_nan=False),  # spans many bins
)
_points = st.lists(_time, max_size=300)
_intervals = st.lists(st.tuples(_time, _length).map(lambda p: (p[0], p[0] + p[1])), max_size=300)
# a sequence of additions, each to series 0 or 1: the grid grows and coarsens between them
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("points"), st.integers(0, 1), _points),
        st.tuples(st.just("intervals"), st.integers(0, 1), _intervals),
        st.tuples(st.just("interval"), st.integers(0, 1), st.tuples(_time, _length)),
        st.tuples(st.just("spans"), st.integers(0, 1), _intervals),
    ),
    min_size=1,
    max_size=8,
)


def _apply(tb: Any, ops: list[tuple[str, int, Any]]) -> None:
    for op, k, arg in ops:
        if op == "points":
            tb.add_points(k, arg)
        elif op == "intervals":
            tb.add_intervals(k, iter(arg))  # callers pass generators and zips: consumed once
        elif op == "spans":  # columns in: the fast grid's own entry, the reference gets the pairs
            if isinstance(tb, TimeBins):
                tb.add_spans(k, array("d", (lo for lo, _ in arg)), [hi for _, hi in arg])
            else:
                tb.add_intervals(k, arg)
        else:
            lo, length = arg
            tb.add_interval(k, lo, lo + length)


def _state(tb: Any) -> tuple[Any, ...]:
    return (tb.first, tb.width, tb.lo, tb.hi, [list(s) for s in tb.series])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_fast_additions_equal_the_reference_bit_for_bit(ops: list[tuple[str, int, Any]]) -> None:
    # GIVEN the same additions on the fast grid and on the reference one
    fast, ref = TimeBins(("a", "b")), ReferenceTimeBins(("a", "b"))
    # WHEN both take them
    _apply(fast, ops)
    _apply(ref, ops)
    # THEN grid and every bin are identical (== on floats: no tolerance)
    assert _state(fast) == _state(ref)
    assert fast.n <= MAX_BINS


def test_points_on_bin_edges_land_in_their_lattice_bin() -> None:
    # GIVEN a grid that had to coarsen: [0, 4096] µs in at most 1024 bins is 8 µs bins
    tb = TimeBins(("busy", "cpu_ops"))
    tb.add_interval(0, 0.0, 4096.0)
    assert (tb.width, tb.first, tb.n) == (8.0, 0, 513)
    # WHEN points fall on the first edge, on an inner edge twice, just below an edge and on the last edge
    tb.add_points(1, [0.0, 8.0, 8.0, 15.999, 4096.0])
    # THEN each lands in its bin [k w, (k + 1) w), nothing lost or doubled
    counts = tb.series[1]
    assert (counts[0], counts[1], counts[512]) == (1.0, 3.0, 1.0)
    assert sum(counts) == 5.0


def test_an_empty_or_all_empty_addition_leaves_no_grid() -> None:
    # GIVEN nothing to add, and intervals that are all empty
    tb = TimeBins(("x",))
    tb.add_points(0, [])
    tb.add_intervals(0, [(5.0, 5.0), (7.0, 6.0)])
    # THEN no grid exists yet
    assert tb.empty
    assert tb.n == 0


@pytest.mark.parametrize("bad", [float("inf"), -float("inf")])
def test_an_infinite_time_raises_like_the_reference(bad: float) -> None:
    # GIVEN a point at infinity (the parser drops these before they get here)
    fast, ref = TimeBins(("x",)), ReferenceTimeBins(("x",))
    # THEN both refuse it the same way instead of binning it somewhere
    with pytest.raises(OverflowError):
        ref.add_points(0, [1.0, bad])
    with pytest.raises(OverflowError):
        fast.add_points(0, [1.0, bad])


def test_spans_of_unequal_length_are_refused() -> None:
    # GIVEN columns that do not pair up (a caller's bug)
    tb = TimeBins(("x",))
    # THEN nothing is added silently
    with pytest.raises(ValueError, match="3 starts but 2 ends"):
        tb.add_spans(0, [1.0, 2.0, 3.0], [4.0, 5.0])
    assert tb.empty
