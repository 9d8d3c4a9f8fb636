"""The cost of idle GPUs from real summaries and the pinned price table; job families from tags and names."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profstack.config import ConfigError, parse_config
from profstack.history.cost import JobResources, cost_lines, job_cost, rank_shares
from profstack.history.family import FamilyRuleError, FamilyRules, check_pattern, resolve_family
from profstack.history.prices import PriceTableError, pinned_prices
from profstack.history.text import history_metrics, summary_lines
from tests.unit.history.conftest import RESNET_W0, BuiltHistory


def test_the_pinned_table_has_its_date_region_and_source() -> None:
    table = pinned_prices()
    assert table.as_of
    assert table.region == "us-east-1"
    assert table.source.startswith("https://aws.amazon.com/")
    p4d = table.lookup("ml.p4d.24xlarge")
    assert p4d is not None
    assert p4d.gpus == 8
    assert p4d.usd_per_hour
    assert p4d.usd_per_hour > 10


def test_overrides_replace_a_price_and_add_an_instance_type() -> None:
    table = pinned_prices().with_overrides({"ml.p4d.24xlarge": 20.0, "ml.p6.48xlarge": 99.0}, {"ml.p6.48xlarge": 8})
    assert table.lookup("ml.p4d.24xlarge").usd_per_hour == 20.0  # type: ignore[union-attr]
    assert table.lookup("ml.p6.48xlarge").gpus == 8  # type: ignore[union-attr]
    assert table.overridden == {"ml.p4d.24xlarge", "ml.p6.48xlarge"}
    with pytest.raises(PriceTableError):
        pinned_prices().with_overrides({"ml.p4d.24xlarge": -1.0})


def test_cost_of_the_resnet_job_without_workers(summary_of: Callable[[str], dict[str, Any]]) -> None:
    # GIVEN the resnet job whose DataLoader stalls the GPU, on 2 x ml.p4d.24xlarge for an hour
    summary = summary_of(RESNET_W0)
    cost = job_cost(summary, JobResources("ml.p4d.24xlarge", 2, 3600.0, 3600.0), pinned_prices())
    # THEN 16 GPU-hours at the table's price
    assert cost["gpu_count"] == 16
    assert cost["gpu_hours"] == 16.0
    assert cost["total_usd"] == pytest.approx(2 * 37.688, abs=0.01)
    by_cause = {a["cause"]: a for a in cost["attribution"]}
    # AND most of the lost time is the input pipeline (DataLoader share 39.6 %, GPU idle 39.4 %)
    assert by_cause["input_pipeline"]["share_pct"] > 30
    assert by_cause["input_pipeline"]["usd"] == max(a["usd"] for a in cost["attribution"])
    assert sum(a["share_pct"] for a in cost["attribution"]) <= 100.0
    assert cost["lost_usd"] == pytest.approx(sum(a["usd"] for a in cost["attribution"]), abs=0.02)
    # AND the text says "about $X of GPU time ... on the input pipeline"
    text = "\n".join(cost_lines(cost))
    assert "GPU cost: about $75.38 for 16.0 GPU-hours on 2 x ml.p4d.24xlarge" in text
    assert "of GPU time on the input pipeline" in text
    assert "1 of 16 GPUs were profiled" in text


def test_an_unknown_instance_type_gives_shares_but_no_dollars(summary_of: Callable[[str], dict[str, Any]]) -> None:
    cost = job_cost(summary_of(RESNET_W0), JobResources("ml.x99.huge", 1, 600.0, 600.0), pinned_prices())
    assert cost["total_usd"] is None
    assert cost["gpu_hours"] is None
    assert all(a["usd"] is None for a in cost["attribution"])
    assert any("not in the price table" in n for n in cost["notes"])


def test_resources_from_describe_training_job() -> None:
    start = datetime(2026, 11, 1, 10, tzinfo=UTC)
    describe = {
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 3},
        "TrainingStartTime": start,
        "TrainingEndTime": start.replace(hour=12),
        "BillableTimeInSeconds": 3600,
    }
    res = JobResources.from_describe(describe)
    assert (res.instance_type, res.instance_count, res.duration_s, res.billable_s) == (
        "ml.g5.12xlarge",
        3,
        7200.0,
        3600.0,
    )
    groups = {"ResourceConfig": {"InstanceGroups": [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}] * 2}}
    assert JobResources.from_describe(groups).instance_count == 4
    assert JobResources.from_describe({}).instance_type is None


rank_strategy = st.fixed_dictionaries(
    {
        "temporal_breakdown": st.fixed_dictionaries(
            {"gpu_span_us": st.floats(0, 1e9), "idle_pct": st.one_of(st.none(), st.floats(-10, 200))}
        ),
        "idle_breakdown": st.fixed_dictionaries({"host_wait_pct": st.one_of(st.none(), st.floats(-10, 200))}),
        "dataloader": st.fixed_dictionaries({"share_pct": st.one_of(st.none(), st.floats(-10, 200))}),
        "communication": st.fixed_dictionaries(
            {"comm_time_us": st.floats(0, 1e10), "overlap_time_us": st.floats(0, 1e10)}
        ),
    }
)


@given(rank=rank_strategy)
def test_cause_shares_are_fractions_that_never_exceed_the_whole(rank: dict[str, Any]) -> None:
    shares = rank_shares(rank)
    values = [v for v in shares.values() if v is not None]
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in values)
    assert sum(values) <= 1.0 + 1e-9


def test_email_lines_and_metrics_carry_regression_and_cost(built_history: BuiltHistory) -> None:
    summary = built_history.summaries["resnet-w0"]
    lines = summary_lines(summary)
    assert any(line.startswith("Regression: regressed against family 'resnet'") for line in lines)
    assert "  Baseline jobs: resnet-w4" in lines
    assert any(line.startswith("GPU cost: about $") for line in lines)
    metrics = history_metrics(summary)
    assert metrics["Regressions"] == 1.0
    assert metrics["GPUCostUSD"] == summary["cost"]["total_usd"]
    assert history_metrics(built_history.summaries["resnet-w4"])["Regressions"] == 0.0


def test_family_from_the_tag_first_then_the_name_rule() -> None:
    rules = FamilyRules()
    assert resolve_family("bert-2026-11-01-10-00-00-123", {"profstack:family": "bert-large"}, rules) == (
        "bert-large",
        "tag",
    )
    assert resolve_family("bert-2026-11-01-10-00-00-123", {}, rules) == ("bert", "name_rule")
    assert resolve_family("my-one-off-job", {}, rules) is None
    # a tag value that cannot be a key segment is no family
    assert resolve_family("x", {"profstack:family": "../etc"}, FamilyRules(name_patterns=())) is None
    custom = FamilyRules(name_patterns=(r"^(llama-\d+b)-run\d+$",))
    assert resolve_family("llama-7b-run12", {}, custom) == ("llama-7b", "name_rule")


def test_bad_name_rules_fail_the_config_check(example_config: Any) -> None:
    with pytest.raises(FamilyRuleError):
        check_pattern("(unclosed")
    with pytest.raises(FamilyRuleError, match="name the family"):
        check_pattern(r"^(a)-(b)$")
    data = example_config.model_dump(mode="json")
    data["history"]["family"]["name_patterns"] = ["(unclosed"]
    with pytest.raises(ConfigError, match=r"history.family.name_patterns"):
        parse_config(data)
    data["history"]["family"]["name_patterns"] = []
    data["history"]["regression"] = {"no_such_threshold": 1}
    with pytest.raises(ConfigError, match="unknown regression threshold"):
        parse_config(data)
    data["history"]["regression"] = {}
    data["history"]["mlflow"] = {"tracking": "ftp://nope"}
    with pytest.raises(ConfigError, match=r"history\.mlflow\.tracking"):
        parse_config(data)
