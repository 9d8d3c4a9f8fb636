"""The bounded streaming GPU pass gives the same summary as the buffered pass, and falls back when it must."""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, FileTraceSource, analyze, gpu, parse, reader
from profstack.analysis.sketch import DelayDistribution
from profstack.analysis.stats import quantile

from .conftest import TRACES, all_trace_files
from .synth import cycle_events, kernel_event, launch_event, step_event
from .test_properties import kineto_layout, traces

ALL_FILES = all_trace_files()


def _squeeze(monkeypatch: pytest.MonkeyPatch, *, window: int, launch_capacity: int, flush: int) -> None:
    """Shrink every bound, and parse in ~16 KB batches so the feed is drained many times per trace."""
    monkeypatch.setattr(parse, "BATCH_BYTES", 16 << 10)
    monkeypatch.setattr(reader, "READ_SIZE", 16 << 10)
    monkeypatch.setattr(reader, "OUT_SIZE", 16 << 10)
    monkeypatch.setattr(gpu, "REORDER_WINDOW_OPS", window)
    monkeypatch.setattr(gpu, "DRAIN_BATCH_OPS", max(1, window // 4))
    monkeypatch.setattr(gpu, "LAUNCH_CAPACITY", launch_capacity)
    monkeypatch.setattr(gpu.GpuAccumulator, "FLUSH_INTERVALS", flush)


def _force_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    real_finish = gpu.GpuFeed.finish

    def finish(self: gpu.GpuFeed, final: gpu.Selection) -> gpu.GpuAccumulator:
        if self.bounded:
            raise gpu.StreamingAbort("forced by the test")
        return real_finish(self, final)

    monkeypatch.setattr(gpu.GpuFeed, "finish", finish)


def _rank(path: Path, opts: AnalysisOptions | None = None) -> dict[str, Any]:
    result = analyze([FileTraceSource(path)], opts)
    assert len(result.summary["ranks"]) == 1
    rank: dict[str, Any] = result.summary["ranks"][0]
    return rank


def _assert_same(a: Any, b: Any, where: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list), where
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float | int):
        # the streaming pass folds interval partitions in chunks: sums may differ in the last rounded digit
        assert b == pytest.approx(a, rel=1e-9, abs=2e-3), where
    else:
        assert a == b, where


def _comparable(rank: dict[str, Any]) -> dict[str, Any]:
    out = dict(rank)
    out.pop("gpu_analysis")
    return out


@pytest.mark.parametrize("window", [256, 8192], ids=["window 256", "window 8192"])
@pytest.mark.parametrize("path", ALL_FILES, ids=[str(p.relative_to(TRACES)) for p in ALL_FILES])
def test_squeezed_streaming_pass_matches_the_buffered_pass(
    path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a real trace analysed buffered (every op held, exact join, full sort)
    with monkeypatch.context() as m:
        _force_buffered(m)
        buffered = _rank(path)
    assert buffered["gpu_analysis"] == {"mode": "buffered", "reason": "forced by the test"}
    # WHEN it is streamed in 16 KB batches, ops handed over every window/4 ops, launches pruned to the
    # newest 8 windows' worth and the interval partition folded every 16 intervals
    _squeeze(monkeypatch, window=window, launch_capacity=8 * window, flush=16)
    streamed = _rank(path)
    # THEN the summary is the same; with a window above the largest reordering in the shared traces
    # (~7,700 ops) every trace streams, with 256 the multi-stream ones fall back and say why
    mode = streamed["gpu_analysis"]
    if window == 8192:
        assert mode == {"mode": "streaming", "reason": None}
    else:
        assert mode["mode"] == "streaming" or mode["reason"], mode
    _assert_same(_comparable(buffered), _comparable(streamed))


def test_sorted_traces_stream_and_unsorted_ones_fall_back_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a reorder buffer of only 64 ops
    _squeeze(monkeypatch, window=64, launch_capacity=16384, flush=16)
    # WHEN a single-stream trace in start order is analysed THEN it streams
    ns = next(p for p in ALL_FILES if "ns_resolution_trace" in str(p))
    assert _rank(ns)["gpu_analysis"] == {"mode": "streaming", "reason": None}
    # WHEN a multi-stream trace whose ops are thousands out of order is analysed
    multi = next(p for p in ALL_FILES if "df_index_resolver" in str(p))
    mode = _rank(multi)["gpu_analysis"]
    # THEN it falls back to the buffered pass and says why
    assert mode["mode"] == "buffered"
    assert "out of start order beyond 64 ops" in mode["reason"]


def test_default_bounds_stream_every_shared_trace() -> None:
    # GIVEN the default bounds WHEN every shared trace is analysed THEN none needs the buffered pass
    modes = {p.name: _rank(p)["gpu_analysis"] for p in ALL_FILES}
    assert all(m == {"mode": "streaming", "reason": None} for m in modes.values()), modes


def _kineto(events: list[dict[str, Any]]) -> BytesTraceSource:
    return BytesTraceSource(data=json.dumps({"traceEvents": events}).encode(), name="rank0.pt.trace.json")


def test_a_step_after_the_gpu_ops_changes_the_selection_and_reparses_buffered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a trace whose last ProfilerStep is written after its GPU ops, with ops leaving the buffer early
    _squeeze(monkeypatch, window=2, launch_capacity=16, flush=16)
    events = [step_event(1, 0, 100), step_event(2, 100, 100)]
    for i in range(30):
        events += [launch_event(i, 10 * i), kernel_event(i, 10 * i + 3)]
    events.append(step_event(3, 200, 100))
    # WHEN analysed (keeping the last step)
    rank = analyze([_kineto(events)], AnalysisOptions(include_last_step=True)).summary["ranks"][0]
    # THEN the frozen selection (ops launched up to the end of step 2, t=200) no longer matches, the file
    # is parsed again buffered, and the selection uses the real last step: all 30 kernels (launched up to
    # t=290) are analysed, not the 21 the frozen selection would have kept
    assert rank["gpu_analysis"]["mode"] == "buffered"
    assert "changed which ops are analysed" in rank["gpu_analysis"]["reason"]
    assert rank["counts"]["gpu_ops_analyzed"] == 30
    # AND with HTA's exclusion of the last step, the 20 kernels launched before t=200 remain
    excl = analyze([_kineto(events)], AnalysisOptions(include_last_step=False)).summary["ranks"][0]
    assert excl["counts"]["gpu_ops_analyzed"] == 20


def test_a_launch_arriving_after_its_op_left_the_window_reparses_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a kernel whose launch record comes 40 ops later than the kernel (a 4-op window), read in
    # batches of about 1 KB so the kernel is analysed before its launch is parsed
    _squeeze(monkeypatch, window=4, launch_capacity=1024, flush=16)
    monkeypatch.setattr(reader, "READ_SIZE", 1024)
    monkeypatch.setattr(reader, "OUT_SIZE", 1024)
    events = [kernel_event(0, 3)]
    events += [e for i in range(1, 41) for e in (launch_event(i, 10 * i), kernel_event(i, 10 * i + 3))]
    events.append(launch_event(0, 1))
    # WHEN analysed
    rank = analyze([_kineto(events)]).summary["ranks"][0]
    # THEN the buffered pass joins it: all 41 kernels have a launch delay
    assert rank["gpu_analysis"]["mode"] == "buffered"
    assert "came after its GPU op was analysed" in rank["gpu_analysis"]["reason"]
    assert rank["launch_delay"]["count"] == 41


def test_a_pruned_launch_reparses_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a launch followed by 20 other launches, with room for 4 (pruned above 8), before its kernel
    _squeeze(monkeypatch, window=1024, launch_capacity=4, flush=16)
    events = [launch_event(0, 1)] + [launch_event(i, 1 + i) for i in range(1, 21)] + [kernel_event(0, 50)]
    events += [kernel_event(i, 60 + 10 * i) for i in range(1, 21)]
    # WHEN analysed
    rank = analyze([_kineto(events)]).summary["ranks"][0]
    # THEN the pruned launch is noticed and the buffered pass joins every kernel
    assert rank["gpu_analysis"]["mode"] == "buffered"
    assert "long after its launch" in rank["gpu_analysis"]["reason"]
    assert rank["launch_delay"]["count"] == 21


def test_several_files_of_one_rank_are_merged_buffered(tmp_path: Path) -> None:
    # GIVEN two schedule cycles of rank 0 in two files
    def write(name: str, t0: float) -> Path:
        events = cycle_events(t0)
        path = tmp_path / name
        path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
        return path

    paths = [write("rank0.a.pt.trace.json.gz", 0), write("rank0.b.pt.trace.json.gz", 10_000)]
    # WHEN analysed together
    ranks = analyze([FileTraceSource(p) for p in paths]).summary["ranks"]
    # THEN they are one rank, analysed buffered, and the summary says why
    assert len(ranks) == 1
    assert ranks[0]["gpu_analysis"] == {"mode": "buffered", "reason": "merged with other files of the same rank"}


def test_streaming_state_stays_bounded_on_a_long_sorted_trace() -> None:
    # GIVEN 120,000 kernels (several windows' worth) in start order, each launch 2 events later
    events: list[dict[str, Any]] = [step_event(1, 0, 10), step_event(2, 10, 10**7)]
    for i in range(120_000):
        events += [kernel_event(i, 20 + 10 * i, 4), launch_event(i, 15 + 10 * i)]
    sizes: list[tuple[int, int, int]] = []
    real_drain = gpu.GpuFeed._drain

    def spy(self: gpu.GpuFeed, selection_now: Any, *, final: bool) -> None:
        real_drain(self, selection_now, final=final)
        sizes.append((len(self.ops), len(self.join.launches), sum(len(m) for m in self.acc.closed)))

    with pytest.MonkeyPatch.context() as m:
        m.setattr(gpu.GpuFeed, "_drain", spy)
        rank = analyze([_kineto(events)], AnalysisOptions(include_last_step=True)).summary["ranks"][0]
    # THEN it streamed, ops left the buffer while parsing, and no buffer grew past its bound
    assert rank["gpu_analysis"]["mode"] == "streaming"
    assert rank["counts"]["gpu_ops_analyzed"] == 120_000
    assert len(sizes) > 2
    assert max(p for p, _, _ in sizes) <= gpu.REORDER_WINDOW_OPS + gpu.DRAIN_BATCH_OPS
    assert max(n for _, n, _ in sizes) <= 2 * gpu.LAUNCH_CAPACITY
    assert max(c for _, _, c in sizes) <= gpu.GpuAccumulator.FLUSH_INTERVALS
    # AND the numbers are right: 4 µs busy every 10 µs, each kernel starts 3 µs after its launch returns
    assert rank["temporal_breakdown"]["idle_pct"] == pytest.approx(60.0, abs=0.01)
    assert rank["launch_delay"]["p50_us"] == pytest.approx(3.0, rel=1e-3)


def test_delay_distribution_is_exact_below_the_limit_and_within_its_bound_above() -> None:
    # GIVEN delays from a skewed distribution with negatives and zeros
    rng = random.Random(7)
    values = [rng.lognormvariate(2, 1.5) for _ in range(50_000)] + [-rng.expovariate(0.5) for _ in range(5_000)]
    values += [0.0] * 1_000
    exact = sorted(values)
    # WHEN summarised with a limit above the sample count THEN the result is exact
    small = DelayDistribution((10.0, 100.0), exact_limit=len(values) + 1)
    small.extend(array("d", values))
    s = small.summary()
    assert s.method == "exact"
    assert s.p95 == quantile(exact, 0.95)
    # WHEN summarised in chunks with a limit far below it THEN it sketches in bounded state
    dist = DelayDistribution((10.0, 100.0), exact_limit=4096, relative_accuracy=1e-3)
    for i in range(0, len(values), 1000):
        dist.extend(array("d", values[i : i + 1000]))
    t = dist.summary()
    assert t.method.startswith("sketch")
    assert len(dist._pos) + len(dist._neg) < 20_000
    # THEN every quantile is within the relative bound of a true sample at (or next to) that rank
    for q, got in ((0.5, t.p50), (0.95, t.p95), (0.99, t.p99)):
        rank = math.floor(q * (len(exact) - 1))
        truth = exact[rank]
        assert got is not None
        assert abs(got - truth) <= 1e-3 * abs(truth) + 1e-12, (q, got, truth)
    # AND counts, histogram, mean and max stay exact
    assert t.count == s.count
    assert t.over == s.over
    assert t.hist == s.hist
    assert t.max == s.max
    assert t.mean == pytest.approx(s.mean, rel=1e-12)


@pytest.mark.parametrize("window", [256, 8192], ids=["window 256", "window 8192"])
@pytest.mark.parametrize("selection", ["middle steps", "HTA rule without the last step"])
@pytest.mark.parametrize("trace", ["ns_resolution_trace", "resnet50_num_workers_0", "df_index_resolver"])
def test_squeezed_streaming_matches_buffered_under_every_selection(
    trace: str, selection: str, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a real trace and a window of its middle steps, or HTA's exclusion of the last step
    path = next(p for p in ALL_FILES if trace in str(p))
    steps = _rank(path, AnalysisOptions(include_last_step=True))["window"]["steps"]
    if selection == "middle steps":
        opts = AnalysisOptions(steps=(steps[1], steps[-2]))
    else:
        opts = AnalysisOptions(include_last_step=False)
    with monkeypatch.context() as m:
        _force_buffered(m)
        buffered = _rank(path, opts)
    # WHEN it is streamed with squeezed bounds THEN the summary is the same (the single-stream traces
    # stream even with a 256-op window: ops are handed over while steps and launches are still arriving)
    _squeeze(monkeypatch, window=window, launch_capacity=8 * window, flush=16)
    streamed = _rank(path, opts)
    if window == 8192 or trace != "df_index_resolver":
        assert streamed["gpu_analysis"] == {"mode": "streaming", "reason": None}
    _assert_same(_comparable(buffered), _comparable(streamed))
    assert buffered["window"]["steps"] == (steps[1:-1] if selection == "middle steps" else steps[:-1])


def _interleaved(copies: int, kernels_per_step: int) -> list[dict[str, Any]]:
    """Like bench/generate.py: each copy's steps, then its launches and kernels (kernel first)."""
    events: list[dict[str, Any]] = []
    corr = 0
    for c in range(copies):
        t0 = c * 1000.0
        events += [step_event(2 * c + 1, t0, 400), step_event(2 * c + 2, t0 + 400, 400)]
        for k in range(2 * kernels_per_step):
            ts = t0 + 5 + k * (790 / (2 * kernels_per_step))
            events += [kernel_event(corr, ts + 3, 2), launch_event(corr, ts)]
            corr += 1
    return events


@pytest.mark.parametrize("include_last", [True, False])
def test_steps_interleaved_with_gpu_ops_stream_and_match_the_buffered_pass(
    include_last: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN 40 copies of (2 steps, then their 60 kernels), as a regenerated or concatenated trace has
    events = _interleaved(40, 30)
    opts = AnalysisOptions(include_last_step=include_last)
    with monkeypatch.context() as m:
        _force_buffered(m)
        buffered = analyze([_kineto(events)], opts).summary["ranks"][0]
    # WHEN streamed with a window far smaller than the trace
    _squeeze(monkeypatch, window=32, launch_capacity=4096, flush=16)
    monkeypatch.setattr(reader, "READ_SIZE", 4096)
    monkeypatch.setattr(reader, "OUT_SIZE", 4096)
    streamed = analyze([_kineto(events)], opts).summary["ranks"][0]
    # THEN it streams (ops wait for the next copy's steps instead of aborting) and agrees
    assert streamed["gpu_analysis"] == {"mode": "streaming", "reason": None}
    _assert_same(_comparable(buffered), _comparable(streamed))
    dropped = 0 if include_last else 30  # HTA's rule: kernels launched in the last step
    assert streamed["counts"]["gpu_ops_analyzed"] == 40 * 60 - dropped


def test_a_trace_without_steps_streams_once_the_window_fills(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 3,000 kernels and no ProfilerStep, read in small batches with a 16-op window
    events = [e for i in range(3000) for e in (kernel_event(i, 10.0 * i + 3, 4), launch_event(i, 10.0 * i))]
    _squeeze(monkeypatch, window=16, launch_capacity=4096, flush=16)
    monkeypatch.setattr(reader, "READ_SIZE", 4096)
    monkeypatch.setattr(reader, "OUT_SIZE", 4096)
    # WHEN analysed
    rank = analyze([_kineto(events)]).summary["ranks"][0]
    # THEN the feed stops waiting for steps that never come and streams every kernel
    assert rank["gpu_analysis"] == {"mode": "streaming", "reason": None}
    assert rank["counts"]["gpu_ops_analyzed"] == 3000
    assert rank["temporal_breakdown"]["idle_pct"] == pytest.approx(60.0, abs=0.05)


@st.composite
def reordered_traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Generated traces (steps written after their kernels), then GPU ops moved a few places, as
    per-stream buffer flushes and kernel-before-launch records do in real traces."""
    events = draw(traces(max_steps=4, max_launches=12))
    # launches no op refers to, with ids out of order (they fill and churn the launch table)
    for _ in range(draw(st.integers(0, 20))):
        at = draw(st.integers(0, len(events)))
        corr = draw(st.integers(10**6, 10**6 + 50))
        events.insert(at, {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1,
                           "ts": draw(st.integers(0, 200)), "dur": 1, "args": {"correlation": corr}})  # fmt: skip
    for _ in range(draw(st.integers(0, len(events)))):
        i = draw(st.integers(0, max(len(events) - 2, 0)))
        if len(events) > 1 and events[i]["cat"] in ("kernel", "Kernel", "gpu_memcpy", "cuda_runtime"):
            events[i], events[i + 1] = events[i + 1], events[i]
    return events


@settings(
    max_examples=int(os.environ.get("PROFSTACK_HYPOTHESIS_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    events=reordered_traces(),
    window=st.sampled_from([1, 2, 4, 16]),
    selection=st.sampled_from(["HTA rule", "HTA rule without the last step", "steps 1:2"]),
)
def test_streaming_equals_buffered_on_generated_traces(
    events: list[dict[str, Any]], window: int, selection: str
) -> None:
    # GIVEN a generated trace, parsed in ~256-byte batches, under each way of selecting GPU ops
    data = kineto_layout(events, extra_after=False)
    opts = AnalysisOptions(
        top_k=50,
        include_last_step=selection != "HTA rule without the last step",
        steps=(1, 2) if selection == "steps 1:2" else None,
    )
    with pytest.MonkeyPatch.context() as m:
        _force_buffered(m)
        buffered = analyze([BytesTraceSource(data, name="t.json")], opts).summary
    # WHEN it is streamed with a tiny window, launch table and interval fold
    with pytest.MonkeyPatch.context() as m:
        _squeeze(m, window=window, launch_capacity=8, flush=2)
        m.setattr(parse, "BATCH_BYTES", 256)
        m.setattr(reader, "READ_SIZE", 256)
        m.setattr(reader, "OUT_SIZE", 256)
        streamed = analyze([BytesTraceSource(data, name="t.json")], opts).summary
    # THEN it either agrees with the buffered pass or fell back to it and said why
    if not buffered["ranks"]:
        assert not streamed["ranks"]
        return
    mode = streamed["ranks"][0]["gpu_analysis"]
    event(f"gpu pass: {mode['mode']}")
    assert mode["mode"] == "streaming" or mode["reason"], mode
    _assert_same(_comparable(buffered["ranks"][0]), _comparable(streamed["ranks"][0]))
    assert streamed["findings"] == buffered["findings"]


def test_a_reparse_reports_each_input_byte_to_progress_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a trace, read in 16 KB batches, with a kernel far out of start order in its middle: the
    # streaming pass aborts part-way and the file is parsed again buffered
    _squeeze(monkeypatch, window=2, launch_capacity=1024, flush=16)
    events = [step_event(1, 0, 10_000), step_event(2, 10_000, 10_000)]
    for i in range(600):
        events += [launch_event(i, 10 * i), kernel_event(i, 10 * i + 3)]
        if i == 400:
            events.append(kernel_event(10_000, 1))
    source = _kineto(events)
    seen: list[int] = []
    # WHEN analysed with a progress callback
    rank = analyze([source], progress=seen.append).summary["ranks"][0]
    # THEN it was parsed twice, yet the callback got every byte exactly once
    assert "out of start order" in rank["gpu_analysis"]["reason"]
    assert len(source.data) > 3 * (16 << 10)
    assert sum(seen) == len(source.data)


@pytest.mark.parametrize("path", ALL_FILES, ids=[str(p.relative_to(TRACES)) for p in ALL_FILES])
def test_a_file_spans_the_same_time_streamed_or_buffered(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a real trace analysed with its GPU ops buffered (as when several files make one rank)
    with monkeypatch.context() as m:
        _force_buffered(m)
        buffered = analyze([FileTraceSource(path)]).summary["runs"]
    # WHEN it is analysed alone, its GPU ops streamed
    streamed = analyze([FileTraceSource(path)]).summary["runs"]
    # THEN its run covers the same time: every GPU op, not only the analysed steps' union (streamed, the
    # run used to end at the last analysed step, ~89 ms early on ns_resolution_trace)
    assert [(r["start_us"], r["duration_us"]) for r in streamed] == [
        (r["start_us"], r["duration_us"]) for r in buffered
    ]


def test_a_streamed_run_ends_with_its_last_gpu_op() -> None:
    # GIVEN ns_resolution_trace, whose last kernel ends 89 ms after its last analysed ProfilerStep
    path = next(p for p in ALL_FILES if "ns_resolution_trace" in str(p))
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ends = [
        float(e["ts"]) + float(e.get("dur", 0))
        for e in events
        if e.get("cat") in {"kernel", "gpu_memcpy", "gpu_memset"}
    ]
    run = analyze([FileTraceSource(path)]).summary["runs"][0]
    # THEN the run ends at the last GPU op's end (to the float resolution at epoch microseconds)
    assert run["start_us"] + run["duration_us"] == pytest.approx(max(ends), abs=0.5)
