"""Bad input: every case yields a typed error with a one-line message; partial results where sensible."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from profstack.analysis import (
    AnalysisOptions,
    AnalysisResult,
    BytesTraceSource,
    CorruptGzipError,
    DecompressionBombError,
    EmptyTraceError,
    GiantEventError,
    InvalidEventError,
    MalformedJsonError,
    NegativeDurationError,
    NotKinetoError,
    TraceError,
    TruncatedTraceError,
    UnknownThresholdError,
    analyze,
)


def trace(events: list[dict[str, Any]], **top: Any) -> bytes:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events}, indent=2).encode()


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"stream": stream, "correlation": corr, "device": 0}}  # fmt: skip


def launch(ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}  # fmt: skip


def cpu_op(ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def many_events(n: int) -> list[dict[str, Any]]:
    """``n`` launches under their operator, each with its kernel (the CPU side recorded, as Kineto writes it)."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(cpu_op(i * 10.0, 3.0))
        out.append(launch(i * 10.0, 2.0, i + 1))
        out.append(kernel("k", i * 10.0 + 5, 3.0, i + 1))
    return out


def run(data: bytes, name: str = "t.json", **opts: Any) -> AnalysisResult:
    return analyze([BytesTraceSource(data, name=name)], AnalysisOptions(**opts))


def only_error(result: AnalysisResult) -> TraceError:
    assert len(result.errors) == 1, [e.message for e in result.errors]
    err = result.errors[0]
    assert "\n" not in err.message
    assert err.message.startswith(err.source)
    assert result.summary["errors"][0]["error_type"] == type(err.error).__name__
    return err.error


BIG = trace(many_events(3000))


def test_truncated_json_returns_partial_results() -> None:
    # GIVEN a trace cut in the middle WHEN analysed
    result = run(BIG[: len(BIG) // 2])
    # THEN a TruncatedTraceError is recorded, not fatal, and the parsed half is analysed
    err = only_error(result)
    assert isinstance(err, TruncatedTraceError)
    assert not result.complete
    assert not result.errors[0].fatal
    assert 1000 < result.summary["ranks"][0]["counts"]["gpu_kernels"] < 3000
    assert result.summary["inputs"][0]["status"] == "partial"


def test_truncated_gzip_returns_partial_results() -> None:
    # GIVEN a gzip stream cut off WHEN analysed
    packed = gzip.compress(BIG)
    result = run(packed[: len(packed) * 2 // 3], name="t.json.gz")
    # THEN the error names the truncated stream and the decompressed part is analysed
    err = only_error(result)
    assert isinstance(err, TruncatedTraceError)
    assert "gzip" in str(err)
    assert result.summary["ranks"][0]["counts"]["gpu_kernels"] > 0


def test_corrupt_gzip_is_typed() -> None:
    # GIVEN a gzip stream whose deflate data is garbage
    packed = bytearray(gzip.compress(BIG))
    for i in range(20, 400):
        packed[i] ^= 0x5A
    # WHEN analysed THEN CorruptGzipError
    assert isinstance(only_error(run(bytes(packed), name="t.json.gz")), CorruptGzipError)


def test_gzip_bomb_hits_the_budget() -> None:
    # GIVEN 64 MB of zeros-like JSON compressed to a few kB and a 1 MB budget
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (64 << 20) + b"]}")
    result = run(bomb, name="bomb.json.gz", max_decompressed_bytes=1 << 20)
    # THEN DecompressionBombError, fatal, nothing analysed
    err = only_error(result)
    assert isinstance(err, DecompressionBombError)
    assert result.errors[0].fatal
    assert result.failed_all


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"foo": 1}', NotKinetoError),
        (b"[1, 2, 3]", NotKinetoError),
        (b'{"traceEvents": {"a": 1}}', NotKinetoError),
        (b"hello", MalformedJsonError),
        (b"", EmptyTraceError),
        (b'{"traceEvents": []}', EmptyTraceError),
        (trace([{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "x"}}]), EmptyTraceError),
    ],
    ids=["object-without-events", "array", "events-not-array", "not-json", "empty-file", "no-events", "only-meta"],
)
def test_unusable_inputs_are_fatal_and_typed(data: bytes, expected: type[TraceError]) -> None:
    # GIVEN input that is not an analysable Kineto trace WHEN analysed
    result = run(data)
    # THEN the expected typed error, fatal
    assert isinstance(only_error(result), expected)
    assert result.errors[0].fatal
    assert result.failed_all


