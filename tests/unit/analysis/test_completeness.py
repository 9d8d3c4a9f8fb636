"""Completeness per section, partial only where a reported number is at stake (issue #43 item 2), and files cut off
mid-way (item 6): partial with where and why, never a confident CPU-only.

The gaps are built into traces by construction (launches without their GPU row, sync calls, launches at the stop,
0-byte copies, memory events without allocator totals) and cut from every sample trace at hypothesis-drawn offsets.
"""

from __future__ import annotations

import gzip
import io
import json
import time
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, completeness
from profstack.analysis.summary import Summary, gpu_side_unknown
from profstack.history.rows import measured_completely
from tests.conftest import TRACES_DIR as TRACES

from .conftest import all_trace_files
from .synth import kernel_event, launch_event


def _analyse(events: list[dict[str, Any]], name: str = "rank0.pt.trace.json", **top: Any) -> Summary:
    data = json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()
    return analyze([BytesTraceSource(data=data, name=name)], AnalysisOptions()).summary


def _entries(summary: Summary, kind: str, error_type: str) -> list[dict[str, Any]]:
    return [dict(e) for e in summary.get(kind) or [] if e["error_type"] == error_type]  # type: ignore[literal-required]


def _busy(n_kernels: int = 200, *, kernel_us: float = 40.0) -> list[dict[str, Any]]:
    """``n_kernels`` kernels launched 50 µs apart under CPU ops, each with its GPU row (no ProfilerStep: every op is
    analysed, a span of ~10 ms)."""
    events: list[dict[str, Any]] = []
    for i in range(n_kernels):
        t = 10.0 + 50.0 * i
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 8.0})
        events += [launch_event(i + 1, t + 1.0, 3.0), kernel_event(i + 1, t + 6.0, kernel_us)]
    return events


def _flow(corr: int, ts: float, ph: str) -> dict[str, Any]:
    return {"ph": ph, "id": corr, "pid": 1, "tid": 1, "ts": ts, "cat": "ac2g", "name": "ac2g"}


# ----------------------------------------------------------------------------- calls that launch nothing


def test_a_flow_from_a_sync_call_is_no_launch() -> None:
    # GIVEN a complete trace plus cudaStreamSynchronize / cudaDeviceSynchronize / cudaStreamWaitEvent calls whose
    # ac2g flows start and reach no row (their cuda_sync rows were not recorded): the "4 of 19,204 flows"
    events = _busy()
    for k, name in enumerate(
        ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaStreamWaitEvent", "cudaEventRecord")
    ):
        corr, ts = 9000 + k, 2_000.0 + 100 * k
        events += [launch_event(corr, ts, 5.0, name=name), _flow(corr, ts, "s")]
    # WHEN analysed
    summary = _analyse(events)
    # THEN no launch is missing a row, and the run is complete
    assert not _entries(summary, "errors", "FlowsToNowhereError")
    assert not _entries(summary, "warnings", "FlowsToNowhereError")
    assert summary["complete"] is True
    assert summary["ranks"][0]["completeness"]["gpu_time"] == {"complete": True, "gaps": []}


def test_copies_and_memsets_without_a_row_are_not_gaps() -> None:
    # GIVEN 50 cudaMemsetAsync and 10 cudaMemcpyAsync calls of 0.3 µs without a GPU row (0 bytes: CUDA enqueues
    # nothing, CUPTI writes no row), among recorded kernels
    events = _busy()
    for k in range(60):
        name = "cudaMemsetAsync" if k < 50 else "cudaMemcpyAsync"
        events.append(launch_event(5000 + k, 100.0 + 50.0 * k + 20.0, 0.3, name=name))
    # WHEN analysed THEN nothing is missing, the run is complete
    summary = _analyse(events)
    assert not _entries(summary, "warnings", "FlowsToNowhereError")
    assert summary["complete"] is True


def test_kernel_launches_at_the_stop_are_expected() -> None:
    # GIVEN kernels launched after the last recorded op's launch, without a row (still queued or running when the
    # profiler stopped: the end of every window)
    events = _busy()
    last = max(e["ts"] for e in events if e.get("name") == "cudaLaunchKernel")
    events += [launch_event(8000 + k, last + 5.0 + k, 3.0) for k in range(30)]
    # WHEN analysed THEN no gap: complete
    summary = _analyse(events)
    assert not _entries(summary, "errors", "FlowsToNowhereError")
    assert not _entries(summary, "warnings", "FlowsToNowhereError")
    assert summary["complete"] is True


def _drop_rows(events: list[dict[str, Any]], corrs: set[int]) -> list[dict[str, Any]]:
    return [e for e in events if not (e.get("cat") == "kernel" and e["args"]["correlation"] in corrs)]


