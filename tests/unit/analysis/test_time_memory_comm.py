"""Summary 1.2 sections on real traces: activity over time, memory from profile_memory events, CUDA graphs,
exposed communication (CommunicationBound over CPUBound), conversion kernels apart from math precision."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisResult, classify, rules
from profstack.analysis.metrics import RankInternal
from profstack.analysis.options import RuleThresholds
from profstack.analysis.timebins import MAX_BINS, TimeBins

TRACE_FILTER = ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz")
MEMORY_GPU = "hta/df_index_resolver/df_index_resolver.json.gz"
MEMORY_CPU = "own/cpu_train_loop_mem_stack_rank0.pt.trace.json.gz"
GRAPHS = "hta/trace_diff/test/test.json.gz"
INTERNAL = RankInternal(tiny_kernels=0, kernels_selected=0, step_total_us=0.0)

Analyse = Callable[..., AnalysisResult]


def _run(analysis_cache: Analyse, traces_dir: Path, *rels: str) -> dict[str, Any]:
    return dict(analysis_cache(tuple(traces_dir / r for r in rels)).summary)


# ------------------------------------------------------------------------------------------ over time


def test_gpu_busy_over_time_adds_up_to_the_busy_time(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN a real two-rank trace
    summary = _run(analysis_cache, traces_dir, *TRACE_FILTER)
    for r in summary["ranks"]:
        tl = r["timeline"]
        tb = r["temporal_breakdown"]
        # THEN the bins cover the GPU span and their busy shares sum to the busy time (span - idle)
        assert tl["bins"] == len(tl["gpu_busy_pct"]) == len(tl["cpu_ops_per_ms"]) > 10
        assert tl["start_us"] == pytest.approx(r["window"]["start_us"])
        assert tl["bin_us"] * tl["bins"] == pytest.approx(tb["gpu_span_us"], rel=1e-6)
        busy = sum(p / 100 * tl["bin_us"] for p in tl["gpu_busy_pct"])
        assert busy == pytest.approx(tb["gpu_span_us"] - tb["idle_time_us"], rel=0.01)
        comm = sum(p / 100 * tl["bin_us"] for p in tl["communication_pct"])
        assert comm == pytest.approx(r["communication"]["comm_time_us"], rel=0.01)
        assert all(0 <= p <= 100 for p in tl["gpu_busy_pct"])
        # AND the CPU side saw operators and launches in the window
        assert sum(tl["cpu_ops_per_ms"]) > 0
        assert sum(tl["launches_per_ms"]) > 0


def test_time_bins_stay_bounded_and_conserve_time() -> None:
    # GIVEN many intervals over a long, growing span, added out of order
    rng = random.Random(13)
    tb = TimeBins(("busy",))
    total = 0.0
    for _ in range(5000):
        s = rng.uniform(-1e6, 1e8)
        d = rng.uniform(0, 5e4)
        tb.add_interval(0, s, s + d)
        total += d
    # THEN memory is bounded and no time is lost
    assert tb.n <= MAX_BINS
    assert sum(tb.series[0]) == pytest.approx(total, rel=1e-9)
    assert tb.origin is not None
    lo, hi = tb.origin, tb.origin + tb.n * tb.width
    assert sum(tb.resample(0, lo, hi, 100)) == pytest.approx(total, rel=1e-9)


# ------------------------------------------------------------------------------------------ memory


def test_gpu_memory_from_profile_memory_events(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN the trace with 28k [memory] events on cuda:1 and the CPU
    summary = _run(analysis_cache, traces_dir, MEMORY_GPU)
    mem = summary["ranks"][0]["memory"]
    devices = {d["device"]: d for d in mem["devices"]}
    # THEN per device: peaks of allocated and reserved memory, matching the events' own totals
    assert set(devices) == {"cuda:1", "cpu"}
    gpu = devices["cuda:1"]
    assert gpu["peak_reserved_bytes"] == 12_782_141_440 >= gpu["peak_allocated_bytes"] > 5_000_000_000
    assert max(gpu["timeline"]["max_allocated_bytes"]) == gpu["peak_allocated_bytes"]
    assert gpu["allocations"] > 0
    assert gpu["frees"] > 0
    assert len(gpu["step_peaks"]) >= 2
    # AND the operators that allocate most are real ops (not the allocation primitive aten::empty)
    names = [o["name"] for o in mem["top_operators"]]
    assert names
    assert not any(n.startswith("aten::empty") for n in names)
    assert mem["top_operators"][0]["bytes"] >= mem["top_operators"][-1]["bytes"]
    assert mem["attributed"]
    assert mem["complete"]


def test_cpu_memory_and_a_trace_without_memory_events(analysis_cache: Analyse, traces_dir: Path) -> None:
    cpu = _run(analysis_cache, traces_dir, MEMORY_CPU)["ranks"][0]["memory"]
    assert [d["device"] for d in cpu["devices"]] == ["cpu"]
    assert cpu["events"] > 0
    assert "aten::mkldnn_convolution" in [o["name"] for o in cpu["top_operators"]]
    none = _run(analysis_cache, traces_dir, *TRACE_FILTER)["ranks"][0]["memory"]
    assert none == {"events": 0, "complete": True, "attributed": True, "devices": [], "top_operators": []}


def test_gpu_memory_increase_fires_on_a_rising_gpu_peak(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN the real GPU memory trace (flat across steps) and a copy whose last step peaks 12 % higher
    rank = _run(analysis_cache, traces_dir, MEMORY_GPU)["ranks"][0]
    th = RuleThresholds()
    assert not [f for f in rules.rank_findings(rank, INTERNAL, th) if f["rule_id"] == "GPUMemoryIncrease"]
    rising = copy.deepcopy(rank)
    dev = next(d for d in rising["memory"]["devices"] if d["device"] == "cuda:1")
    dev["step_peaks"][-1]["peak_allocated_bytes"] = int(dev["step_peaks"][0]["peak_allocated_bytes"] * 1.12)
    dev["increase_pct"] = 12.0
    # THEN GPUMemoryIncrease fires for that device, Debugger's default 5 %
    found = [f for f in rules.rank_findings(rising, INTERNAL, th) if f["rule_id"] == "GPUMemoryIncrease"]
    assert len(found) == 1
    assert found[0]["evidence"]["device"] == "cuda:1"


# ------------------------------------------------------------------------------------------ CUDA graphs


def test_cuda_graph_launches_are_grouped_into_graphs(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN the CUDA-graph trace: 12 cudaGraphLaunch, each running hundreds of kernels
    cg = _run(analysis_cache, traces_dir, GRAPHS)["ranks"][0]["cuda_graphs"]
    # THEN the launches are named, grouped into graphs with their kernels per launch
    assert cg["launch_apis"] == ["cudaGraphLaunch"]
    assert cg["graph_launches"] == sum(g["launches"] for g in cg["graphs"]) > 1
    assert all(g["kernels_per_launch"] > 100 for g in cg["graphs"])
    assert cg["kernels"] == sum(g["launches"] * g["kernels_per_launch"] for g in cg["graphs"])
    assert cg["complete"]


def test_no_graphs_in_a_plain_trace(analysis_cache: Analyse, traces_dir: Path) -> None:
    assert _run(analysis_cache, traces_dir, *TRACE_FILTER)["ranks"][0]["cuda_graphs"] is None


# ------------------------------------------------------------------------------------------ communication


def test_exposed_communication_and_communication_bound(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN the demo's ranks, where NCCL SendRecv dominates the GPU time
    summary = _run(analysis_cache, traces_dir, *TRACE_FILTER)
    ids = [(f["rule_id"], tuple(f["ranks"])) for f in summary["findings"]]
    for r in summary["ranks"]:
        cm = r["communication"]
        # THEN exposed = communication time without computation, as a share of step time
        assert cm["exposed_time_us"] == pytest.approx(cm["comm_time_us"] - cm["overlap_time_us"], abs=0.01)
        assert cm["exposed_pct_of_step"] == pytest.approx(100 * cm["exposed_time_us"] / cm["step_time_us"], abs=0.01)
        # AND CommunicationBound fires and takes precedence over CPUBound for the rank
        assert ("CommunicationBound", (r["rank"],)) in ids
        assert ("CPUBound", (r["rank"],)) not in ids
    row = summary["cross_rank"]["table"][0]
    assert row["exposed_comm_pct_of_step"] == summary["ranks"][0]["communication"]["exposed_pct_of_step"]


def test_cpu_bound_still_fires_without_exposed_communication(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN a demo rank whose communication is made fully overlapped
    rank = copy.deepcopy(_run(analysis_cache, traces_dir, *TRACE_FILTER)["ranks"][0])
    rank["communication"]["exposed_time_us"] = 0.0
    rank["communication"]["exposed_pct_of_step"] = 0.0
    ids = {f["rule_id"] for f in rules.rank_findings(rank, INTERNAL, RuleThresholds())}
    # THEN the host-wait gaps are the CPU's again
    assert "CPUBound" in ids
    assert "CommunicationBound" not in ids


# ------------------------------------------------------------------------------------------ precision


@pytest.mark.parametrize(
    ("name", "conversion"),
    [("void fbgemm_gpu::_compute_FP8_quantize_cuda_kernel<float>", True),
     ("void transformer_engine::cast_transpose_kernel<fp8e4m3>", True), ("scaled_fp8_quant_kernel", True),
     ("void dequantize_kernel", True), ("convertFp32ToFp16", True),
     ("sm90_xmma_gemm_e4m3e4m3_f32_tn", False), ("broadcast_kernel", False), ("volta_sgemm_128x64_nn", False)],
)  # fmt: skip
def test_conversion_kernels(name: str, conversion: bool) -> None:
    assert classify.is_conversion(name) is conversion


def test_fp8_quantise_kernels_are_not_fp8_math(analysis_cache: Analyse, traces_dir: Path) -> None:
    # GIVEN the demo rank, which runs FBGEMM's FP8 quantise kernel
    r = _run(analysis_cache, traces_dir, *TRACE_FILTER)["ranks"][0]
    conv = r["conversion_kernels"]
    # THEN it is counted as a conversion, apart from the precision shares (which still sum to 100 %)
    assert conv["count"] > 0
    assert conv["time_us"] > 0
    assert any(k["precision"] == "conversion" for k in r["top_kernels_by_time"])
    assert sum(p["pct"] for p in r["precision"]) == pytest.approx(100.0, abs=0.05)
    quantise = next(k for k in r["top_kernels_by_time"] if "FP8_quantize" in k["name"])
    fp8_conv = next(c for c in conv["by_precision"] if c["precision"] == "fp8")
    assert fp8_conv["time_us"] >= quantise["total_us"]  # its time is in the conversions, not in fp8 math
