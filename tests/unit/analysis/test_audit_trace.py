"""Audit on traces nobody tuned for: inputs the samples do not cover that gave a confident wrong answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze
from profstack.analysis.gpu import MAX_STREAMS, OTHER_STREAM
from profstack.analysis.summary import Summary

from .synth import busy_steps, kernel_event, launch_event, step_event


def _src(events: list[dict[str, Any]], name: str = "t.json", **top: Any) -> BytesTraceSource:
    return BytesTraceSource(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode(), name=name)


def _messages(summary: Summary, error_type: str) -> list[str]:
    return [e["message"] for e in summary["errors"] + summary["warnings"] if e["error_type"] == error_type]


# ------------------------------------------------------------------------------- ops overlapping on one stream


def test_duplicated_events_give_no_negative_idle_and_a_warning() -> None:
    # GIVEN a healthy trace whose events were all written twice (two exports concatenated)
    events = busy_steps().events
    once = analyze([_src(events)]).summary
    # WHEN it is analysed
    summary = analyze([_src(events + events)]).summary
    # THEN the idle breakdown is the trace's own (before: each copy gave a gap of minus its op's duration, so a
    # negative kernel_wait, reported as complete), and a warning says the ops were written twice
    (rank,) = summary["ranks"]
    assert rank["idle_breakdown"] == once["ranks"][0]["idle_breakdown"]
    assert rank["temporal_breakdown"] == once["ranks"][0]["temporal_breakdown"]
    (msg,) = _messages(summary, "DuplicateEventsError")
    assert msg.split(": ")[1].startswith("3 analysed GPU op(s)")  # the last of the 4 steps is dropped
    assert summary["complete"] is False
    assert once["complete"] is True
    assert not _messages(once, "DuplicateEventsError")


def test_ops_overlapping_on_one_stream_add_no_negative_idle_time() -> None:
    # GIVEN one stream whose second kernel starts before the first ends (programmatic dependent launch) and a
    # third kernel 100 µs after the second ends
    events = [
        step_event(0, 0, 1000),
        step_event(1, 1000, 10),
        launch_event(1, 0, 2),
        kernel_event(1, 10, 100),
        launch_event(2, 3, 2),
        kernel_event(2, 90, 50),  # starts 20 µs before kernel 1 ends
        launch_event(3, 5, 2),
        kernel_event(3, 240, 10),
    ]
    summary = analyze([_src(events)]).summary
    # WHEN analysed THEN the overlap is no idle time (HTA: a gap of -20 µs) and the only idle time is the
    # 100 µs between the second kernel's end and the third's start (its launch was long queued: "other")
    idle = summary["ranks"][0]["idle_breakdown"]
    assert (idle["host_wait_us"], idle["kernel_wait_us"], idle["other_us"]) == (0.0, 0.0, 100.0)
    assert summary["ranks"][0]["temporal_breakdown"]["idle_time_us"] == 100.0
    assert not _messages(summary, "DuplicateEventsError")


# ------------------------------------------------------------------------------- several devices in one file


def _two_devices(second_offset_us: float) -> list[dict[str, Any]]:
    """Four 1 ms steps; in each, a 400 µs kernel on device 0 and one on device 1, both on stream 7."""
    events: list[dict[str, Any]] = []
    corr = 0
    for s in range(4):
        t0 = 1000.0 * s
        events.append(step_event(s, t0, 1000.0))
        for dev in (0, 1):
            corr += 1
            lt = t0 + 10 + dev * second_offset_us
            events.append(launch_event(corr, lt, 3.0))
            k = kernel_event(corr, lt + 10, 400.0, name="gemm_kernel", device=dev)
            k["pid"] = dev
            events.append(k)
    return events


def test_one_process_driving_two_gpus_is_not_reported_as_one_gpus_utilisation() -> None:
    # GIVEN a single-process pipeline over two GPUs (device 0 runs, then device 1, each ~40 % of every step)
    summary = analyze([_src(_two_devices(480.0))]).summary
    # WHEN analysed THEN the union of both devices is not passed off as "the GPU": a warning names the devices
    (rank,) = summary["ranks"]
    assert rank["temporal_breakdown"]["compute_pct"] > 80  # the union, HTA's per-rank definition
    (msg,) = _messages(summary, "MultipleDevicesError")
    assert "2 devices (0, 1)" in msg
    assert "union" in msg
    assert rank["complete"] is False
    assert summary["complete"] is False


def test_two_gpus_running_at_once_with_the_same_stream_id_give_no_negative_idle() -> None:
    # GIVEN DataParallel-style concurrency: both devices busy at once, both on stream 7 (CUDA's default id)
    summary = analyze([_src(_two_devices(5.0))]).summary
    # WHEN analysed THEN the one "stream 7" of both devices (HTA keys by stream only) has no negative idle time
    # (before, like HTA: kernel_wait -885 µs, 942 % host wait, complete), and the devices are named in a warning
    (rank,) = summary["ranks"]
    idle = rank["idle_breakdown"]
    assert min(idle["host_wait_us"], idle["kernel_wait_us"], idle["other_us"]) >= 0
    assert 0 <= idle["host_wait_pct"] <= 100
    assert _messages(summary, "MultipleDevicesError")
    assert summary["complete"] is False


# ------------------------------------------------------------------------------- ops shorter than HTA's rounding


def _sub_microsecond(
    n_steps: int = 4, per_step: int = 50, dur: float = 0.9, corr: int = 0, stream: int = 7
) -> list[dict[str, Any]]:
    """ns-resolution timestamps (torch >= 2), ``per_step`` kernels of ``dur`` µs per 1 ms step."""
    events: list[dict[str, Any]] = []
    for s in range(n_steps):
        t0 = 1000.0 * s
        events.append(step_event(s, t0, 1000.0))
        for i in range(per_step):
            corr += 1
            lt = t0 + 10 + i * 19.0
            events += [
                launch_event(corr, lt + 0.05, 3.0),
                kernel_event(corr, lt + 5.05, dur, name="elementwise", stream=stream),
            ]
    return events


def test_kernels_shorter_than_a_microsecond_count_exactly_by_default() -> None:
    # GIVEN 150 analysed kernels of 0.9 µs each with ns-resolution timestamps (a modern GPU's small kernels)
    # WHEN analysed in the default, exact time model
    summary = analyze([_src(_sub_microsecond())]).summary
    (rank,) = summary["ranks"]
    # THEN every ns counts: 150 x 0.9 µs of kernel time, busy time and top kernel, no rounding warning, complete
    (top,) = rank["top_kernels_by_time"]
    assert (top["count"], top["total_us"], top["min_us"], top["max_us"]) == (150, 135.0, 0.9, 0.9)
    assert rank["gpu_activity"]["kernel_time_us"] == 135.0
    tb = rank["temporal_breakdown"]
    assert tb["gpu_span_us"] - tb["idle_time_us"] == pytest.approx(135.0, abs=1e-9)
    assert not _messages(summary, "RoundingLossError")
    assert summary["complete"] is True


def test_kernels_shorter_than_a_microsecond_never_get_negative_times_and_the_loss_is_said() -> None:
    # GIVEN 150 analysed kernels of 0.9 µs each with ns-resolution timestamps (a modern GPU's small kernels)
    summary = analyze([_src(_sub_microsecond())], AnalysisOptions(hta_compat=True)).summary
    (rank,) = summary["ranks"]
    # WHEN analysed in HTA's time model (--hta-compat) THEN no time is negative (HTA's rounding, ceil(start) and
    # floor(end), gave each -1 µs: a top kernel of -150 µs and a kernel time of -150 µs, reported as complete)
    (top,) = rank["top_kernels_by_time"]
    assert top["count"] == 150
    assert top["total_us"] == 0.0
    assert top["min_us"] == 0.0
    assert rank["gpu_activity"]["kernel_time_us"] == 0.0
    # and the summary says the rounding removed the ops' 135 µs, and is incomplete
    (msg,) = _messages(summary, "RoundingLossError")
    assert "135 µs" in msg
    assert "100 % lost" in msg
    assert rank["complete"] is False
    assert summary["complete"] is False


def test_rounding_a_third_away_is_a_warning_and_the_result_stays_complete() -> None:
    # GIVEN 150 analysed kernels of 4.5 µs with ns timestamps: ceil(start) and floor(end) keep 3 µs of each, in
    # HTA's time model (the only one that rounds)
    summary = analyze([_src(_sub_microsecond(dur=4.5))], AnalysisOptions(hta_compat=True)).summary
    (rank,) = summary["ranks"]
    # THEN the kernel time is HTA's (rounded) one, the warning says how much the rounding removed
    assert rank["gpu_activity"]["kernel_time_us"] == 150 * 3.0
    (msg,) = _messages(summary, "RoundingLossError")
    assert "33 % lost" in msg
    # AND a third lost is HTA's definition, said, not an incomplete result (from half on it is: test above)
    assert rank["complete"] is True
    assert summary["complete"] is True


def test_rounding_a_few_short_ops_away_is_no_warning() -> None:
    # GIVEN long kernels plus a few 0.9 µs ones on a second stream: the rounding removes far less than a tenth of
    # the GPU op time
    events = busy_steps().events + _sub_microsecond(n_steps=1, per_step=5, corr=100, stream=8)[1:]
    summary = analyze([_src(events)], AnalysisOptions(hta_compat=True)).summary
    # THEN no rounding warning, and the result stays complete
    assert not _messages(summary, "RoundingLossError")
    assert summary["complete"] is True


# ------------------------------------------------------------------------------- events Kineto does not write


def test_steps_written_as_begin_end_pairs_are_not_silently_lost() -> None:
    # GIVEN a trace whose ProfilerSteps are begin/end ("B"/"E") pairs (valid Chrome JSON, not what Kineto writes)
    events: list[dict[str, Any]] = []
    for ev in busy_steps().events:
        if ev["name"].startswith("ProfilerStep#"):
            begin = {k: v for k, v in ev.items() if k != "dur"} | {"ph": "B"}
            events += [begin, begin | {"ph": "E", "ts": ev["ts"] + ev["dur"]}]
        else:
            events.append(ev)
    # WHEN analysed THEN the result says the pairs were skipped (before: no steps, no warning, "complete")
    summary = analyze([_src(events)]).summary
    (msg,) = [m for m in _messages(summary, "InvalidEventError") if "begin/end" in m]
    assert "8 begin/end" in msg
    assert summary["ranks"][0]["window"]["steps"] == []
    assert summary["complete"] is False


def test_a_trace_of_only_ill_typed_events_says_so_not_that_it_is_empty() -> None:
    # GIVEN a trace whose every event has its "ts" as a string
    events = busy_steps().events
    for ev in events:
        ev["ts"] = str(ev["ts"])
    # WHEN analysed THEN the fatal error names the invalid events (before: "traceEvents is empty (the profiler
    # recorded nothing)", for a file holding 12 events)
    summary = analyze([_src(events)]).summary
    (msg,) = _messages(summary, "EmptyTraceError")
    assert "12 invalid event(s)" in msg
    assert "$.ts" in msg
    assert "empty" not in msg


# ------------------------------------------------------------------------------- memory of other accelerators


def _memory_event(ts: float, allocated: int, device_type: int) -> dict[str, Any]:
    args = {"Device Type": device_type, "Device Id": 0, "Addr": 1, "Bytes": 1 << 20, "Total Allocated": allocated,
            "Total Reserved": 2 * allocated}  # fmt: skip
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args}


def test_gpu_memory_increase_fires_on_an_xpu_like_on_a_cuda_device() -> None:
    # GIVEN profile_memory events of an Intel XPU (c10::DeviceType 12) whose per-step peak rises 10 % a step
    events = busy_steps().events
    events += [_memory_event(100.0 + 1000 * s, (100 + 10 * s) << 20, device_type=12) for s in range(4)]
    # WHEN analysed THEN the device is named "xpu:0" (before: "device-type-12:0") and Debugger's GPUMemoryIncrease
    # fires for it as it would for a CUDA device (before: never, the rule looked at "cuda" devices only)
    summary = analyze([_src(events)]).summary
    (dev,) = summary["ranks"][0]["memory"]["devices"]
    assert dev["device"] == "xpu:0"
    found = [f for f in summary["findings"] if f["rule_id"] == "GPUMemoryIncrease"]
    assert [f["evidence"]["device"] for f in found] == ["xpu:0"]


# ------------------------------------------------------------------------------- invariants on any GPU ops


@st.composite
def gpu_traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Steps and launched GPU ops on a few streams and devices, ns-resolution times, overlaps and copies allowed."""
    events: list[dict[str, Any]] = []
    n_steps = draw(st.integers(1, 4))
    for s in range(n_steps):
        events.append(step_event(s, 100.0 * s, 100.0))
    times = st.floats(0, 100.0 * n_steps, allow_nan=False).map(lambda t: round(t, 3))
    for corr in range(1, draw(st.integers(1, 25)) + 1):
        lt = draw(times)
        k = kernel_event(
            corr,
            round(lt + draw(st.floats(-2, 30, allow_nan=False)), 3),
            round(draw(st.floats(0, 40, allow_nan=False)), 3),
            name=draw(st.sampled_from(["gemm", "ncclKernel_AllReduce", "Memcpy HtoD", "elementwise"])),
            stream=draw(st.sampled_from([7, 13])),
            device=draw(st.sampled_from([0, 0, 1])),
        )
        events += [launch_event(corr, lt, round(draw(st.floats(0, 5, allow_nan=False)), 3)), k]
        if draw(st.integers(0, 9)) == 0:
            events.append(k)  # a copied event
    return events


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=gpu_traces())
def test_no_time_in_the_summary_is_negative_whatever_the_gpu_ops(events: list[dict[str, Any]]) -> None:
    # GIVEN any steps and GPU ops (overlapping on a stream, on two devices, copied, shorter than a µs)
    summary = analyze([_src(events)]).summary
    for rank in summary["ranks"]:
        # WHEN analysed THEN no idle, busy or kernel time is negative and no share leaves 0..100 %
        idle = rank["idle_breakdown"]
        times = [idle["host_wait_us"], idle["kernel_wait_us"], idle["other_us"]]
        times += [st_[k] for st_ in idle["per_stream"] for k in ("host_wait_us", "kernel_wait_us", "other_us")]
        times += [rank["temporal_breakdown"][k] for k in ("idle_time_us", "compute_time_us", "non_compute_time_us")]
        times += [rank["gpu_activity"][k] for k in ("kernel_time_us", "memcpy_time_us", "memset_time_us")]
        times += [t[k] for t in rank["top_kernels_by_time"] for k in ("total_us", "min_us", "max_us")]
        assert min(times, default=0.0) >= 0.0, times
        shares = [idle[k] for k in ("host_wait_pct", "kernel_wait_pct", "other_pct")]
        shares += [rank["temporal_breakdown"][k] for k in ("idle_pct", "compute_pct", "non_compute_pct")]
        assert all(0.0 <= p <= 100.0 for p in shares), shares