def test_a_few_lost_rows_mid_trace_are_a_warning_within_the_tolerance() -> None:
    # GIVEN 1 of 200 kernels (40 µs each, a 10 ms span) lost its row mid-trace: ~40 µs, 0.4 pp of the span and 0.5 %
    # of kernel time
    summary = _analyse(_drop_rows(_busy(), {100}))
    # THEN a warning that names the file, the cause and the size, within the tolerance: the run stays complete
    (warning,) = _entries(summary, "warnings", "FlowsToNowhereError")
    assert warning["source"] == "rank0.pt.trace.json"
    assert "1 kernel launch(es) without a GPU row" in warning["message"]
    assert "40.0 µs of GPU time" in warning["message"]
    assert "within the 0.5 pp / 1 % tolerance" in warning["message"]
    assert summary["complete"] is True
    assert summary["ranks"][0]["completeness"]["gpu_time"] == {"complete": False, "gaps": ["FlowsToNowhereError"]}


def test_lost_rows_beyond_the_tolerance_make_the_run_partial() -> None:
    # GIVEN 20 of 200 kernels lost their rows mid-trace (~800 µs: ~8 pp of the span)
    summary = _analyse(_drop_rows(_busy(), set(range(50, 70))))
    # THEN an error: the run, the file and the rank are partial, and the message says by how much
    (error,) = _entries(summary, "errors", "FlowsToNowhereError")
    assert "20 kernel launch(es) without a GPU row" in error["message"]
    assert "beyond the 0.5 pp / 1 % tolerance" in error["message"]
    assert summary["complete"] is False
    assert summary["ranks"][0]["complete"] is False
    assert [i["status"] for i in summary["inputs"]] == ["partial"]


# ----------------------------------------------------------------------------- sections that do not move a headline


def test_memory_without_allocator_totals_leaves_only_the_memory_section_incomplete() -> None:
    # GIVEN a 2021 tb_plugin trace: every GPU number complete, [memory] events without Total Allocated
    path = TRACES / "kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    summary = analyze([BytesTraceSource(data=path.read_bytes(), name=path.name)]).summary
    # THEN the run is complete, the memory section says why it is not, and history keeps it as a baseline
    sections = summary["ranks"][0]["completeness"]
    assert sections["memory"] == {"complete": False, "gaps": ["MemoryAllocatorUnknownError"]}
    assert all(sections[s]["complete"] for s in ("gpu_time", "launches", "cpu_ops", "steps"))
    assert summary["complete"] is True
    assert _entries(summary, "warnings", "MemoryAllocatorUnknownError")
    assert measured_completely(summary)


def test_gpu_rows_and_launches_without_cpu_ops_keep_gpu_time_complete() -> None:
    # GIVEN GPU rows and their launches, no CPU operator (rocprof-style)
    events = [e for e in _busy() if e.get("cat") not in ("cpu_op", "user_annotation")]
    summary = _analyse(events)
    # THEN the CPU-side sections are incomplete and the run is complete
    sections = summary["ranks"][0]["completeness"]
    assert sections["gpu_time"]["complete"] is True
    assert sections["cpu_ops"]["complete"] is False
    assert summary["complete"] is True


def test_gpu_rows_without_launch_calls_are_at_stake() -> None:
    # GIVEN GPU rows and no launch call: the idle split would say no host wait
    events = [e for e in _busy() if e.get("cat") != "cuda_runtime"]
    summary = _analyse(events)
    # THEN partial (the idle breakdown is a headline number)
    assert _entries(summary, "errors", "CpuActivityNotRecordedError")
    assert summary["complete"] is False


def test_every_gap_type_has_a_section() -> None:
    # GIVEN every error type the engine records WHEN asked for its sections THEN each names known sections
    from profstack.analysis import errors

    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.TraceError) and cls is not errors.TraceError:
            sections = completeness.sections_of(cls("x"))
            assert sections, name
            assert set(sections) <= set(completeness.SECTIONS), name


# ----------------------------------------------------------------------------- the sample traces, before and after


#: why each sample trace that stays partial is partial (every other one is complete)
PARTIAL_SAMPLES = {
    # CUPTI's range profiler: 105 launches, no kernel row (counters instead): GPU time unknown
    "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz": {"GpuActivityNotRecordedError"},
    # 8 GPUs listed, no GPU row or launch: a CPU-only run or unrecorded GPU activity, the trace cannot tell
    "hta/distributed_info_unavailable/distributed_info_not_found.json.gz": {"DevicesWithoutActivityError"},
}


