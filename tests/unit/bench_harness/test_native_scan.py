"""bench.native_scan: the C scan's numbers count only when it read the same events msgspec reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import native_scan

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="the probe needs a C compiler"
)

# strings with escaped quotes and backslashes, \u escapes, nested args, string pids, exponents, compact and
# CRLF-spaced objects, items that are not objects, a string correlation and a negative one
AWKWARD = (
    '{"schemaVersion": 1, "deviceProperties": [{"name": "x\\"]}"}], "traceEvents": [\r\n'
    '  {"ph": "X", "cat": "kernel", "name": "k\\"{[a]}\\\\", "pid": 0, "tid": 7, "ts": 1.5e3, "dur": 2.25,'
    ' "args": {"nested": {"a": [1, {"b": "}"}]}, "correlation": 11, "stream": 7}},\r\n'
    '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":"host \\u00e9","tid":"t","ts":1400,'
    '"dur":3,"args":{"correlation":11}},\n'
    '  {"ph": "i", "name": "\\\\", "ts": 5, "args": {"correlation": "12"}},\n'
    '  {"ph": "X", "name": "neg", "ts": 6, "dur": 1e-3, "args": {"correlation": -4, "stream": "s"}},\n'
    "  3, null, [1, 2], {},\n"
    '  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 7, "dur": 0.5, "args": []}\n'
    '], "traceName": "t"}\n'
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rank-0.pt.trace.json"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_scan_reads_awkward_json_as_msgspec_does(tmp_path: Path) -> None:
    # GIVEN a trace with escapes, nesting, non-object items and odd values WHEN scanned and decoded
    trace = write(tmp_path, AWKWARD)
    scan = native_scan.native_scan(native_scan.build(tmp_path / "build"), trace, 2)
    ref = native_scan.reference(trace)
    # THEN both saw the same events, durations, correlations and strings
    native_scan.check_agreement(scan, ref)
    assert ref == {
        "events": 6,  # {} counts; 3, null and [1, 2] are not events
        # names k"{[a]}\\, cudaLaunchKernel, \\, neg, aten::mm; cats kernel, cuda_runtime, cpu_op; pid and tid
        "symbols": 10,
        "sum_dur": 2.25 + 3 + 1e-3 + 0.5,
        "with_correlation": 2,  # the string "12" and the negative -4 are not correlations
        "sum_correlation": 22,
    }
    assert scan["bytes"] == trace.stat().st_size


def test_a_disagreement_stops_the_probe(tmp_path: Path) -> None:
    # GIVEN a correlation written as a float, which the scan reads as an int and msgspec does not
    trace = write(
        tmp_path, '{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "args": {"correlation": 3.0}}]}'
    )
    scan = native_scan.native_scan(native_scan.build(tmp_path / "build"), trace, 1)
    # WHEN the two are compared THEN the probe refuses to report a time
    with pytest.raises(native_scan.ProbeError, match="with_correlation"):
        native_scan.check_agreement(scan, native_scan.reference(trace))


def test_input_it_cannot_scan_is_an_error_not_a_number(tmp_path: Path) -> None:
    # GIVEN a file without traceEvents, and one whose string never ends WHEN scanned THEN the probe fails clearly
    exe = native_scan.build(tmp_path / "build")
    for text, reason in (('{"events": []}', "no traceEvents"), ('{"traceEvents": [{"name": "k', "unterminated")):
        with pytest.raises(native_scan.ProbeError, match=reason):
            native_scan.native_scan(exe, write(tmp_path, text), 1)


def test_the_split_and_projection_are_reported_per_mb(tmp_path: Path) -> None:
    # GIVEN a small generated trace WHEN the probe measures it THEN the engine's split adds up to its total
    from bench.generate import generate  # the bench's own replicated trace

    trace = tmp_path / "rank-0.pt.trace.json"
    generate(trace, size_mb=1)
    result = native_scan.measure(trace, 1, tmp_path / "build")
    per_mb = result["cpu_ms_per_mb"]
    parts = per_mb["profstack_decode"] + per_mb["profstack_consume"] + per_mb["profstack_rest"]
    assert parts == pytest.approx(per_mb["profstack_total"])
    assert min(per_mb["profstack_decode"], per_mb["profstack_consume"], per_mb["native_scan"]) > 0
    ratios = result["ratios_to_floor"]
    assert ratios["native_scan_plus_todays_rest"] == pytest.approx(
        per_mb["floor"] / (per_mb["native_scan"] + per_mb["profstack_rest"])
    )
    assert json.loads(json.dumps(result)) == result