# ------------------------------------------------------------------------------- GPU and host on different clocks


@pytest.mark.parametrize("shift_us", [10e6, -10e6])
def test_gpu_ops_on_another_clock_than_their_launches_are_implausible(shift_us: float) -> None:
    # GIVEN a healthy trace whose GPU ops are stamped 10 s after (or before) the host's clock (a tracer that did
    # not convert GPU timestamps to the host clock)
    events = busy_steps().events
    for ev in events:
        if ev["cat"] == "kernel":
            ev["ts"] += shift_us
    # WHEN analysed THEN the result is marked implausible (before: complete, with a 10 s mean launch delay, or
    # every delay clipped to 0 and CPUBound from a 100 % "host wait")
    summary = analyze([_src(events)]).summary
    problems = _messages(summary, "ImplausibleResultError")
    assert any("different clocks" in p for p in problems), problems
    assert summary["complete"] is False


# ------------------------------------------------------------------------------- hostile: a stream per op


@pytest.mark.parametrize("as_string", [False, True])
def test_a_stream_per_gpu_op_keeps_the_summary_bounded_and_says_so(as_string: bool) -> None:
    # GIVEN 1,100 kernels, each on a stream of its own (stream ids as integers, or strings like "stream 7")
    events = [step_event(0, 0, 20_000)]
    for i in range(1, 1101):
        k = kernel_event(i, 10.0 * i + 3, 5, stream=i)
        k["args"]["stream"] = f"stream {i}" if as_string else i
        events += [launch_event(i, 10.0 * i), k]
    # WHEN analysed THEN the idle breakdown keeps at most MAX_STREAMS rows plus one shared row (before: one row per
    # stream, so a 31 MB trace with a stream per op gave a 16 MB summary), totals still count every op, and a
    # warning says rows were folded
    summary = analyze([_src(events)]).summary
    (rank,) = summary["ranks"]
    per_stream = rank["idle_breakdown"]["per_stream"]
    assert len(per_stream) == MAX_STREAMS + 1
    assert OTHER_STREAM in {s["stream"] for s in per_stream}
    assert rank["counts"]["gpu_ops_analyzed"] == 1100
    (msg,) = _messages(summary, "StreamsFoldedError")
    assert "1,024 distinct streams" in msg
    assert summary["complete"] is False
