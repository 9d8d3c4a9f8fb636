"""TensorBoard scalars from a real summary, read back by TensorBoard's own event reader: one tag style,
per-step and per-rank curves (several points per tag), not single dots."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lambdas.trace_processor.summary_tools import job_metrics
from lambdas.trace_processor.tb_scalars import snake, summary_scalars
from lambdas.trace_processor.tfevents import scalar_event_file
from profstack.analysis import AnalysisOptions, FileTraceSource, analyze
from tests.conftest import TRACES_DIR

TAG = re.compile(r"^profstack/[a-z0-9_]+(/rank_[A-Za-z0-9_.-]+)?$")


@pytest.fixture(scope="module")
def two_rank_summary() -> dict[str, Any]:
    files = ["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"]
    # every recorded step (the default drops the last one, like HTA): the two-step ranks then draw curves
    options = AnalysisOptions(include_last_step=True)
    return dict(analyze([FileTraceSource(TRACES_DIR / f) for f in files], options).summary)


def _accumulator(tmp_path: Path, data: bytes) -> Any:
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    (tmp_path / "events.out.tfevents.1796565600.profstack").write_bytes(data)
    acc = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return acc


def test_tensorboard_reads_per_rank_curves_in_one_tag_style(two_rank_summary: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN the scalars of a real two-rank job, written as an event file
    first, steps = summary_scalars(two_rank_summary, job_metrics(two_rank_summary, trace_bytes=123))
    acc = _accumulator(tmp_path, scalar_event_file(steps, wall_time=1_796_565_600.0, scalars=first))
    tags = set(acc.Tags()["scalars"])
    # THEN every tag has the one style, job-wide and per rank
    assert tags
    assert all(TAG.match(t) for t in tags), sorted(t for t in tags if not TAG.match(t))
    assert "profstack/gpu_idle_percent" in tags
    assert "profstack/step_time_ms" in tags
    for rank in ("0", "1"):
        # AND per-step and over-time series are curves: several points each, at increasing steps
        for metric in ("step_time_ms", "gpu_busy_pct_over_time", "cpu_ops_per_ms_over_time"):
            points = acc.Scalars(f"profstack/{metric}/rank_{rank}")
            assert len(points) >= 2, metric
            assert [p.step for p in points] == sorted(p.step for p in points)
        assert len(acc.Scalars(f"profstack/gpu_busy_pct_over_time/rank_{rank}")) == len(
            two_rank_summary["ranks"][int(rank)]["timeline"]["gpu_busy_pct"]
        )
    # AND the values are the summary's
    step = two_rank_summary["ranks"][1]["steps"]["durations"][0]
    point = next(p for p in acc.Scalars("profstack/step_time_ms/rank_1") if p.step == step["step"])
    assert point.value == pytest.approx(step["duration_us"] / 1000.0, rel=1e-6)
    busy = acc.Scalars("profstack/gpu_busy_pct/rank_0")[0].value
    assert busy == pytest.approx(100 - two_rank_summary["ranks"][0]["temporal_breakdown"]["idle_pct"], rel=1e-5)


def test_memory_peaks_per_step_for_a_profile_memory_trace(tmp_path: Path) -> None:
    # GIVEN a profile_memory trace (CPU allocations per step)
    path = TRACES_DIR / "own/cpu_train_loop_mem_stack_rank0.pt.trace.json.gz"
    summary = dict(analyze([FileTraceSource(path)]).summary)
    first, steps = summary_scalars(summary, {})
    acc = _accumulator(tmp_path, scalar_event_file(steps, wall_time=1.0, scalars=first))
    # THEN the per-step memory peak is a curve
    points = acc.Scalars("profstack/memory_peak_bytes/rank_0")
    assert len(points) >= 2
    assert all(p.value > 0 for p in points)


@pytest.mark.parametrize(
    ("name", "tag"),
    [("GPUIdlePercent", "gpu_idle_percent"), ("LaunchDelayP95Micros", "launch_delay_p95_micros"),
     ("FindingsCritical", "findings_critical"), ("step_time_ms", "step_time_ms")],
)  # fmt: skip
def test_metric_names_become_snake_case(name: str, tag: str) -> None:
    assert snake(name) == tag
