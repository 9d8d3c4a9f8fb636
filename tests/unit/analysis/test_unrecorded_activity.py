"""What a trace did not record is said, specifically, with how to record it, and the run is not complete (#34 items
2 and 6): flows to nowhere, GPUs listed with no activity, memory events without the allocator's totals, GPU rows
without their CPU side, an empty profile whose header says profile_memory was on, and ROCm launch delays.

Before, each of these traces was analysed as complete: the empty profile as "CPU-only" with "turn on
profile_memory" and sync 100 % of GPU activity, the others without a word."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze, native
from profstack.analysis.sources import BytesTraceSource
from profstack.cli.analyze import text_summary
from profstack.report import render_html
from tests.unit.analysis.neutral import engine_neutral
from tests.unit.analysis.synth import TraceBuilder

A100S = [{"id": i, "name": "NVIDIA A100-SXM4-80GB"} for i in range(2)]


@contextmanager
def _engine(name: str) -> Iterator[None]:
    saved = native.ACCEL
    if name == "python":
        native.ACCEL = None
    try:
        yield
    finally:
        native.ACCEL = saved


def _analyse(doc: bytes, **opts: Any) -> dict[str, Any]:
    return dict(analyze([BytesTraceSource(doc, name="rank0.json")], AnalysisOptions(**opts)).summary)


def _errors(summary: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in [*summary["errors"], *summary["warnings"]] if e["error_type"] == kind]


def _flow(ph: str, corr: int, ts: float) -> dict[str, Any]:
    ev = {"ph": ph, "id": corr, "pid": 1 if ph == "s" else 0, "tid": 1 if ph == "s" else 7, "ts": ts,
          "cat": "ac2g", "name": "ac2g"}  # fmt: skip
    if ph == "f":
        ev["bp"] = "e"
    return ev


def _with_lost_kernels() -> bytes:
    """Ten launches, each with its flow start; the GPU rows (and flow finishes) of three were lost."""
    tb = TraceBuilder(deviceProperties=A100S)
    tb.cpu("aten::mm", 0.0, 500.0)
    for i in range(10):
        tb.runtime("cudaLaunchKernel", 10.0 * i, 3.0, corr=100 + i)
        tb.events.append(_flow("s", 100 + i, 10.0 * i))
        if i not in (2, 5, 7):  # lost mid-trace: later launches have their rows
            tb.events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * i + 5,
                              "dur": 4.0, "args": {"stream": 7, "correlation": 100 + i, "device": 0}})  # fmt: skip
            tb.events.append(_flow("f", 100 + i, 10.0 * i + 5))
    return tb.to_bytes()


@pytest.mark.parametrize("engine", ["c", "python"])
def test_flows_to_nowhere_are_a_warning_in_both_engines(engine: str) -> None:
    if engine == "c" and native.ACCEL is None:
        pytest.skip("the C module is not built")
    # GIVEN kernel launches whose GPU rows were lost mid-trace (3 of 10 kernels of 4 µs in a ~95 µs span)
    with _engine(engine):
        summary = _analyse(_with_lost_kernels())
    # THEN the run is not complete (their ~12 µs are 12.6 pp of the span, beyond the tolerance) and the error counts
    # them, sizes them and says what is missing
    assert summary["complete"] is False
    (err,) = _errors(summary, "FlowsToNowhereError")
    assert err in summary["errors"]
    assert (
        "3 kernel launch(es) without a GPU row (records dropped): ~12.0 µs of GPU time (3 x 4.00 µs mean"
        in (err["message"])
    )
    assert "beyond the 0.5 pp / 1 % tolerance" in err["message"]


def test_both_engines_count_flows_alike() -> None:
    if native.ACCEL is None:
        pytest.skip("the C module is not built")
    with _engine("c"):
        c = engine_neutral(_analyse(_with_lost_kernels()))
    with _engine("python"):
        py = engine_neutral(_analyse(_with_lost_kernels()))
    assert c == py


def test_finishes_without_a_start_are_not_a_warning() -> None:
    # GIVEN every launch's flow finished, and extra finishes (Kineto writes them on other links too)
    tb = TraceBuilder(deviceProperties=A100S)
    tb.cpu("aten::mm", 0.0, 100.0)
    tb.gpu("k", 0.0, 5.0, 4.0)
    tb.events += [_flow("s", 1, 0.0), _flow("f", 1, 5.0), _flow("f", 99, 6.0)]
    summary = _analyse(tb.to_bytes())
    # THEN nothing is reported missing
    assert summary["complete"] is True
    assert summary["errors"] == []


def test_gpus_listed_without_any_activity_are_not_called_cpu_only(tmp_path: Path) -> None:
    # GIVEN CPU ops only, in a trace whose deviceProperties lists two GPUs (no GPU row, no launch call)
    tb = TraceBuilder(deviceProperties=A100S).step(1, 0.0, 100.0).step(2, 100.0, 100.0)
    tb.cpu("aten::linear", 10.0, 50.0).cpu("aten::linear", 110.0, 50.0)
    summary = _analyse(tb.to_bytes())
    # THEN the trace cannot tell a CPU-only run from an unrecorded GPU, and says so with how to record
    assert summary["complete"] is False
    (err,) = _errors(summary, "DevicesWithoutActivityError")
    assert "2 GPU device(s) are listed in deviceProperties" in err["message"]
    assert "ProfilerActivity.CUDA" in err["message"]
    # AND neither the CLI nor the report calls it CPU-only
    text = text_summary(summary, [], 0.1, 1)  # type: ignore[arg-type]
    assert "GPU: no GPU activity in these traces (CPU-only)" not in text
    assert "GPU: no GPU activity recorded, and the traces cannot tell a CPU-only run" in text
    assert "Not recorded: " in text
    assert "did not record everything the results need" in text  # not "could not be read completely"
    page = render_html(summary)
    assert "GPU not recorded" in page
    assert "CPU only" not in page
    # AND without GPUs listed it is a complete CPU-only run, as before
    plain = TraceBuilder().step(1, 0.0, 100.0).step(2, 100.0, 100.0).cpu("aten::linear", 10.0, 50.0)
    cpu_only = _analyse(plain.to_bytes())
    assert cpu_only["complete"] is True
    assert "GPU: no GPU activity in these traces (CPU-only)" in text_summary(cpu_only, [], 0.1, 1)  # type: ignore[arg-type]


def _memory_event(ts: float, nbytes: int, **totals: int) -> dict[str, Any]:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, **totals}}  # fmt: skip


def test_memory_events_without_the_allocators_totals_are_said() -> None:
    # GIVEN profile_memory events as PyTorch 1.8 wrote them: bytes, no Total Allocated / Total Reserved
    tb = TraceBuilder().cpu("aten::empty", 0.0, 10.0).cpu("aten::add", 20.0, 10.0)
    tb.events += [_memory_event(1.0, 4096), _memory_event(21.0, 8192), _memory_event(25.0, -4096)]
    summary = _analyse(tb.to_bytes())
    # THEN a warning says the peaks are unknown and why (before: nothing, and "peak allocated -1 B" in the report);
    # the allocations and bytes stand: the memory section is incomplete (its peaks are shown as unknown), the run is
    # complete (#43 item 2: no other number depends on the peaks)
    (note,) = _errors(summary, "MemoryAllocatorUnknownError")
    assert note in summary["warnings"]
    assert not note["fatal"]
    assert summary["complete"] is True
    assert summary["inputs"][0]["status"] == "ok"
    assert summary["ranks"][0]["completeness"]["memory"] == {"complete": False, "gaps": ["MemoryAllocatorUnknownError"]}
    assert note["message"].endswith(
        "3 of 3 [memory] event(s) carry no allocator totals (Total Allocated / Total Reserved): peak and over-time "
        "memory are unknown (allocations and bytes are counted); newer PyTorch releases write them with "
        "profile_memory=True"
    )
    page = render_html(summary)
    assert "unknown (no allocator totals)" in page
    assert "-1 B" not in page
    # AND with the totals there is no notice
    tb2 = TraceBuilder().cpu("aten::empty", 0.0, 10.0)
    tb2.events.append(_memory_event(1.0, 4096, **{"Total Allocated": 4096, "Total Reserved": 2 << 20}))
    assert not _errors(_analyse(tb2.to_bytes()), "MemoryAllocatorUnknownError")


def test_gpu_rows_without_the_cpu_side_are_said() -> None:
    # GIVEN kernels without their launch calls or any CPU operator (only GPU rows were kept)
    tb = TraceBuilder(deviceProperties=A100S)
    for i in range(5):
        tb.events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 4.0,
                          "args": {"stream": 7, "correlation": i + 1, "device": 0}})  # fmt: skip
    summary = _analyse(tb.to_bytes())
    # THEN the launches' absence is a warning (launch delays and host waits unknown) and the run is not complete
    assert summary["complete"] is False
    (err,) = _errors(summary, "CpuActivityNotRecordedError")
    assert "5 GPU row(s) but no launch call (runtime/driver) was recorded; no CPU operator either" in err["message"]
    assert "ProfilerActivity.CPU" in err["message"]
    assert summary["ranks"][0]["launch_delay"]["unavailable_reason"].startswith("no launch call was recorded")
    # AND the report lists it on the rank
    assert "Not recorded." in render_html(summary)


def test_launches_without_cpu_operators_are_said_and_the_gpu_results_stand() -> None:
    # GIVEN kernels and their launches, and no CPU operator (ProfilerActivity.CPU left out)
    tb = TraceBuilder(deviceProperties=A100S)
    for i in range(5):
        tb.gpu("k", 10.0 * i, 10.0 * i + 3, 4.0)
    summary = _analyse(tb.to_bytes())
    # THEN a warning says the CPU-op table is empty and how to record it (#34 item 2: "the same holds for CPU
    # activity missing under GPU rows"); the GPU results stand, so the run is complete and the CPU-side sections say
    # they are not (#43 item 2)
    assert summary["complete"] is True
    (note,) = _errors(summary, "CpuActivityNotRecordedError")
    assert "but no CPU activity (operators, record_function or ProfilerStep ranges) was recorded" in note["message"]
    assert note in summary["warnings"]
    assert not note["fatal"]
    sections = summary["ranks"][0]["completeness"]
    assert [s for s, state in sections.items() if not state["complete"]] == ["cpu_ops", "steps", "memory"]
    assert summary["ranks"][0]["has_gpu"]
    assert summary["ranks"][0]["counts"]["gpu_kernels"] == 5


def test_an_empty_profile_with_profile_memory_on_is_not_cpu_only(tmp_path: Path) -> None:
    # GIVEN a trace written before its active step: steps and one host sync, no op, no GPU row, no memory event,
    # and a header that says profile_memory was on
    tb = TraceBuilder(profile_memory=1, deviceProperties=A100S).step(1, 0.0, 100.0).step(2, 100.0, 100.0)
    tb.runtime("cudaDeviceSynchronize", 20.0, 60.0)
    summary = _analyse(tb.to_bytes())
    rank = summary["ranks"][0]
    # THEN it is an empty profile, not a CPU-only run, and the warning says profile_memory was on
    assert summary["complete"] is False
    (err,) = _errors(summary, "NothingRecordedError")
    assert "neither CPU operators nor GPU activity were recorded" in err["message"]
    assert "the header says profile_memory was on, yet no [memory] event was written" in err["message"]
    assert "prof.step()" in err["message"]
    # AND no sync share of GPU activity comes from the host's wait (before: sync 100 %)
    assert rank["gpu_activity"]["sync_pct"] == 0.0
    # AND the CLI and the report do not call it CPU-only, nor tell the user to turn profile_memory on
    text = text_summary(summary, [], 0.1, 1)  # type: ignore[arg-type]
    assert "GPU: no GPU activity in these traces (CPU-only)" not in text
    assert "Not recorded: rank0.json: neither CPU operators nor GPU activity were recorded" in text
    page = render_html(summary)
    assert "CPU only" not in page
    assert "Profile with <code>torch.profiler.profile(profile_memory=True)</code>" not in page
    assert "The trace header says profile_memory was on" in page
    assert rank["memory"]["header_profile_memory"] is True
    json.dumps(summary)


def _rocm() -> bytes:
    tb = TraceBuilder(deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X"}])
    tb.cpu("aten::mm", 0.0, 200.0)
    for i in range(4):
        tb.runtime("hipLaunchKernel", 10.0 * i, 3.0, corr=10 + i)
        tb.events.append({"ph": "X", "cat": "kernel", "name": "Cijk_Alik_Bljk_BBS_BH_MT128x128x64", "pid": 0,
                          "tid": 1, "ts": 10.0 * i + 8, "dur": 5.0,
                          "args": {"stream": 1, "correlation": 10 + i, "device": 0}})  # fmt: skip
    return tb.to_bytes()


def test_rocm_launch_delays_say_why_they_are_not_computed() -> None:
    # GIVEN kernels launched by hipLaunchKernel, outside HTA's launch-call set
    summary = _analyse(_rocm())
    ld = summary["ranks"][0]["launch_delay"]
    # THEN the delays are not computed (HTA's definition) and the summary, CLI and report say why and what computes
    # them (before: "—" without a word)
    assert ld["count"] == 0
    assert "hipLaunchKernel" in ld["unavailable_reason"]
    assert "--launch-calls all" in ld["unavailable_reason"]
    assert "Launch delays of rank 0: not computed: these GPU ops were launched by hipLaunchKernel" in text_summary(
        summary,  # type: ignore[arg-type]
        [],
        0.1,
        1,
    )
    assert "Not computed: these GPU ops were launched by hipLaunchKernel" in render_html(summary)
    # AND with every launch call counted they are computed, with no reason given
    every = _analyse(_rocm(), launch_calls="all")["ranks"][0]["launch_delay"]
    assert every["count"] == 4
    assert "unavailable_reason" not in every


def test_the_job_email_says_not_recorded_rather_than_unreadable() -> None:
    from lambdas.trace_processor.job import JobContext
    from lambdas.trace_processor.notification import notification_text

    # GIVEN the summary of a ROCm job whose trace read whole but recorded no GPU row (the A100 x8 case of #34)
    tb = TraceBuilder(deviceProperties=A100S)
    tb.cpu("aten::mm", 0.0, 50.0).runtime("cudaLaunchKernel", 5.0, 3.0, corr=1)
    summary = _analyse(tb.to_bytes())
    ctx = JobContext(job="job-1", status="Completed", user="alice", trace_bucket="b", end_time_s=0.0, tensorboard=None)
    _subject, body = notification_text(ctx, summary, "s3://b/reports/alice/job-1/report.html")
    # THEN the e-mail says the trace did not record everything, not that it could not be read
    assert "Incomplete: 1 trace file(s) did not record everything (each line says how to record it):" in body
    assert "could not be read completely" not in body


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["s", "f", "t", "i", ""]), max_size=40), st.sampled_from(["ac2g", "fwdbwd", "async"]))
def test_flow_counts_are_the_same_in_both_engines_and_flows_alone_never_warn(phs: list[str], cat: str) -> None:
    # GIVEN a trace with a few kernels and launches, and flow events of any phase in one category
    tb = TraceBuilder().cpu("aten::mm", 0.0, 100.0)
    for i in range(3):
        tb.gpu("k", 10.0 * i, 10.0 * i + 3, 4.0)
    for k, ph in enumerate(phs):
        tb.events.append({"ph": ph, "id": k, "pid": 1, "tid": 1, "ts": float(k), "cat": cat, "name": cat})
    data = tb.to_bytes()
    with _engine("python"):
        py = _analyse(data)
    if native.ACCEL is not None:
        with _engine("c"):
            assert engine_neutral(_analyse(data)) == engine_neutral(py)
    # THEN flows alone never warn: every launch has its row (#43 item 2: launches are matched by correlation id;
    # flows also start at calls that launch nothing)
    assert not _errors(py, "FlowsToNowhereError")
