"""Numbers as real profilers write them (#34 item 1): ROCm's roctracer writes `"bytes": "32768"` on
hipMemcpyAsync runtime events; such events used to lose all their args (correlation, stream, bytes) and mark every
ROCm trace "partial". Now a number written as a string, or an integral float, is read as that number, by one rule
for both engines; a field that is truly unreadable is that field unknown, and the warning names it."""

from __future__ import annotations

import gzip
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze
from profstack.analysis.parse import loose_int
from profstack.analysis.sources import BytesTraceSource
from tests.conftest import TRACES_DIR
from tests.unit.analysis.neutral import engine_neutral

AMD = TRACES_DIR / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    data = json.dumps(doc).encode()
    return dict(engine_neutral(analyze([BytesTraceSource(data, name="rank0.json")], AnalysisOptions()).summary))


def _as_strings(doc: dict[str, Any], keys: tuple[str, ...]) -> tuple[dict[str, Any], int]:
    """The same trace with these args written as decimal strings (what roctracer does for bytes)."""
    out = json.loads(json.dumps(doc))
    changed = 0
    for event in out["traceEvents"]:
        args = event.get("args")
        if isinstance(args, dict):
            for key in keys:
                if isinstance(args.get(key), int) and not isinstance(args.get(key), bool):
                    args[key] = str(args[key])
                    changed += 1
    return out, changed


def test_a_rocm_trace_with_numbers_as_strings_reads_as_the_same_trace_with_numbers() -> None:
    # GIVEN the real MI250 trace, and a copy whose correlation, stream, bytes and device args are strings
    doc = json.loads(gzip.decompress(AMD.read_bytes()))
    strung, changed = _as_strings(doc, ("correlation", "stream", "bytes", "device", "External id"))
    assert changed > 20
    plain, loose = _summary(doc), _summary(strung)
    # THEN the results are the same (before: those events lost every arg, launches lost their kernels and the file
    # was "partial"), the run is complete, and a notice (not a warning) says numbers were read from strings
    assert loose["complete"] is True
    for key in ("ranks", "cross_rank", "findings", "runs"):
        assert loose[key] == plain[key], key
    assert loose["errors"] == plain["errors"] == []
    (notice,) = [w for w in loose["warnings"] if "numbers in their args" in w["message"]]
    assert notice["fatal"] is False


def test_a_field_that_stays_unreadable_is_that_field_unknown_and_named() -> None:
    # GIVEN a kernel whose stream is a boolean (no profiler writes that) and whose correlation is fine
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 4,
         "args": {"correlation": "5", "stream": True, "device": 0}},
    ]  # fmt: skip
    summary = _summary({"traceEvents": events})
    # THEN only `stream` is unknown: the error names it (the file is partial: its kernel's stream is lost), and the
    # kernel still joined its launch by correlation
    assert summary["complete"] is False
    text = json.dumps(summary["errors"])
    assert "stream (1)" in text
    assert "correlation" not in text.split("left unknown")[-1]
    assert summary["ranks"][0]["has_gpu"] is True


@given(st.integers(-(2**63), 2**63 - 1))
def test_any_int64_written_as_a_string_or_an_integral_float_reads_as_itself(value: int) -> None:
    assert loose_int(value) == value
    assert loose_int(str(value)) == value
    assert loose_int(f" {value} ") == value
    if abs(value) < 2**53:
        assert loose_int(float(value)) == value


@given(st.one_of(st.booleans(), st.floats(allow_nan=True).filter(lambda f: not f.is_integer()), st.text()))
def test_anything_else_is_unknown_never_a_guess(value: object) -> None:
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and value.strip().isascii():
        return  # a decimal string: read (the property above)
    assert loose_int(value) is None


def test_launches_without_gpu_rows_are_a_gpu_not_recorded_never_a_complete_cpu_only_run() -> None:
    # GIVEN the real MI250 trace with its GPU rows removed (as a profile without ProfilerActivity.CUDA records:
    # launches, flows and deviceProperties, no kernels; an A100 x8 inference trace was exactly this)
    doc = json.loads(gzip.decompress(AMD.read_bytes()))
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "gpu_user_annotation"}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in gpu_cats]
    doc["deviceProperties"] = [{"id": i, "name": "AMD Instinct MI250X"} for i in range(2)]
    summary = _summary(doc)
    # THEN the run is not complete, and the error says the GPU was used, how many launches, and how to record it
    # (before: "GPU: no GPU activity in these traces (CPU-only)", complete)
    assert summary["complete"] is False
    (error,) = [e for e in summary["errors"] if e["error_type"] == "GpuActivityNotRecordedError"]
    assert "launch call(s) but no GPU rows; 2 device(s)" in error["message"]
    assert "ProfilerActivity.CUDA" in error["message"]
    # AND a real CPU-only trace gets no such error
    cpu_only = TRACES_DIR / "hta" / "cpu_only"
    (path,) = list(cpu_only.glob("*.json.gz"))
    plain = _summary(json.loads(gzip.decompress(path.read_bytes())))
    assert not [e for e in plain["errors"] if e["error_type"] == "GpuActivityNotRecordedError"]


def test_the_straggler_is_the_rank_the_others_wait_for_not_the_ranks_that_wait() -> None:
    from profstack.analysis import rules
    from profstack.analysis.options import AnalysisOptions as Options

    # GIVEN an 8-rank job as the DLRM trace had it: ranks 1, 3, 4 and 5 started early, so their steps look longer,
    # and then waited up to 11 ms on NCCL; ranks 2 and 7 arrived last and waited for no one
    step = {0: 100.0, 1: 112.0, 2: 99.0, 3: 111.9, 4: 110.5, 5: 112.0, 6: 100.0, 7: 99.5}
    exposed = {0: 6.0, 1: 14.0, 2: 0.5, 3: 13.5, 4: 12.0, 5: 14.0, 6: 6.0, 7: 0.8}
    table = [
        {"rank": r, "label": str(r), "run": "run-1", "step_mean_us": step[r] * 1000, "gpu_busy_pct": 80.0,
         "idle_pct": 20.0, "compute_time_us": 80_000.0, "comm_time_us": 20_000.0, "gpu_span_us": step[r] * 1000,
         "exposed_comm_pct_of_step": exposed[r]}
        for r in range(8)
    ]  # fmt: skip
    result, found = rules.cross_rank(table, Options().thresholds())
    # THEN the stragglers are 2 and 7 (HTA's answer, and ProfStack's own exposed-communication numbers'); before, the
    # step-time rule judged step length only: here it named no one, and on the real trace the ranks that waited
    assert [s["rank"] for s in result["stragglers"]] == [2, 7]
    (finding,) = [f for f in found if f["rule_id"] == "Straggler"]
    assert finding["ranks"] == [2, 7]
    assert "waited for" in finding["message"]
