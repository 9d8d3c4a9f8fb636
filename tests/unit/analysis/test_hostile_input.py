"""Hostile input to the engine (#33 item 5): names crafted to collide in the reader's string cache, nesting deep
enough to exhaust a recursive decoder. Bounded cost and a clear, per-event answer, native and Python alike."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze, native
from profstack.analysis.sources import BytesTraceSource
from tests.unit.analysis.neutral import engine_neutral

NATIVE = pytest.mark.skipif(native.backend() != "c", reason="the C reader is not built here")


def _trace(names: int) -> bytes:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op-{i:06d}-{'x' * 24}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
        for i in range(names)
    ]
    return json.dumps({"traceEvents": events}).encode()


@pytest.fixture
def degenerate() -> Iterator[object]:
    from profstack.analysis import _gpuaccel  # type: ignore[attr-defined]

    _gpuaccel._test_degenerate_hash(True)
    try:
        yield _gpuaccel
    finally:
        _gpuaccel._test_degenerate_hash(False)


def _summary(data: bytes) -> dict[str, object]:
    summary = dict(analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions()).summary)
    summary.pop("generator", None)
    return summary


@NATIVE
def test_names_that_all_collide_cost_a_bounded_probe_and_give_the_same_summary(degenerate: object) -> None:
    # GIVEN every name hashing alike in the reader's string cache (what names crafted against a fixed, unkeyed
    # hash did: 187 s of CPU for a 100 MB trace against 2.9 s for random names)
    data = _trace(20_000)
    flooded = _summary(data)
    stats = degenerate._cache_stats()  # type: ignore[attr-defined]
    # THEN no lookup walked more than the cap (before: up to every name of the file), the batches beyond it were
    # read by msgspec instead, and the summary is the one an ordinary run gives
    assert stats["max_probe"] <= stats["max_probes"]
    assert stats["declined"] > 0
    degenerate._test_degenerate_hash(False)  # type: ignore[attr-defined]
    assert flooded == _summary(data)


def _nested_trace(depth: int) -> bytes:
    good = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(50)
    ]
    deep = '{"ph":"X","cat":"cpu_op","name":"deep","pid":1,"tid":1,"ts":1000,"dur":5,"junk":' + "[" * depth
    deep += "]" * depth + "}"
    body = ",".join(json.dumps(e) for e in good[:25]) + "," + deep + "," + ",".join(json.dumps(e) for e in good[25:])
    return ('{"traceEvents":[' + body + "]}").encode()


@pytest.mark.parametrize("accel", ["native", "python"])
def test_one_event_nested_beyond_the_decoders_reach_is_left_out_not_the_whole_file(
    accel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a trace with one event carrying an unknown field nested 5,000 levels deep among 50 ordinary ones
    if accel == "python":
        monkeypatch.setattr(native, "ACCEL", None)
    data = _nested_trace(5_000)
    # WHEN analysed (before: msgspec's RecursionError escaped the parser and the whole file was an internal error)
    summary = analyze([BytesTraceSource(data, name="deep.json")], AnalysisOptions()).summary
    # THEN the file is read, the 50 other events counted, and the one event is named as left out
    (item,) = summary["inputs"]
    assert item["events"] >= 50
    assert item["status"] != "failed"
    assert "nested deeper" in json.dumps(summary)


@NATIVE
def test_a_subnormal_bin_width_is_declined_never_cast_from_nan() -> None:
    from array import array

    from profstack.analysis import _gpuaccel  # type: ignore[attr-defined]

    # GIVEN a bin width whose reciprocal overflows (before: inf * 0 gave NaN, cast to an integer: undefined)
    series = [0.0] * 4
    # THEN the C loop declines and leaves the series as it was; an ordinary width is still added
    assert _gpuaccel.bins_add(series, 5e-324, 0, array("d", [1.0]), array("d", [2.0])) is NotImplemented
    assert series == [0.0] * 4
    assert _gpuaccel.bins_add(series, 1.0, 0, array("d", [1.0]), array("d", [2.5])) is None
    assert series == [0.0, 1.0, 0.5, 0.0]


# --- a bounded fuzz run: mutated real traces, C against Python (make sanitize runs it under ASan/UBSan too) -----

_SEED_TRACE = json.dumps(
    {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 7,
                "ts": 10,
                "dur": 5,
                "args": {"External id": 3, "Input type": ["float", "float"]},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 7,
                "ts": 11,
                "dur": 2,
                "args": {"correlation": 9, "External id": 3},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "sgemm_128x64",
                "pid": 0,
                "tid": 7,
                "ts": 14,
                "dur": 4,
                "args": {"correlation": 9, "stream": 7, "device": 0},
            },
            {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 14, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 7, "ts": 9, "dur": 20},
        ]
    }
).encode()


def _engine_summary(data: bytes) -> str:
    try:
        summary = analyze([BytesTraceSource(data, name="fuzz.json")], AnalysisOptions()).summary
    except Exception as exc:
        return f"raised {type(exc).__name__}"
    return json.dumps(engine_neutral(summary), sort_keys=True, default=str)


@NATIVE
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(["flip", "insert", "delete", "cut"]),
            st.integers(0, len(_SEED_TRACE)),
            st.binary(min_size=1, max_size=8),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_fuzz_mutated_traces_end_the_same_with_either_engine(edits: list[tuple[str, int, bytes]]) -> None:
    # GIVEN a real-shaped trace mutated at the byte level (flips, inserts, deletes, a truncation)
    data = bytearray(_SEED_TRACE)
    for kind, offset, blob in edits:
        at = min(offset, len(data))
        if kind == "flip" and data:
            data[min(at, len(data) - 1)] ^= blob[0] or 1
        elif kind == "insert":
            data[at:at] = blob
        elif kind == "delete":
            del data[at : at + len(blob)]
        else:
            del data[at:]
    # THEN the C reader and the Python path agree exactly: the same summary, or the same kind of error
    with_c = _engine_summary(bytes(data))
    python = native.ACCEL
    try:
        native.ACCEL = None
        with_python = _engine_summary(bytes(data))
    finally:
        native.ACCEL = python
    assert with_c == with_python
