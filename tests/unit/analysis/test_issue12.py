"""Issue #12: never merge unrelated runs, every Kineto device category, HTA's definitions, plausibility, quirks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, FileTraceSource, analyze, discover_sources
from profstack.analysis.parse import CAT_KIND, KNOWN_OTHER_CATEGORIES

from .synth import TraceBuilder, busy_steps, kernel_event, launch_event, step_event

TRACES = Path(__file__).resolve().parents[3] / "samples" / "traces"

# every ActivityType name in libkineto/include/ActivityType.h (the ``cat`` output_json.cpp writes)
KINETO_ACTIVITY_TYPES = (
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
    "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function", "overhead",
    "mtia_runtime", "mtia_ccp_events", "mtia_insight", "cuda_sync", "cuda_event", "mtia_counters", "glow_runtime",
    "cuda_profiler_range", "hpu_op", "xpu_runtime", "xpu_driver", "collective_comm", "privateuse1_runtime",
    "privateuse1_driver", "xpu_scope_profiler", "xpu_sync",
)  # fmt: skip


def _src(events: list[dict[str, Any]], name: str = "t.json", **top: Any) -> BytesTraceSource:
    return BytesTraceSource(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode(), name=name)


def _cycle(first_step: int, t0: float, n: int = 3, step_us: float = 1000.0) -> list[dict[str, Any]]:
    """n steps from ``t0``, each one kernel launched at the step start (correlation ids unique per cycle)."""
    events = []
    for i in range(n):
        ts = t0 + i * step_us
        corr = first_step * 1000 + i
        events += [step_event(first_step + i, ts, step_us), launch_event(corr, ts), kernel_event(corr, ts + 10, 900)]
    return events


# ------------------------------------------------------------------------------------------------ runs


def test_kineto_tb_plugin_folder_is_two_runs_not_one_rank() -> None:
    # GIVEN the two resnet50 traces, both rank 0, recorded about 19 hours apart
    result = analyze(discover_sources([TRACES / "kineto_tb_plugin"]))
    summary = result.summary
    # THEN they are two runs, each labelled by its file, with sane spans, and the user is told why
    assert [len(r["files"]) for r in summary["runs"]] == [1, 1]
    assert [r["label"] for r in summary["runs"]] == [
        "resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
        "resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    ]
    assert all(r["temporal_breakdown"]["gpu_span_us"] < 2e6 for r in summary["ranks"])
    assert {r["run"] for r in summary["ranks"]} == {"run-1", "run-2"}
    [warning] = [w for w in summary["warnings"] if w["error_type"] == "SeparateRunsError"]
    assert "19.4 h apart" in warning["message"]
    # AND the only gap is that these 2021 traces' memory events carry no allocator totals: the memory sections are
    # incomplete, every number stands, the run is complete (#43 item 2; #34 made it incomplete)
    assert {w["error_type"] for w in summary["warnings"]} == {"SeparateRunsError", "MemoryAllocatorUnknownError"}
    assert not result.errors
    assert result.complete
    assert all(not r["completeness"]["memory"]["complete"] for r in summary["ranks"])


def test_successive_cycles_of_one_process_merge_with_the_gap_removed() -> None:
    # GIVEN two cycles of one process (same baseTimeNanoseconds), steps #1-#3 then #10-#12, 60 s apart
    base = 1_700_000_000_000_000_000
    a = _src(_cycle(1, 0.0), "host_12.1700000000000.pt.trace.json", baseTimeNanoseconds=base)
    b = _src(_cycle(10, 60e6), "host_12.1700000060000.pt.trace.json", baseTimeNanoseconds=base)
    summary = analyze([a, b], AnalysisOptions(include_last_step=True)).summary
    # THEN one rank, one run, six steps; the 60 s between the cycles is not GPU idle time
    [rank] = summary["ranks"]
    assert rank["steps"]["count"] == 6
    assert len(summary["runs"]) == 1
    assert summary["warnings"] == []
    assert rank["temporal_breakdown"]["gpu_span_us"] < 7000
    assert rank["temporal_breakdown"]["idle_pct"] < 20


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        ({"baseTimeNanoseconds": 2_000_000_000_000_000_000}, "baseTimeNanoseconds"),
        ({"name": "otherhost_99.1700000060000.pt.trace.json"}, "worker name"),
        ({"distributedInfo": {"rank": 0, "world_size": 8}}, "world size"),
        ({"first_step": 1}, "ProfilerStep numbers restart"),
        ({"t0": 7200e6}, "2.0 h apart"),
    ],
    ids=["another process clock", "another worker", "another world size", "steps restart", "two hours apart"],
)
def test_files_of_one_rank_that_are_not_cycles_of_one_run_are_kept_apart(second: dict[str, Any], reason: str) -> None:
    # GIVEN a first cycle and a second file that differs in one identity or timing fact
    base = 1_700_000_000_000_000_000
    first = _src(_cycle(1, 0.0), "host_12.1700000000000.pt.trace.json", baseTimeNanoseconds=base,
                 distributedInfo={"rank": 0, "world_size": 2})  # fmt: skip
    top = {"baseTimeNanoseconds": second.get("baseTimeNanoseconds", base)}
    top["distributedInfo"] = second.get("distributedInfo", {"rank": 0, "world_size": 2})
    events = _cycle(second.get("first_step", 10), second.get("t0", 60e6))
    if "baseTimeNanoseconds" in second:  # same absolute time on the other clock
        events = _cycle(10, 60e6 - (second["baseTimeNanoseconds"] - base) / 1000)
    other = _src(events, second.get("name", "host_12.1700000060000.pt.trace.json"), **top)
    # WHEN analysed THEN two entries of rank 0 in two runs, and the warning says why
    summary = analyze([first, other]).summary
    assert [r["label"] for r in summary["ranks"]] == ["0.0", "0.1"]
    assert len(summary["runs"]) == 2
    assert any(reason in w["message"] for w in summary["warnings"]), summary["warnings"]


def test_two_ranks_of_one_job_are_one_run_with_a_cross_rank_table() -> None:
    summary = analyze(discover_sources([TRACES / "hta" / "trace_filter"])).summary
    assert [r["ranks"] for r in summary["runs"]] == [["0", "1"]]
    assert summary["runs"][0]["cross_rank"]["rank_count"] == 2
    assert {row["run"] for row in summary["cross_rank"]["table"]} == {"run-1"}


# -------------------------------------------------------------------------------------- plausibility


def test_a_gpu_op_far_beyond_the_launches_and_steps_makes_the_result_incomplete() -> None:
    # GIVEN a healthy trace plus one kernel stamped a day later (a corrupt timestamp), launched in step 0
    b = busy_steps(3)
    b.events += [launch_event(999, 5.0), kernel_event(999, 86_400e6, 10)]
    result = analyze([BytesTraceSource(b.to_bytes(), name="t.json")], AnalysisOptions(include_last_step=True))
    # THEN the result is reported, but flagged: a warning names the check and complete is false
    assert not result.complete
    assert result.summary["complete"] is False
    assert result.summary["ranks"][0]["complete"] is False
    messages = [w["message"] for w in result.summary["warnings"] if w["error_type"] == "ImplausibleResultError"]
    assert any("far beyond" in m for m in messages), result.summary["warnings"]


def test_every_sample_trace_passes_the_plausibility_checks() -> None:
    for path in sorted(TRACES.rglob("*.json*")):
        if "reference_values" in path.parts:
            continue
        summary = analyze([FileTraceSource(path)]).summary
        assert not [w for w in summary["warnings"] if w["error_type"] == "ImplausibleResultError"], path


# -------------------------------------------------------------------------------------- accelerators


def test_every_kineto_activity_type_is_known() -> None:
    # GIVEN the category names Kineto writes THEN each is parsed as device/host work or known as neither
    unknown = [c for c in KINETO_ACTIVITY_TYPES if c not in CAT_KIND and c not in KNOWN_OTHER_CATEGORIES]
    assert unknown == []
    for device in ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"):
        assert device in CAT_KIND
    for host in ("cuda_runtime", "cuda_driver", "mtia_runtime", "xpu_runtime", "xpu_driver",
                 "privateuse1_runtime", "privateuse1_driver"):  # fmt: skip
        assert host in CAT_KIND


def test_mtia_trace_is_analysed_as_accelerator_work() -> None:
    # GIVEN an MTIA trace: device ops in mtia_ccp_events, launches (runFunction) in mtia_runtime
    launch = "runFunction - job_prep_and_submit_for_execution"
    events = []
    for i in range(3):
        t = i * 1000.0
        events += [step_event(i, t, 1000), {**launch_event(i, t, name=launch), "cat": "mtia_runtime"},
                   kernel_event(i, t + 20, 800, name="job_exe_fused_mm", cat="mtia_ccp_events")]  # fmt: skip
    result = analyze([_src(events)], AnalysisOptions(include_last_step=True))
    [rank] = result.summary["ranks"]
    # THEN it has device activity, a busy GPU span and launch delays (HTA counts runFunction as a launch)
    assert rank["has_gpu"]
    assert rank["counts"]["gpu_kernels"] == 3
    assert rank["temporal_breakdown"]["gpu_span_us"] > 0
    assert rank["launch_delay"]["count"] == 3
    assert result.complete


def test_device_rows_in_an_unknown_category_give_a_warning_naming_it() -> None:
    # GIVEN a trace whose device rows use a category the parser has never seen
    events = [step_event(0, 0, 1000), launch_event(1, 0, name="npuLaunchKernel")]
    events.append({**kernel_event(1, 10, 500), "cat": "npu_kernel"})
    result = analyze([_src(events)])
    # THEN no silent CPU-only answer: a warning names the category, and the result is not complete
    assert not result.complete
    [err] = [e for e in result.errors if e.error_type == "UnknownDeviceCategoryError"]
    assert "'npu_kernel'" in err.message


# -------------------------------------------------------------------------------- HTA's definitions


def _negative_delay_trace() -> TraceBuilder:
    b = TraceBuilder()
    b.step(0, 0, 1000).step(1, 1000, 1000)
    b.gpu("k", 0, 100, 50)  # delay 95 µs
    b.gpu("k", 200, 150, 50, launch_dur=100)  # the kernel "starts" before its launch ends: raw delay -150 µs
    return b


def test_launch_delay_is_clipped_at_zero_like_hta_and_negative_delays_are_counted() -> None:
    src = BytesTraceSource(_negative_delay_trace().to_bytes(), name="t.json")
    ld = analyze([src], AnalysisOptions(include_last_step=True)).summary["ranks"][0]["launch_delay"]
    assert ld["count"] == 2
    assert ld["negative_raw_count"] == 1
    assert ld["mean_us"] == pytest.approx(47.5)
    assert ld["clipped_at_zero"] is True
    raw = analyze([src], AnalysisOptions(include_last_step=True, clip_launch_delay=False)).summary["ranks"][0]
    assert raw["launch_delay"]["mean_us"] == pytest.approx(-27.5)


def test_launch_delays_use_htas_launch_calls_unless_asked_for_all() -> None:
    # GIVEN the ROCm trace (hipLaunchKernel: not in HTA's launch-call set)
    path = (TRACES / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",)
    hta = analyze([FileTraceSource(p) for p in path]).summary["ranks"][0]["launch_delay"]
    every = analyze([FileTraceSource(p) for p in path], AnalysisOptions(launch_calls="all")).summary["ranks"][0]
    assert hta["count"] == 0
    assert hta["launch_calls"] == "hta"
    assert every["launch_delay"]["count"] > 0


def test_cuda_sync_rows_count_in_the_temporal_breakdown_like_hta() -> None:
    # GIVEN the alexnet trace with cuda_sync rows (Stream Sync, Context Sync, Stream Wait Event)
    path = TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
    counted = analyze([FileTraceSource(path)]).summary["ranks"][0]["temporal_breakdown"]
    left_out = analyze([FileTraceSource(path)], AnalysisOptions(count_sync=False)).summary["ranks"][0]
    # THEN with HTA's rule the sync time is busy, non-compute time; without it the span shrinks
    assert counted["gpu_span_us"] == 12996011.0  # kernel_time(us) of HTA 0.5.0 and 0.6.1
    assert left_out["temporal_breakdown"]["gpu_span_us"] < counted["gpu_span_us"]


def test_a_step_window_keeps_only_gpu_ops_joined_to_a_launch() -> None:
    # GIVEN steps with launched kernels and one kernel whose launch was not recorded
    b = busy_steps(4)
    b.events.append(kernel_event(555, 1500, 100))
    hta = analyze([BytesTraceSource(b.to_bytes())], AnalysisOptions(steps=(1, 2))).summary["ranks"][0]
    old = analyze([BytesTraceSource(b.to_bytes())], AnalysisOptions(steps=(1, 2), steps_keep_unlaunched=True))
    assert hta["counts"]["gpu_ops_analyzed"] == 2
    assert old.summary["ranks"][0]["counts"]["gpu_ops_analyzed"] == 3


def test_the_last_step_is_dropped_by_default_and_the_summary_says_so() -> None:
    summary = analyze([BytesTraceSource(busy_steps(4).to_bytes())]).summary
    assert summary["options"]["include_last_step"] is False
    assert summary["options"]["include_last_step_default"] is False
    assert summary["ranks"][0]["window"]["last_step_dropped"] is True


# ---------------------------------------------------------------------------------------------- quirks


def _one(data: bytes) -> Any:
    return analyze([BytesTraceSource(data, name="q.json")])


def test_metadata_only_trace_is_a_clear_error() -> None:
    result = _one(
        json.dumps({"schemaVersion": 1, "traceEvents": [{"name": "process_name", "ph": "M", "pid": 1}]}).encode()
    )
    assert result.failed_all
    assert "only 1 metadata/instant event" in result.errors[0].message


def test_events_without_ph_are_named_in_the_error_or_warning() -> None:
    events = busy_steps(2).events
    bare = [{k: v for k, v in e.items() if k != "ph"} for e in events]
    assert '"ph"' in _one(json.dumps({"traceEvents": bare}).encode()).errors[0].message
    mixed = _one(json.dumps({"traceEvents": events + bare}).encode())
    assert mixed.summary["ranks"]
    assert any('without a "ph"' in e.message for e in mixed.errors)


def test_an_integer_beyond_int64_keeps_the_event_and_says_its_args_were_dropped() -> None:
    text = json.dumps({"traceEvents": busy_steps(2).events}).replace(
        '"correlation": 1}', '"correlation": 99999999999999999999999}', 1
    )
    result = _one(text.encode())
    assert result.summary["ranks"][0]["counts"]["gpu_kernels"] == 2
    # only that field is unknown (named), the event and its other args are kept
    assert any("beyond int64" in e.message and "correlation (1)" in e.message for e in result.errors)
    assert not result.complete


@settings(max_examples=25, deadline=None)
@given(
    bom=st.booleans(),
    empty_last=st.booleans(),
    junk=st.binary(min_size=1, max_size=8).filter(
        lambda b: b.decode("utf-8", "ignore") != b.decode("utf-8", "replace")
    ),
)
def test_bom_empty_last_event_and_invalid_utf8_still_give_the_result(bom: bool, empty_last: bool, junk: bytes) -> None:
    # GIVEN a valid trace with a byte-order mark, a trailing {} event and/or invalid UTF-8 in a name
    events = [*busy_steps(3).events, {"ph": "X", "cat": "cpu_op", "name": "NAME", "ts": 1, "dur": 1}]
    if empty_last:
        events.append({})
    data = (
        json.dumps({"traceEvents": events})
        .encode()
        .replace(b"NAME", b"op" + junk.replace(b'"', b"").replace(b"\\", b""))
    )
    if bom:
        data = b"\xef\xbb\xbf" + data
    # WHEN analysed THEN the numbers are those of the clean trace, with a one-line note where something was fixed
    result = _one(data)
    rank = result.summary["ranks"][0]
    assert rank["counts"]["gpu_kernels"] == 3
    notes = [w["message"] for w in result.summary["warnings"]]
    assert (not bom) or any("byte-order mark" in n for n in notes)
    assert all("\n" not in n for n in notes)
