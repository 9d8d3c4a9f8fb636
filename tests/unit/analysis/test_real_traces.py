"""Every shared trace parses, validates against the schema, and agrees with HTA 0.5.0 where it can."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisResult

from .conftest import TRACES, all_trace_files

TraceRunner = Callable[..., AnalysisResult]

ALL_FILES = all_trace_files()


@pytest.mark.parametrize("path", ALL_FILES, ids=[str(p.relative_to(TRACES)) for p in ALL_FILES])
def test_every_shared_trace_is_analysed_and_valid(
    path: Path, analysis_cache: TraceRunner, summary_validator: Callable[[dict[str, Any]], None]
) -> None:
    # GIVEN a real trace WHEN analysed
    result = analysis_cache((path,))
    # THEN it is complete, has one rank and validates against the schema
    assert result.complete, [e.message for e in result.errors]
    summary = result.summary
    summary_validator(summary)
    json.dumps(summary, allow_nan=False)  # strict JSON: no NaN or Infinity anywhere
    assert len(summary["ranks"]) == 1
    rank = summary["ranks"][0]
    assert rank["counts"]["events"] > 0
    if rank["has_gpu"]:
        tb = rank["temporal_breakdown"]
        assert tb["gpu_span_us"] > 0
        assert abs(tb["idle_pct"] + tb["compute_pct"] + tb["non_compute_pct"] - 100.0) < 0.01
        assert rank["top_kernels_by_time"], "a GPU trace has kernels"


def test_trace_variants_are_recognised(traces_dir: Path, analysis_cache: TraceRunner) -> None:
    # GIVEN the format variants named in the trace README
    def rank_of(rel: str) -> dict[str, Any]:
        rank: dict[str, Any] = analysis_cache((traces_dir / rel,)).summary["ranks"][0]
        return rank

    # 2021 capitalised categories, string tid "stream 7", Operator-category steps
    old = rank_of("kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
    assert old["counts"]["gpu_kernels"] == 8772
    assert [s["stream"] for s in old["idle_breakdown"]["per_stream"]] == [7]
    assert old["window"]["steps"] == [5, 6, 7, 8, 9, 10]
    assert old["dataloader"]["events"] > 0
    assert old["dataloader"]["share_pct"] > 0
    # ROCm: string stream "0x0" on runtime events, hip launches
    amd = rank_of("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert amd["counts"]["gpu_kernels"] == 14
    assert amd["launch_delay"]["count"] > 0
    # driver-API launch (cuLaunchKernel, cat cuda_driver) is correlated
    triton = rank_of("hta/triton_example/triton_example.json.gz")
    assert triton["launch_delay"]["count"] == 1
    # CUDA graphs: one correlation, many kernels
    graphs = rank_of("hta/trace_diff/test/test.json.gz")
    assert graphs["launch_delay"]["count"] < graphs["counts"]["gpu_ops_analyzed"]
    # CPU-only rank: rank from distributedInfo, no GPU section
    cpu = rank_of("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert cpu["rank"] == 34
    assert not cpu["has_gpu"]
    # cuda_sync events and sync runtime calls
    alex = rank_of("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    assert alex["sync"]["gpu_events"] == 41
    assert alex["sync"]["calls"] > 0
    # memcpy directions and bytes
    ns = rank_of("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    directions = {m["direction"] for m in ns["memory_ops"]["memcpy"]}
    assert "DtoD" in directions
    assert all(m["bytes"] > 0 for m in ns["memory_ops"]["memcpy"])
    # NCCL kernels on a second stream: communication and overlap
    nccl = rank_of("hta/nccl_parser_config/nccl_data.json.gz")
    assert nccl["communication"]["kernel_count"] > 0
    assert nccl["communication"]["overlap_time_us"] > 0
    # relative timestamps with baseTimeNanoseconds; rank from file name (rank0)
    own = rank_of("own/cpu_train_loop_rank0.pt.trace.json")
    assert own["steps"]["count"] == 3
    assert own["annotations"]["cpu"]


def test_two_ranks_make_a_cross_rank_table(traces_dir: Path, analysis_cache: TraceRunner) -> None:
    # GIVEN the two sampled ranks of one job WHEN analysed together
    files = (
        traces_dir / "hta/trace_filter/sampled_rank-0.json.gz",
        traces_dir / "hta/trace_filter/sampled_rank-1.json.gz",
    )
    summary = analysis_cache(files).summary
    # THEN both ranks appear with a cross-rank table and load-balance numbers
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["cross_rank"]["rank_count"] == 2
    lb = summary["cross_rank"]["load_balance"]
    assert lb["min"] <= lb["mean"] <= lb["max"]
    assert lb["spread_pct"] >= 0


def _reference_cases() -> list[tuple[str, str]]:
    ref_path = TRACES / "reference_values" / "hta_0.5.0.json"
    if not ref_path.exists():
        return []
    ref = json.loads(ref_path.read_text())["traces"]
    return [(key, mode) for key, entry in ref.items() for mode in ("default", "include_last_step") if mode in entry]


@pytest.mark.parametrize(("key", "mode"), _reference_cases())
def test_agrees_with_hta_050(key: str, mode: str, hta_reference: dict[str, Any], analysis_cache: TraceRunner) -> None:
    # GIVEN HTA 0.5.0 reference values and the same setting (drop the last step or not)
    entry = hta_reference["traces"][key]
    expected = entry[mode]
    files = entry["files"] if isinstance(entry["files"], list) else [entry["files"]]
    # WHEN analysed with a large top_k so every reference kernel is listed
    result = analysis_cache(
        tuple(TRACES / f for f in files), include_last_step=(mode == "include_last_step"), top_k=100_000
    )
    ranks = {r["rank"]: r for r in result.summary["ranks"]}
    # THEN the analysed steps match
    for r in ranks.values():
        assert r["window"]["steps"] == expected["profiler_steps"]
    # temporal breakdown within 0.5 percentage points
    for row in expected["temporal_breakdown"]:
        tb = ranks[row["rank"]]["temporal_breakdown"]
        assert tb["idle_pct"] == pytest.approx(row["idle_time_pctg"], abs=0.5)
        assert tb["compute_pct"] == pytest.approx(row["compute_time_pctg"], abs=0.5)
        assert tb["non_compute_pct"] == pytest.approx(row["non_compute_time_pctg"], abs=0.5)
    # idle breakdown per stream: category shares within 0.5 percentage points
    ref_idle: dict[tuple[int, int], dict[str, float]] = {}
    for row in expected["idle_time_breakdown"]:
        ref_idle.setdefault((row["rank"], row["stream"]), {})[row["idle_category"]] = row["idle_time"]
    for (rank, stream), cats in ref_idle.items():
        mine = next(s for s in ranks[rank]["idle_breakdown"]["per_stream"] if s["stream"] == stream)
        got = {"host_wait": mine["host_wait_us"], "kernel_wait": mine["kernel_wait_us"], "other": mine["other_us"]}
        ref_total, got_total = sum(cats.values()), sum(got.values())
        for cat, got_us in got.items():
            ref_pct = 100 * cats.get(cat, 0.0) / ref_total if ref_total else 0.0
            got_pct = 100 * got_us / got_total if got_total else 0.0
            assert got_pct == pytest.approx(ref_pct, abs=0.5), (rank, stream, cat)
    # kernel-type shares (across ranks, with HTA's "X overlapping Y" classes) within 0.5 pp
    agg: dict[str, float] = {}
    for r in ranks.values():
        for kt in r["kernel_types"]:
            agg[kt["kernel_type"]] = agg.get(kt["kernel_type"], 0.0) + kt["time_us"]
    total = sum(agg.values())
    for row in expected["kernel_type_breakdown"]:
        assert 100 * agg.get(row["kernel_type"], 0.0) / total == pytest.approx(row["percentage"], abs=0.5)
    # top kernels: per-rank totals within 1 %
    for row in expected["top_kernels"]:
        if row["name"] == "others":
            continue
        mine = next(k for k in ranks[row["rank"]]["top_kernels_by_time"] if k["name"] == row["name"])
        assert mine["total_us"] == pytest.approx(row["sum (us)"], rel=0.01)


@pytest.mark.parametrize(("key", "mode"), _reference_cases())
def test_launch_delay_close_to_hta_050(
    key: str, mode: str, hta_reference: dict[str, Any], analysis_cache: TraceRunner
) -> None:
    # GIVEN HTA's CUDA launch statistics (per correlation id)
    entry = hta_reference["traces"][key]
    files = entry["files"] if isinstance(entry["files"], list) else [entry["files"]]
    result = analysis_cache(
        tuple(TRACES / f for f in files), include_last_step=(mode == "include_last_step"), top_k=100_000
    )
    for rank in result.summary["ranks"]:
        ref = entry[mode]["cuda_launch_stats"].get(str(rank["rank"]), {})
        if not ref.get("n"):
            continue  # HTA found no launches (ROCm runtime rows carry a stream there)
        ld = rank["launch_delay"]
        # THEN counts agree within 2 % and the median / max delay within 1 % (HTA rounds to whole µs)
        assert ld["count"] == pytest.approx(ref["n"], rel=0.02)
        assert ld["p50_us"] == pytest.approx(ref["launch_delay"]["p50"], rel=0.01, abs=1.5)
        assert ld["max_us"] == pytest.approx(ref["launch_delay"]["max"], rel=0.01, abs=1.5)


def test_precision_covers_computation_kernels_only(traces_dir: Path, analysis_cache: Any) -> None:
    # GIVEN a trace whose largest kernel is an NCCL int8_t SendRecv (hta/negative_queue_length_values_check)
    result = analysis_cache((traces_dir / "hta" / "negative_queue_length_values_check" / "rank0.json.gz",))
    (rank,) = result.summary["ranks"]
    classes = {p["precision"] for p in rank["precision"]}
    precision_us = sum(p["time_us"] for p in rank["precision"])
    # kernel_types are HTA-style unions; rows starting with COMPUTATION bound the per-kernel sum
    union_us = next(k["time_us"] for k in rank["kernel_types"] if k["kernel_type"] == "COMPUTATION")
    with_overlaps_us = sum(k["time_us"] for k in rank["kernel_types"] if k["kernel_type"].startswith("COMPUTATION"))
    communication_us = next(k["time_us"] for k in rank["kernel_types"] if k["kernel_type"] == "COMMUNICATION")
    # THEN the NCCL kernel is not counted as int8 math, and precision time is computation time only
    assert "int8" not in classes
    assert union_us <= precision_us <= with_overlaps_us * 1.01
    assert precision_us < union_us + communication_us / 2
    assert sum(p["pct"] for p in rank["precision"]) == pytest.approx(100.0, abs=0.1)
    # AND communication/memory rows in the top-kernel tables carry no precision
    for row in rank["top_kernels_by_time"] + rank["top_kernels_by_count"]:
        if row["kernel_type"] != "COMPUTATION":
            assert row["precision"] == "n/a", row["name"]
    assert any(row["kernel_type"] == "COMMUNICATION" for row in rank["top_kernels_by_time"])
