"""LaunchJoin.add with the C accelerator (``_gpuaccel.join_launches``) against its Python steps, bit for bit."""

from __future__ import annotations

import importlib
import math
import os
import shutil
from array import array
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import native
from profstack.analysis.gpu import LaunchGaps, LaunchJoin, StreamingAbort


def _import_c() -> ModuleType | None:
    try:
        return importlib.import_module("profstack.analysis._gpuaccel")
    except ImportError:
        return None


C = _import_c()
needs_c = pytest.mark.skipif(C is None, reason="profstack.analysis._gpuaccel is not built (make install)")


def _bits(x: Any) -> Any:
    """A form that tells int from float, -0.0 from 0.0 and keeps NaN equal to itself and dict order."""
    if isinstance(x, bool | int):
        return ("int", int(x))
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, complex):
        return ("complex", x.real.hex(), x.imag.hex())
    if x is None:
        return None
    if isinstance(x, dict):
        return ("dict", [(_bits(k), _bits(v)) for k, v in x.items()])
    if isinstance(x, set):
        return ("set", sorted(map(repr, x)))
    if isinstance(x, LaunchGaps):
        return ("gaps", x.kernels, x.at_stop, x.maybe_empty)
    raise TypeError(type(x))


def state(j: LaunchJoin) -> dict[str, Any]:
    return {k: _bits(getattr(j, k)) for k in vars(j)}


def run(batches: list[tuple[list[int], list[float], list[float]]], unjoined: list[int], cap: int | None, c: Any) -> Any:
    j = LaunchJoin(cap)
    j.unjoined.update(unjoined)
    raised = None
    old = native.ACCEL
    native.ACCEL = c
    try:
        for corrs, starts, durs in batches:
            j.add(array("q", corrs), array("d", starts), array("d", durs))
    except StreamingAbort as exc:
        raised = str(exc)
    finally:
        native.ACCEL = old
    return state(j), raised


_time = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 1e300, -1e300, 2.0**53, 0.5]))
_dur = st.one_of(st.floats(0, 1e4), st.sampled_from([math.nan, -1.0, -3.5, 1e300, -0.0, 0.0]))
_batch = st.lists(st.tuples(st.integers(0, 40), _time, _dur), max_size=30).map(
    lambda rows: ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
)


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(_batch, min_size=1, max_size=5),
    unjoined=st.lists(st.integers(0, 60), max_size=3),
    cap=st.sampled_from([None, 2, 5, 1000]),
)
def test_c_join_leaves_the_state_python_leaves(batches: Any, unjoined: list[int], cap: int | None) -> None:
    # GIVEN batches of launches (repeated ids, NaN and negative encoded durations, huge times), some ids
    # already analysed without a launch, bounded or not
    # WHEN each is added with the C step and with the Python step
    c = run(batches, unjoined, cap, C)
    py = run(batches, unjoined, cap, None)
    # THEN the join's every field (bit for bit, dict order included) and any StreamingAbort are the same
    assert c == py


@needs_c
def test_c_join_reports_a_late_launch_after_updating_what_python_updates() -> None:
    # GIVEN a join that already analysed op 7 without a launch
    # WHEN a batch brings the launch of 7
    c = run([([3, 7], [5.0, 1.0], [2.0, 1.0])], [7], None, C)
    py = run([([3, 7], [5.0, 1.0], [2.0, 1.0])], [7], None, None)
    # THEN both raise the same, with first_ts / last_end / count updated and no launch stored
    assert c == py
    assert c[1] == "the launch of correlation 7 came after its GPU op was analysed"
    assert c[0]["launches"] == ("dict", [])
    assert c[0]["count"] == ("int", 2)


@needs_c
def test_c_join_declines_columns_of_another_type() -> None:
    # GIVEN launch starts as float32 (not what consume writes)
    j = LaunchJoin(None)
    before = state(j)
    # WHEN the C step is asked THEN it declines and changes nothing
    assert C.join_launches(j, array("q", [1]), array("f", [1.0]), array("d", [1.0])) is NotImplemented
    assert state(j) == before


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI only: elsewhere the Python loops are a supported setup")
def test_ci_builds_and_uses_the_c_module() -> None:
    # GIVEN CI (make test ran make install) on a machine with a C compiler
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this CI machine")
    # THEN the accelerator was built, so the differential tests above ran instead of skipping
    assert C is not None
    assert native.backend() == "c"
