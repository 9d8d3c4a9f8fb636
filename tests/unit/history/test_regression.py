"""Regressions against a job family: the real resnet pair, then properties of the comparison (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.history.regression import (
    RULE_ID,
    JobHistory,
    RegressionThresholdError,
    RegressionThresholds,
    compare,
    regression_finding,
    select_baseline,
)
from tests.unit.history.conftest import BuiltHistory

TH = RegressionThresholds()


def test_the_job_without_dataloader_workers_regresses_against_the_one_with_workers(built_history: BuiltHistory) -> None:
    # GIVEN alice's resnet family: 4 DataLoader workers first, then none
    first = built_history.summaries["resnet-w4"]
    second = built_history.summaries["resnet-w0"]
    # THEN the first job had no baseline and no Regression finding
    assert not [f for f in first["findings"] if f["rule_id"] == RULE_ID]
    # AND the second one has one, naming the baseline job and the data-loading share and step time
    (finding,) = [f for f in second["findings"] if f["rule_id"] == RULE_ID]
    assert finding["evidence"]["baseline_jobs"] == ["resnet-w4"]
    assert finding["evidence"]["family"] == "resnet"
    regressed = finding["evidence"]["regressed"]
    assert regressed["dataloader_share_pct"] > 30  # 1.0 % -> 39.6 % of step time
    assert regressed["step_p50_us"] > 30  # +39 %
    assert "resnet-w4" in finding["message"]
    # AND the findings stay sorted by severity
    order = {"critical": 0, "warning": 1, "info": 2}
    assert [order[f["severity"]] for f in second["findings"]] == sorted(
        order[f["severity"]] for f in second["findings"]
    )
    # AND bob's job, alone in its family, has none
    assert not [
        f for f in built_history.summaries["ddp-2026-11-24-10-00-00-000"]["findings"] if f["rule_id"] == RULE_ID
    ]


def test_a_job_never_is_its_own_baseline_and_other_hardware_is_left_out() -> None:
    me = {"job": "j", "ended_at": "2026-11-02T00:00:00Z", "complete": True, "instance_type": "ml.p4d.24xlarge"}
    others = [
        {**me},  # a re-delivered copy of the job itself
        {**me, "job": "a", "ended_at": "2026-11-01T00:00:00Z"},
        {**me, "job": "b", "ended_at": "2026-10-31T00:00:00Z", "instance_type": "ml.g5.xlarge"},
        {**me, "job": "c", "ended_at": "2026-10-30T00:00:00Z", "complete": False},
        {**me, "job": "d", "ended_at": "2026-10-29T00:00:00Z"},
    ]
    assert [r["job"] for r in select_baseline(me, others, TH)] == ["a", "d"]
    assert [r["job"] for r in select_baseline(me, others, RegressionThresholds(baseline_jobs=1))] == ["a"]


def test_too_few_baseline_jobs_means_no_finding_not_a_guess() -> None:
    job = JobHistory({"job": "x", "step_p50_us": 500.0})
    base = [JobHistory({"job": "a", "step_p50_us": 100.0})]
    comparison = compare(job, base, RegressionThresholds(min_baseline_jobs=2, baseline_jobs=5), family="f")
    assert comparison.skipped
    assert regression_finding(comparison) is None


def test_thresholds_reject_unknown_names_and_bad_values() -> None:
    with pytest.raises(RegressionThresholdError, match="unknown"):
        RegressionThresholds.from_overrides({"step_time": 5})
    with pytest.raises(RegressionThresholdError, match=">= 0"):
        RegressionThresholds.from_overrides({"step_time_pct": -1})
    with pytest.raises(RegressionThresholdError, match="whole number"):
        RegressionThresholds.from_overrides({"baseline_jobs": 2.5})
    with pytest.raises(RegressionThresholdError, match="min_baseline_jobs"):
        RegressionThresholds.from_overrides({"baseline_jobs": 2, "min_baseline_jobs": 3})


def test_kernel_shifts_and_new_top_kernels_are_regressions() -> None:
    base = [
        JobHistory({"job": f"b{i}"}, [{"name": "gemm", "share_pct": 40.0}, {"name": "relu", "share_pct": 5.0}])
        for i in range(3)
    ]
    job = JobHistory({"job": "x"}, [{"name": "gemm", "share_pct": 52.0}, {"name": "slow_copy", "share_pct": 20.0}])
    comparison = compare(job, base, TH, family="f")
    assert comparison.kernel_shifts == (("gemm", 40.0, 52.0),)
    assert comparison.new_kernels == (("slow_copy", 20.0),)
    finding = regression_finding(comparison)
    assert finding is not None
    assert finding["evidence"]["new_top_kernels"] == [{"name": "slow_copy", "pct": 20.0}]


# ------------------------------------------------------------------------------------------ properties

METRICS = ("step_p50_us", "step_p95_us", "gpu_idle_pct", "launch_delay_p95_us", "dataloader_share_pct")
positive = st.floats(min_value=1.0, max_value=1e7, allow_nan=False)
share = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)
odd = st.one_of(st.none(), st.just(float("nan")), st.just(float("inf")), st.text(max_size=3), st.booleans())


@st.composite
def job_rows(draw: Any) -> dict[str, Any]:
    return {
        "job": draw(st.text(min_size=1, max_size=8)),
        "step_p50_us": draw(positive),
        "step_p95_us": draw(positive),
        "gpu_idle_pct": draw(share),
        "launch_delay_p95_us": draw(positive),
        "dataloader_share_pct": draw(share),
    }


@given(row=job_rows(), n=st.integers(min_value=1, max_value=7))
def test_a_job_equal_to_its_baseline_never_regresses(row: dict[str, Any], n: int) -> None:
    comparison = compare(JobHistory(row), [JobHistory({**row, "job": f"b{i}"}) for i in range(n)], TH, family="f")
    assert not comparison.is_regression
    assert regression_finding(comparison) is None
    assert all(d.change == 0 for d in comparison.deltas)


@given(row=job_rows(), factor=st.floats(min_value=1.2, max_value=100.0), n=st.integers(min_value=1, max_value=5))
def test_step_times_slower_beyond_the_threshold_always_regress(row: dict[str, Any], factor: float, n: int) -> None:
    base = [JobHistory({**row, "job": f"b{i}"}) for i in range(n)]
    slower = {**row, "step_p50_us": row["step_p50_us"] * factor}
    finding = regression_finding(compare(JobHistory(slower), base, TH, family="f"))
    assert finding is not None
    assert finding["evidence"]["regressed"]["step_p50_us"] == pytest.approx(100.0 * (factor - 1), rel=1e-3)
    assert finding["rule_id"] == RULE_ID
    assert set(finding) == {"rule_id", "severity", "message", "evidence", "recommendation", "ranks"}


@given(row=job_rows(), factor=st.floats(min_value=0.0, max_value=1.09))
def test_step_times_within_the_threshold_never_regress_on_step_time(row: dict[str, Any], factor: float) -> None:
    base = [JobHistory({**row, "job": "b"})]
    comparison = compare(JobHistory({**row, "step_p50_us": row["step_p50_us"] * factor}), base, TH, family="f")
    assert "step_p50_us" not in {d.metric for d in comparison.regressed}


@given(rows=st.lists(job_rows(), min_size=3, max_size=7), current=job_rows(), data=st.data())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_the_outcome_does_not_depend_on_the_order_of_the_baseline(
    rows: list[dict[str, Any]], current: dict[str, Any], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(rows))
    a = compare(JobHistory(current), [JobHistory(r) for r in rows], TH, family="f")
    b = compare(JobHistory(current), [JobHistory(r) for r in shuffled], TH, family="f")
    assert [(d.metric, d.regressed, d.change) for d in a.deltas] == [
        (d.metric, d.regressed, d.change) for d in b.deltas
    ]


@given(rows=st.lists(job_rows(), min_size=3, max_size=3), outlier=st.floats(min_value=1e8, max_value=1e12))
def test_one_outlier_baseline_job_cannot_move_the_median_past_the_others(
    rows: list[dict[str, Any]], outlier: float
) -> None:
    # GIVEN three identical baseline jobs and a fourth absurd one, with a current job equal to the three
    same = [{**rows[0], "job": f"b{i}"} for i in range(3)]
    base = [JobHistory(r) for r in same] + [JobHistory({**rows[0], "job": "weird", "step_p50_us": outlier})]
    comparison = compare(JobHistory(rows[0]), base, TH, family="f")
    # THEN the job is not flagged on step time p50 (the median ignores the outlier)
    assert "step_p50_us" not in {d.metric for d in comparison.regressed}


@given(
    current=st.fixed_dictionaries(dict.fromkeys(METRICS, odd)),
    base=st.lists(st.fixed_dictionaries(dict.fromkeys(METRICS, odd)), max_size=4),
)
def test_missing_or_garbage_values_are_skipped_never_compared(
    current: dict[str, Any], base: list[dict[str, Any]]
) -> None:
    comparison = compare(
        JobHistory(current), [JobHistory(b) for b in base], RegressionThresholds(min_baseline_jobs=1), family="f"
    )
    assert comparison.deltas == ()
    finding = regression_finding(comparison)
    assert finding is None


def test_the_finding_names_at_most_five_baseline_jobs_in_its_message() -> None:
    base = [JobHistory({"job": f"job-{i}", "step_p50_us": 100.0}) for i in range(7)]
    finding = regression_finding(
        compare(JobHistory({"job": "x", "step_p50_us": 200.0}), base, RegressionThresholds(baseline_jobs=7), family="f")
    )
    assert finding is not None
    assert finding["message"].count("job-") == 5
    assert len(finding["evidence"]["baseline_jobs"]) == 7
    assert finding["severity"] == "critical"  # step time doubled