@pytest.mark.parametrize(
    ("bad_event", "expected"),
    [
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1}, InvalidEventError),
        ({"ph": "X", "cat": "kernel", "name": "k", "dur": 1, "args": {"stream": 7}}, InvalidEventError),
        ({"ph": "X", "cat": "kernel", "name": 5, "ts": 1, "dur": 1}, InvalidEventError),
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -4, "args": {"stream": 7}}, NegativeDurationError),
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1e300, "dur": 1, "args": {"stream": 7}}, InvalidEventError),
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1e300, "args": {"stream": 7}}, InvalidEventError),
    ],
    ids=["ts-string", "ts-missing", "name-int", "negative-dur", "ts-huge", "dur-huge"],
)
def test_bad_events_are_skipped_and_reported(bad_event: dict[str, Any], expected: type[TraceError]) -> None:
    # GIVEN a valid trace with one bad event in the middle
    events = many_events(50)
    events.insert(40, bad_event)
    result = run(trace(events))
    # THEN the bad event is reported (typed, not fatal) and the other 50 kernels are analysed
    err = only_error(result)
    assert isinstance(err, expected)
    assert not result.errors[0].fatal
    assert not result.complete
    assert result.summary["ranks"][0]["counts"]["gpu_kernels"] == 50


def test_ill_typed_args_keep_the_event() -> None:
    # GIVEN a kernel whose args.bytes is a string (ill-typed optional field)
    events = many_events(3)
    events[1]["args"]["bytes"] = "lots"
    # WHEN analysed THEN the kernel still counts (args dropped) and nothing is reported
    result = run(trace(events))
    assert result.summary["ranks"][0]["counts"]["gpu_kernels"] == 3


def test_one_giant_event_is_typed() -> None:
    # GIVEN one event larger than the per-event limit (through its args: a long *name* is cut before the
    # JSON splitter sees it, see test_bounded_names.py)
    data = trace([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"x": [1] * (1 << 20)}}])
    # WHEN analysed with a 1 MB limit THEN GiantEventError
    result = run(data, max_event_bytes=1 << 20)
    assert isinstance(only_error(result), GiantEventError)


def test_control_characters_and_invalid_utf8_are_repaired() -> None:
    # GIVEN raw control characters and invalid UTF-8 inside a name (pytorch#130622), and a >64-bit int
    data = (
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\x01\xffb", "ts": 1, "dur": 2, '
        b'"args": {"Comms Id": 123456789012345678901234567890}},\n'
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 3, "dur": 2, "args": {"stream": "0x0"}}]}'
    )
    # WHEN analysed THEN both events are used
    summary = run(data).summary
    rank = summary["ranks"][0]
    assert rank["counts"]["cpu_ops"] == 1
    assert rank["counts"]["gpu_kernels"] == 1
    assert rank["idle_breakdown"]["per_stream"][0]["stream"] == 0


def test_one_bad_file_among_good_ones() -> None:
    # GIVEN two good ranks and one corrupt file
    good0 = trace(many_events(20), distributedInfo={"rank": 0, "world_size": 2})
    good1 = trace(many_events(25), distributedInfo={"rank": 1, "world_size": 2})
    result = analyze(
        [
            BytesTraceSource(good0, name="a.json"),
            BytesTraceSource(b"\x1f\x8b\x08\x00garbage", name="bad.json.gz"),
            BytesTraceSource(good1, name="b.json"),
        ]
    )
    # THEN the good ranks are analysed and the bad file is listed with its error type
    assert [r["rank"] for r in result.summary["ranks"]] == [0, 1]
    assert not result.complete
    bad = next(i for i in result.summary["inputs"] if i["name"] == "bad.json.gz")
    assert bad["status"] == "failed"
    assert bad["error"]["error_type"] in {"CorruptGzipError", "TruncatedTraceError"}


def test_unknown_threshold_lists_valid_names() -> None:
    # GIVEN a misspelt threshold WHEN building options THEN a typed error listing the valid names
    with pytest.raises(UnknownThresholdError) as info:
        AnalysisOptions(rule_thresholds={"low_gpu_util": 50})
    assert "low_gpu_util_busy_pct" in str(info.value)
    assert "\n" not in str(info.value)


def test_out_of_range_integers_do_not_break_the_columns() -> None:
    # GIVEN a >64-bit correlation id, a pointer-sized stream, a huge byte count and step number
    data = (
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": '
        b'{"correlation": 123456789012345678901234567890, "stream": 99999999999, "bytes": 1e300}},\n'
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 3, "dur": 1, "args": {"stream": "0xffffffffffffffffffff"}},\n'
        b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999999", "ts": 1, "dur": 1}]}'
    )
    # WHEN analysed THEN both kernels count (the first without its args) and nothing crashes
    result = run(data)
    rank = result.summary["ranks"][0]
    assert rank["counts"]["gpu_kernels"] == 2
    assert rank["steps"]["count"] == 0


def test_an_impossible_occupancy_is_ignored_and_the_summary_stays_strict_json() -> None:
    # GIVEN kernels whose "est. achieved occupancy %" is 55, 1e300 and -3
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 10.0 * i, "dur": 5,
         "args": {"stream": 7, "est. achieved occupancy %": occ}}
        for i, occ in enumerate((55, 1e300, -3))
    ]  # fmt: skip
    # WHEN analysed
    summary = run(trace(events)).summary
    # THEN only the percentage counts, and the summary has no Infinity or NaN in it
    occupancy = summary["ranks"][0]["occupancy"]
    assert occupancy["kernels_with_occupancy"] == 1
    assert occupancy["weighted_mean_occupancy_pct"] == 55.0
    json.dumps(summary, allow_nan=False)