@pytest.mark.parametrize("path", all_trace_files(), ids=lambda p: str(p.relative_to(TRACES)))
def test_a_sample_trace_is_partial_only_where_a_number_is_at_stake(
    path: Path, analysis_cache: Callable[..., Any]
) -> None:
    # GIVEN a sample trace WHEN analysed with the defaults
    result = analysis_cache((path,))
    summary = result.summary
    # THEN it is partial exactly where a listed gap is at stake, and its errors[] are those gaps
    key = path.relative_to(TRACES).as_posix()
    assert {e["error_type"] for e in summary["errors"]} == PARTIAL_SAMPLES.get(key, set())
    assert summary["complete"] is (key not in PARTIAL_SAMPLES)
    # AND every rank states each section's completeness, consistent with its gaps
    for rank in summary["ranks"]:
        assert set(rank["completeness"]) == set(completeness.SECTIONS)
        for state in rank["completeness"].values():
            assert state["complete"] is (not state["gaps"])


# ----------------------------------------------------------------------------- files cut off (item 6)


@cache
def _json(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


@cache
def _gpu_samples() -> list[Path]:
    """The sample traces with GPU rows, up to 6 MB of JSON (the cut-off tests read each many times)."""
    out = []
    for p in all_trace_files():
        data = _json(p)
        if len(data) <= 6 << 20 and (b'"cat": "kernel"' in data or b'"cat":"kernel"' in data or b'"Kernel"' in data):
            out.append(p)
    return out


def _cut(path: Path, frac: float, as_gzip: bool) -> tuple[bytes, int]:
    data = _json(path)
    if as_gzip:
        whole = gzip.compress(data, compresslevel=1, mtime=0)
        at = max(20, int(len(whole) * frac))
        return whole[:at], at
    at = int(len(data) * frac)
    return data[:at], at


def test_the_gpu_samples_cover_both_formats() -> None:
    assert len(_gpu_samples()) >= 15


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(k=st.integers(0, 10**6), frac=st.floats(0.0, 0.999), as_gzip=st.booleans())
def test_a_gpu_trace_cut_anywhere_is_partial_and_never_cpu_only(k: int, frac: float, as_gzip: bool) -> None:
    # GIVEN a sample GPU trace cut off at a drawn offset, as .json or .json.gz
    samples = _gpu_samples()
    path = samples[k % len(samples)]
    data, at = _cut(path, frac, as_gzip)
    name = "cut.pt.trace.json.gz" if as_gzip else "cut.pt.trace.json"
    # WHEN analysed
    started = time.monotonic()
    result = analyze([BytesTraceSource(data=data, name=name)], AnalysisOptions())
    elapsed = time.monotonic() - started
    summary = result.summary
    # THEN never a crash (an internal error), never complete, and never a confident CPU-only: a rank without GPU rows
    # says its GPU side is unknown, and why
    assert not [e for e in summary["errors"] if e["error_type"] == "InternalAnalysisError"], summary["errors"]
    assert summary["complete"] is False
    for rank in summary["ranks"]:
        assert rank["has_gpu"] or gpu_side_unknown(summary, rank), (path.name, at)
    # AND a file cut inside its events says where it ends and what that leaves unknown
    cut = [e for e in summary["errors"] if e["error_type"] == "TruncatedTraceError"]
    if cut:
        assert "file cut off" in cut[0]["message"]
        assert "bytes of JSON read" in cut[0]["message"]
    # AND the cost stays bounded (the whole file takes well under a second)
    assert elapsed < 20.0


def test_the_cut_message_names_the_offset_and_the_gpu_side(tmp_path: Path) -> None:
    # GIVEN the nccl sample cut before its GPU rows, gzip-compressed
    path = TRACES / "hta/nccl_parser_config/nccl_data.json.gz"
    data = _json(path)
    first_kernel = data.index(b'"cat": "kernel"')
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as fh:
        fh.write(data)
    whole = buf.getvalue()
    cut = whole[: len(whole) // 20]  # 5 % of the compressed bytes: far before the first kernel
    assert len(zlib.decompressobj(31).decompress(cut)) < first_kernel
    # WHEN analysed
    summary = analyze([BytesTraceSource(data=cut, name="nccl.json.gz")]).summary
    # THEN partial, the file named, the bytes read, and the GPU side unknown: not CPU-only
    (err,) = [e for e in summary["errors"] if e["error_type"] == "TruncatedTraceError"]
    assert err["source"] == "nccl.json.gz"
    assert "gzip stream truncated" in err["message"]
    assert f"from {len(cut):,} bytes on disk" in err["message"]
    assert "the GPU side is unknown (not a CPU-only run)" in err["message"]
    (rank,) = summary["ranks"]
    assert not rank["has_gpu"]
    assert gpu_side_unknown(summary, rank)
    assert rank["completeness"]["gpu_time"] == {"complete": False, "gaps": ["TruncatedTraceError"]}
    assert summary["complete"] is False
    # AND history does not keep it as a baseline (its gpu_time and steps sections are incomplete)
    assert not measured_completely(summary)
