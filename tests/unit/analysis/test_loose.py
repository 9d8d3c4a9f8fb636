"""profstack.analysis.loose: the shared accessors for summaries whose shape is not guaranteed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profstack.analysis.loose import at, mapping, number
from profstack.analysis.trim import step_bounds

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(JSONISH)
def test_number_is_finite_float_or_none(value: object) -> None:
    # GIVEN any JSON-like value WHEN read as a number THEN it is a finite float or None, never a bool
    got = number(value)
    if got is None:
        assert isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    else:
        assert isinstance(got, float)
        assert math.isfinite(got)
        assert got == value


def test_number_rejects_bools_and_non_finite() -> None:
    assert [number(v) for v in (True, False, math.nan, math.inf, "1", None)] == [None] * 6
    assert number(3) == 3.0


@given(JSONISH, st.lists(st.text(max_size=3), max_size=4))
def test_at_never_raises(obj: object, path: list[str]) -> None:
    # GIVEN any shape WHEN a path is followed THEN it returns a value or None, never raises
    at(obj, *path)


def test_at_and_mapping_follow_nested_mappings() -> None:
    doc = {"a": {"b": {"c": 5}}, "x": [1]}
    assert at(doc, "a", "b", "c") == 5
    assert at(doc, "x", "y") is None
    assert at(doc) is doc
    assert mapping(doc["a"]) == {"b": {"c": 5}}
    assert mapping([1]) == {}


def test_step_bounds_parses_one_step_and_ranges_only() -> None:
    assert step_bounds("7") == (7, 7)
    assert step_bounds(" 5:10 ") == (5, 10)
    assert step_bounds("10:5") == (10, 5)  # bounds are the callers' to check
    for bad in ("", "a", "1:2:3", "1:", ":2", "1.5"):
        with pytest.raises(ValueError, match=r"."):
            step_bounds(bad)
