"""Findings that know the context (#43 item 4): no CUDA-graph advice for graph replays; collectives that run on the
CPU (gloo, MPI) are communication, per rank; GPU idle time is split by what the host did meanwhile, and a gloo wait
or a DataLoader wait is not "the host launching too late"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze
from profstack.analysis.analyzers.host_side import minus
from profstack.analysis.intervals import Merged, merge
from profstack.analysis.sources import discover_sources
from tests.unit.analysis.synth import kernel_event, launch_event, step_event

TRACES = Path(__file__).resolve().parents[3] / "samples" / "traces"


def _summary(path: Path) -> dict[str, Any]:
    return dict(analyze(discover_sources([path]), AnalysisOptions()).summary)


def _findings(summary: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in summary["findings"] if f["rule_id"] == rule]


# ------------------------------------------------------------------------------------------- graph replays


def test_kernels_in_graph_replays_get_no_graph_advice() -> None:
    # GIVEN SGLang decoding on MI300X, 98 % of its kernels inside HIP graph replays (AMD TraceLens' real trace)
    summary = _summary(TRACES / "tracelens" / "inference" / "sglang_decode")
    (lo,) = _findings(summary, "LaunchOverheadBound")
    # THEN the finding says the kernels already run in graph replays and does not advise CUDA graphs
    assert lo["evidence"]["graph_replay_kernel_pct"] >= 90.0
    assert "use CUDA graphs" not in lo["recommendation"]
    assert "already run inside CUDA graph replays" in lo["recommendation"]
    for f in summary["findings"]:
        assert "use CUDA graphs" not in f["recommendation"], f


def _graph_trace(graph_kernels: int, eager_kernels: int) -> bytes:
    """One step: ``graph_kernels`` tiny kernels from one cudaGraphLaunch, then ``eager_kernels`` launched one by one,
    each 2 µs with 20 µs gaps (launch-bound)."""
    events: list[dict[str, Any]] = [step_event(1, 0.0, 10_000.0), step_event(2, 10_000.0, 100.0)]
    events.append(launch_event(1, 5.0, 5.0, name="cudaGraphLaunch"))
    t = 20.0
    for _ in range(graph_kernels):
        events.append(kernel_event(1, t, 2.0, name="graph_kernel"))
        t += 22.0
    for i in range(eager_kernels):
        events += [launch_event(100 + i, t - 10.0, 5.0), kernel_event(100 + i, t, 2.0, name="eager_kernel")]
        t += 22.0
    return _dump(events)


def _dump(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def test_partly_captured_steps_are_told_to_capture_the_rest() -> None:
    # GIVEN 60 of 100 tiny kernels inside one graph replay, 40 launched eagerly
    summary = dict(analyze([BytesTraceSource(_graph_trace(60, 40), name="g.json")]).summary)
    (lo,) = _findings(summary, "LaunchOverheadBound")
    # THEN the advice names the share already captured and asks to capture the rest
    assert lo["evidence"]["graph_replay_kernel_pct"] == 60.0
    assert "capture the rest" in lo["recommendation"]


# --------------------------------------------------------------------------------------- CPU collectives


def test_a_cpu_only_gloo_rank_is_communication_bound() -> None:
    # GIVEN HTA's CPU-only rank 34 of 300, whose steps wait in gloo:all_reduce (a real trace)
    summary = _summary(TRACES / "hta" / "cpu_only")
    (rank,) = summary["ranks"]
    hc = rank["communication"]["host_collectives"]
    # THEN its collectives are communication (before: no communication at all on a CPU rank)
    assert hc["calls"] == 10
    assert [n["name"] for n in hc["by_name"]] == ["gloo:all_reduce"]
    assert hc["exposed_time_us"] == hc["time_us"]  # no GPU: nothing overlaps
    (cb,) = _findings(summary, "CommunicationBound")
    assert "CPU collective" in cb["message"]
    assert "gloo" in cb["message"]
    assert cb["evidence"]["host_collective_calls"] == 10


def _host_wait_trace(cause: str) -> bytes:
    """A GPU rank: 10 steps of 1 ms; in each a 100 µs kernel, then the host spends 800 µs in ``cause`` (a gloo
    all-reduce on its worker thread, the DataLoader, or plain CPU ops) before launching the next kernel."""
    events: list[dict[str, Any]] = []
    for s in range(10):
        t0 = 1000.0 * s
        events.append(step_event(s + 1, t0, 1000.0))
        events += [launch_event(s + 1, t0 + 1.0, 4.0), kernel_event(s + 1, t0 + 10.0, 100.0, name="gemm")]
        span = {"ph": "X", "pid": 1, "ts": t0 + 120.0, "dur": 800.0}
        if cause == "gloo":
            events.append({**span, "cat": "user_annotation", "name": "gloo:all_reduce", "tid": 99})
        elif cause == "data":
            events.append({**span, "cat": "user_annotation", "tid": 1,
                           "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"})  # fmt: skip
        else:
            events.append({**span, "cat": "cpu_op", "name": "aten::cpu_work", "tid": 1})
    events.append(step_event(11, 10_000.0, 1000.0))
    return _dump(events)


def test_a_gloo_wait_is_not_the_host_launching_too_late() -> None:
    # GIVEN a GPU rank idle 89 % of each step while its host waits in a gloo all-reduce
    summary = dict(analyze([BytesTraceSource(_host_wait_trace("gloo"), name="r0.json")]).summary)
    (rank,) = summary["ranks"]
    causes = rank["idle_breakdown"]["causes"]
    # THEN the idle time is mostly waiting in a collective, named as such
    assert causes["collective_wait_pct"] >= 85.0
    # AND no CPUBound "launching too late"; the collective is communication
    assert not _findings(summary, "CPUBound")
    (cb,) = _findings(summary, "CommunicationBound")
    assert "gloo" in cb["message"]


def test_a_data_wait_is_waiting_on_data() -> None:
    # GIVEN the same rank waiting in the DataLoader instead
    summary = dict(analyze([BytesTraceSource(_host_wait_trace("data"), name="r0.json")]).summary)
    causes = summary["ranks"][0]["idle_breakdown"]["causes"]
    # THEN the idle time is waiting on data, and CPUBound does not claim it
    assert causes["data_wait_pct"] >= 85.0
    assert not _findings(summary, "CPUBound")
    assert _findings(summary, "DataloaderBottleneck")


def test_host_work_between_launches_is_the_host_busy() -> None:
    # GIVEN the host doing 800 µs of CPU work (no launch) between kernels
    summary = dict(analyze([BytesTraceSource(_host_wait_trace("cpu"), name="r0.json")]).summary)
    causes = summary["ranks"][0]["idle_breakdown"]["causes"]
    # THEN it is the host's part, and CPUBound says the host is doing other work than launching
    assert causes["collective_wait_us"] == causes["data_wait_us"] == 0.0
    assert (causes["host_busy_us"] or 0.0) + (causes["late_launch_us"] or 0.0) >= 0.85 * causes["idle_time_us"]
    (cpu,) = _findings(summary, "CPUBound")
    assert "the host" in cpu["message"]


def test_the_dataloader_bound_resnet_is_not_called_launch_bound() -> None:
    # GIVEN torch-tb-profiler's ResNet-50 sample with num_workers=0 (2021, V100): the GPU idles while the DataLoader
    # runs on the training thread
    summary = _summary(TRACES / "kineto_tb_plugin" / "resnet50_num_workers_0")
    causes = summary["ranks"][0]["idle_breakdown"]["causes"]
    # THEN most of the idle time is waiting on data (before: CPUBound, "97.4 % of the gaps are the host launching
    # too late"); DataloaderBottleneck stays
    assert causes["data_wait_pct"] > 70.0
    assert not _findings(summary, "CPUBound")
    assert _findings(summary, "DataloaderBottleneck")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 900), st.floats(1, 90)), min_size=1, max_size=12),
    st.lists(st.tuples(st.floats(0, 900), st.floats(1, 300)), max_size=4),
    st.sampled_from(["gloo", "data", "cpu"]),
)
def test_the_idle_causes_add_up_to_the_idle_time(
    kernels: list[tuple[float, float]], waits: list[tuple[float, float]], cause: str
) -> None:
    # GIVEN kernels and host waits anywhere in one step
    events: list[dict[str, Any]] = [step_event(1, 0.0, 1000.0), step_event(2, 1000.0, 10.0)]
    for i, (ts, dur) in enumerate(kernels):
        events += [launch_event(i + 1, max(ts - 5.0, 0.0), 2.0), kernel_event(i + 1, ts, dur)]
    for ts, dur in waits:
        name = {"gloo": "gloo:broadcast", "data": "enumerate(DataLoader)#_X.__next__", "cpu": "aten::x"}[cause]
        events.append({"ph": "X", "pid": 1, "tid": 5, "ts": ts, "dur": dur, "name": name,
                       "cat": "cpu_op" if cause == "cpu" else "user_annotation"})  # fmt: skip
    rank = analyze([BytesTraceSource(_dump(events), name="h.json")]).summary["ranks"][0]
    causes = rank["idle_breakdown"]["causes"]
    if causes is None:
        return
    # THEN the parts add up to the idle time (to rounding), none is negative
    parts = [
        causes[k] or 0.0
        for k in ("collective_wait_us", "data_wait_us", "sync_wait_us", "late_launch_us", "host_busy_us")
    ] + [causes["host_unexplained_us"] or 0.0, causes["gpu_side_us"] or 0.0]
    assert min(parts) >= 0.0
    assert abs(sum(parts) - causes["idle_time_us"]) <= 0.01 * len(parts)
    assert causes["idle_time_us"] == rank["temporal_breakdown"]["idle_time_us"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=8),
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=8),
)
def test_interval_difference_is_exact(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ma = merge((float(s), float(s + d)) for s, d in a)
    mb = merge((float(s), float(s + d)) for s, d in b)
    got = minus(ma, mb)
    # THEN a point is in the difference exactly when it is in a and not in b (checked on the half-integer grid)
    for x2 in range(0, 130):
        x = x2 / 2 + 0.25

        def inside(m: Merged, x: float = x) -> bool:
            return any(s <= x < e for s, e in m)

        assert inside(got) == (inside(ma) and not inside(mb))
