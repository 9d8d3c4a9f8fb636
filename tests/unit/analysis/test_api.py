"""Public API: sources, rank inference, merging, step windows, progress, rules, purity."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import (
    DEFAULT_THRESHOLDS,
    AnalysisOptions,
    AnalysisOptionsError,
    BytesTraceSource,
    FileTraceSource,
    TraceSourceError,
    analyze,
    discover_sources,
    trim_trace,
)
from profstack.analysis.sources import rank_from_name

from .synth import TraceBuilder, busy_steps


def findings(data: bytes, **opts: Any) -> dict[str, dict[str, Any]]:
    summary = analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions(**opts)).summary
    return {f["rule_id"]: f for f in summary["findings"]}


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-3.Apr_03.pt.trace.json.gz", 3),
        ("rank3.json", 3),
        ("rank_12.json", 12),
        ("trace_rank7.json.gz", 7),
        ("algo-2_1234.1700000000.pt.trace.json", 1),
        ("worker0.1623143089861.pt.trace.json.gz", None),
        ("frankly.json", None),
    ],
)
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_discover_sources_finds_traces_recursively(tmp_path: Path) -> None:
    # GIVEN a directory tree with traces, a non-trace and a duplicate path
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "rank-1.json.gz").write_bytes(gzip.compress(busy_steps().to_bytes()))
    (tmp_path / "a" / "rank-0.json").write_bytes(busy_steps().to_bytes())
    (tmp_path / "a" / "notes.txt").write_text("x")
    # WHEN discovered from the directory and one file again
    sources = discover_sources([tmp_path, tmp_path / "a" / "rank-0.json"])
    # THEN both traces once each, sorted, and a missing path is a typed error
    assert [s.name for s in sources] == ["a/b/rank-1.json.gz", "a/rank-0.json"]
    assert all(s.size_hint for s in sources)
    with pytest.raises(TraceSourceError):
        discover_sources([tmp_path / "missing"])


def test_rank_sources_and_merging() -> None:
    # GIVEN two files of rank 0 (two schedule cycles) and one file of rank 1 named by host
    cycle1 = busy_steps(2).to_bytes()
    later = TraceBuilder(distributedInfo={"rank": 0, "world_size": 2})
    for i in range(2, 4):
        later.step(i, i * 1000.0, 1000.0).gpu("k", i * 1000.0, i * 1000.0 + 10, 980.0)
    sources = [
        BytesTraceSource(cycle1, name="rank0_cycle1.json"),
        BytesTraceSource(later.to_bytes(), name="whatever.json"),
        BytesTraceSource(busy_steps(2).to_bytes(), name="algo-2_77.json"),
    ]
    # WHEN merged (default) THEN rank 0 has four steps from both files
    merged = analyze(sources, AnalysisOptions(include_last_step=True)).summary
    assert merged["rank_files_merged"] is True
    assert [(r["label"], r["steps"]["count"]) for r in merged["ranks"]] == [("0", 4), ("1", 2)]
    assert {i["name"]: i["rank_source"] for i in merged["inputs"]} == {
        "rank0_cycle1.json": "file_name",
        "whatever.json": "distributed_info",
        "algo-2_77.json": "file_name",
    }
    # WHEN kept apart THEN rank 0 appears twice with distinct labels
    apart = analyze(sources, AnalysisOptions(merge_rank_files=False, include_last_step=True)).summary
    assert apart["rank_files_merged"] is False
    assert [r["label"] for r in apart["ranks"]] == ["0.0", "0.1", "1"]
    assert apart["cross_rank"]["rank_count"] == 2


def test_step_window_limits_gpu_ops_and_steps() -> None:
    # GIVEN five steps with one kernel each
    data = busy_steps(5).to_bytes()
    # WHEN analysing steps 1..2 THEN only their kernels and steps count
    rank = analyze([BytesTraceSource(data)], AnalysisOptions(steps=(1, 2))).summary["ranks"][0]
    assert rank["window"]["steps"] == [1, 2]
    assert rank["counts"]["gpu_ops_analyzed"] == 2
    # WHEN the window matches no step THEN a typed error is recorded and no rank is reported
    result = analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions(steps=(50, 60)))
    assert result.failed_all
    assert result.errors[0].error_type == "StepWindowError"


def test_include_last_step_false_drops_last_step() -> None:
    rank = analyze([BytesTraceSource(busy_steps(4).to_bytes())], AnalysisOptions(include_last_step=False))
    r = rank.summary["ranks"][0]
    assert r["window"]["steps"] == [0, 1, 2]
    assert r["window"]["last_step_dropped"] is True
    assert r["counts"]["gpu_ops_analyzed"] == 3


def test_progress_reports_every_compressed_byte(tmp_path: Path) -> None:
    # GIVEN a gzip trace WHEN analysed with a progress callback THEN the deltas add up to the file size
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(gzip.compress(busy_steps(50).to_bytes()))
    seen: list[int] = []
    analyze([FileTraceSource(path)], progress=seen.append)
    assert sum(seen) == path.stat().st_size
    assert all(n > 0 for n in seen)


def test_options_are_validated() -> None:
    with pytest.raises(AnalysisOptionsError):
        AnalysisOptions(top_k=0)
    with pytest.raises(AnalysisOptionsError):
        AnalysisOptions(steps=(5, 2))
    with pytest.raises(AnalysisOptionsError):
        AnalysisOptions(rule_thresholds={"step_outlier_sigma": "x"})  # type: ignore[dict-item]
    opts = AnalysisOptions(rule_thresholds={"step_outlier_sigma": 2})
    assert opts.thresholds()["step_outlier_sigma"] == 2.0
    assert set(opts.thresholds()) == set(DEFAULT_THRESHOLDS)


def test_healthy_trace_has_no_warnings() -> None:
    # GIVEN a GPU busy 98 % of the time with Tensor-Core-free fp32 kernels
    found = findings(busy_steps().to_bytes())
    # THEN only the informational AMP recommendation
    assert set(found) == {"TensorCoreUnderuse"}
    assert found["TensorCoreUnderuse"]["severity"] == "info"


def test_low_utilisation_and_cpu_bound() -> None:
    # GIVEN tiny kernels launched late: the GPU waits on the host most of the time
    b = TraceBuilder()
    for i in range(200):
        b.gpu("void elementwise_kernel<float>", i * 100.0, i * 100.0 + 8, 4.0)
    b.step(1, 0, 10_000).step(2, 10_000, 10_000)
    found = findings(b.to_bytes())
    # THEN LowGPUUtilization (critical), CPUBound and LaunchOverheadBound fire with evidence
    assert found["LowGPUUtilization"]["severity"] == "critical"
    assert found["LowGPUUtilization"]["evidence"]["gpu_busy_pct"] < 10
    assert found["CPUBound"]["evidence"]["host_wait_pct"] > 50
    assert found["LaunchOverheadBound"]["evidence"]["tiny_kernel_share_pct"] == 100.0
    assert "BatchSize" not in found  # host-bound: a bigger batch is not the first fix
    # WHEN the busy threshold is lowered below the measured value THEN LowGPUUtilization is silent
    quiet = findings(b.to_bytes(), rule_thresholds={"low_gpu_util_busy_pct": 1.0})
    assert "LowGPUUtilization" not in quiet


def test_dataloader_sync_memcpy_and_outlier_rules() -> None:
    # GIVEN steps that wait for the DataLoader, synchronise while the GPU idles, copy a lot and one slow step
    b = TraceBuilder()
    t = 0.0
    for i in range(12):
        dur = 10_000.0 if i != 11 else 60_000.0
        b.step(i, t, dur)
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 3000)
        b.gpu("Memcpy HtoD (Pageable -> Device)", t + 3000, t + 3010, 2000, cat="gpu_memcpy", bytes=64 << 20)
        b.gpu("sm80_xmma_gemm_bf16bf16_bf16f32", t + 3100, t + 5100, 4000)
        # a wait the GPU is busy through costs nothing (#34): this one outlasts the GPU's work by 800 µs
        b.runtime("cudaDeviceSynchronize", t + 5200, 4700)
        t += dur
    found = findings(b.to_bytes(), include_last_step=True)
    # THEN each rule fires with its evidence
    assert found["DataloaderBottleneck"]["evidence"]["share_pct"] > 10
    assert found["ExcessiveSync"]["evidence"]["sync_calls"] == 12
    assert found["MemcpyHeavy"]["evidence"]["share_pct"] > 10
    assert found["StepOutlier"]["evidence"]["outlier_steps"] == [11]
    assert "TensorCoreUnderuse" not in found  # bf16 tensor-op kernels
    summary = analyze([BytesTraceSource(b.to_bytes())]).summary
    rank = summary["ranks"][0]
    assert rank["memory_ops"]["memcpy"][0]["direction"] == "HtoD"
    assert rank["memory_ops"]["memcpy"][0]["bandwidth_gbps"] == pytest.approx((64 << 20) / 2000 / 1000, rel=1e-3)
    assert rank["precision"][0]["precision"] == "bf16"
    assert rank["occupancy"]["tensor_core_pct_of_compute"] == 100.0


def test_load_balancing_and_stragglers() -> None:
    # GIVEN three ranks, one with twice the step time and compute
    def rank_trace(rank: int, scale: float) -> bytes:
        b = TraceBuilder(distributedInfo={"rank": rank, "world_size": 3})
        for i in range(3):
            t0 = i * 1000.0 * scale
            b.step(i, t0, 1000.0 * scale).gpu("k", t0, t0 + 5, 900.0 * scale)
        return b.to_bytes()

    sources = [BytesTraceSource(rank_trace(r, 2.0 if r == 2 else 1.0), name=f"r{r}.json") for r in range(3)]
    summary = analyze(sources).summary
    found = {f["rule_id"]: f for f in summary["findings"]}
    # THEN rank 2 is a straggler and the load-balance spread is flagged
    assert [s["rank"] for s in summary["cross_rank"]["stragglers"]] == [2]
    assert found["Straggler"]["ranks"] == [2]
    assert found["LoadBalancing"]["evidence"]["spread_pct"] > 20
    assert [row["rank"] for row in summary["cross_rank"]["table"]] == [0, 1, 2]


def test_trim_of_truncated_trace_is_still_valid_json() -> None:
    data = busy_steps(200).to_bytes()
    out = io.BytesIO()
    written = trim_trace(BytesTraceSource(data[: len(data) // 2]), out, steps=None, max_events=None)
    doc = json.loads(out.getvalue())
    assert 0 < written == len(doc["traceEvents"])


def test_analysis_package_imports_no_aws_sdk() -> None:
    # GIVEN a fresh interpreter WHEN the engine is imported and run THEN boto3/botocore are never loaded
    code = (
        "import sys, profstack.analysis as a; "
        'a.analyze([a.BytesTraceSource(b\'{"traceEvents": [{"ph":"X","cat":"cpu_op","name":"x","ts":1,"dur":1}]}\')]); '
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'aws_cdk')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_gpu_ops_without_any_recorded_launch_are_kept() -> None:
    # GIVEN three steps of kernels but no runtime (launch) events at all
    b = busy_steps(3)
    b.events = [e for e in b.events if e["cat"] != "cuda_runtime"]
    # WHEN analysed THEN the kernels are selected by their own time (HTA would drop all of them)
    rank = analyze([BytesTraceSource(b.to_bytes())], AnalysisOptions(include_last_step=True)).summary["ranks"][0]
    assert rank["counts"]["gpu_ops_analyzed"] == 3
    assert rank["temporal_breakdown"]["compute_pct"] > 90


def test_an_unreadable_source_does_not_sink_the_others() -> None:
    # GIVEN a source whose open() fails unexpectedly, next to a good one
    class Broken:
        name = "broken.json"
        size_hint = None

        def open(self) -> Any:
            raise RuntimeError("disk on fire")

    result = analyze([Broken(), BytesTraceSource(busy_steps().to_bytes(), name="ok.json")])
    # THEN the good one is analysed and the broken one recorded with a typed, one-line error
    assert len(result.summary["ranks"]) == 1
    assert result.errors[0].error_type == "InternalAnalysisError"
    assert "disk on fire" in result.errors[0].message
    assert not result.complete


def test_no_sources_is_not_complete() -> None:
    result = analyze([])
    assert result.failed_all
    assert not result.complete


def test_each_rank_is_analysed_before_the_next_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN two ranks whose files announce their rank in the header
    from profstack.analysis import engine

    log: list[str] = []

    class Logged(BytesTraceSource):
        def open(self) -> Any:
            log.append(f"open {self.name}")
            return super().open()

    real = engine.analyze_rank

    def spy(rd: Any, *args: Any) -> Any:
        log.append(f"analyse {rd.rank}")
        return real(rd, *args)

    monkeypatch.setattr(engine, "analyze_rank", spy)
    b = busy_steps(2)
    b.top["distributedInfo"] = {"rank": 1}
    a = busy_steps(2)
    a.top["distributedInfo"] = {"rank": 0}
    # WHEN analysed (rank 1 given first)
    analyze([Logged(b.to_bytes(), name="x.json"), Logged(a.to_bytes(), name="y.json")])
    # THEN after the header peeks, rank 0 is parsed and analysed (columns released) before rank 1 is read, each file
    # read once (the op types of its untyped kernels, "k", come from the same read: #44)
    assert log == ["open x.json", "open y.json", "open y.json", "analyse 0", "open x.json", "analyse 1"]


def test_mispredicted_rank_is_still_analysed() -> None:
    # GIVEN "rank1.json" whose distributedInfo (after traceEvents) says rank 0, and a real rank-0 file
    late = b'{"traceEvents": ' + json.dumps(busy_steps(2).events).encode() + b', "distributedInfo": {"rank": 0}}'
    sources = [BytesTraceSource(late, name="rank1.json"), BytesTraceSource(busy_steps(3).to_bytes(), name="rank0.json")]
    # WHEN analysed THEN both files count, as two entries of rank 0
    summary = analyze(sources, AnalysisOptions(include_last_step=True)).summary
    assert [(r["rank"], r["label"]) for r in summary["ranks"]] == [(0, "0.0"), (0, "0.1")]
    assert sorted(r["steps"]["count"] for r in summary["ranks"]) == [2, 3]
