"""docs/operate.md and the admin commands against what the stacks really synthesize: the cost model's resource
counts, a runbook for every alarm, the policy statements `profstack verify` looks for, and the cost table the
guide shows."""

from __future__ import annotations

import re
from typing import Any

import pytest

from profstack.cli.verify import BOUNDARY_SIDS, QUEUE_SIDS
from profstack.config import ProfStackConfig
from profstack.deploy_cost import Assumptions, estimate, format_text, resource_counts
from profstack.jobs.alarms import KINDS
from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT
from tests.infra.conftest import SynthesizedApp
from tests.infra.tensorboard_synth import config_with, synth_tensorboard

OPERATE = REPO_ROOT / "docs" / "operate.md"
_HASH = re.compile(r"[0-9A-F]{8}$")


def _resources(app: SynthesizedApp, kind: str) -> list[dict[str, Any]]:
    return [r for t in app.templates.values() for r in t["Resources"].values() if r["Type"] == kind]


def _alarm_ids(app: SynthesizedApp) -> list[str]:
    """Each alarm's logical id without CDK's hash: the part of the alarm's name a person sees."""
    return sorted(
        _HASH.sub("", lid)
        for t in app.templates.values()
        for lid, r in t["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    )


def test_the_cost_model_counts_what_the_stacks_synthesize(
    synthesized: SynthesizedApp, example_config: ProfStackConfig
) -> None:
    # GIVEN the example config's synthesized templates WHEN the billed resources are counted in them
    alarms = _resources(synthesized, "AWS::CloudWatch::Alarm")
    metrics = sum(len(a["Properties"].get("Metrics", [])) - 1 if a["Properties"].get("Metrics") else 1 for a in alarms)
    schedules = [r for r in _resources(synthesized, "AWS::Events::Rule") if r["Properties"].get("ScheduleExpression")]
    counts = resource_counts(example_config)
    # THEN the cost model counts the same: keys, alarms, the metrics they watch, dashboards, schedules
    assert counts.kms_keys == len(_resources(synthesized, "AWS::KMS::Key"))
    assert counts.alarms == len(alarms)
    assert counts.alarm_metrics == metrics
    assert counts.dashboards == len(_resources(synthesized, "AWS::CloudWatch::Dashboard"))
    minutes = sorted(int(re.search(r"\d+", r["Properties"]["ScheduleExpression"]).group()) for r in schedules)  # type: ignore[union-attr]
    assert sorted(counts.schedules.values()) == minutes
    assert counts.interface_endpoints == len(_resources(synthesized, "AWS::EC2::VPCEndpoint")) == 0


def test_a_vpc_only_domain_pays_for_its_interface_endpoints() -> None:
    # GIVEN a VpcOnly domain on two subnets WHEN synthesized THEN each interface endpoint has one network
    # interface per subnet, which is what the model bills
    config = config_with(
        domain={
            "mode": "create",
            "vpc_id": "vpc-0e5d2a91c7b3f4d86",
            "subnet_ids": ["subnet-09f3c2e1d8a7b6c54", "subnet-0c4b8e2a1f9d7e635"],
            "network_access": "VpcOnly",
        }
    )
    endpoints = synth_tensorboard(config).resources("AWS::EC2::VPCEndpoint")
    interface = [e for e in endpoints.values() if e["Properties"].get("VpcEndpointType") == "Interface"]
    per_subnet = {len(e["Properties"]["SubnetIds"]) for e in interface}
    assert per_subnet == {2}
    assert resource_counts(config).interface_endpoints == len(interface) * 2


def test_every_alarm_has_a_runbook(synthesized: SynthesizedApp) -> None:
    # GIVEN every alarm the stacks synthesize, and every per-job alarm the alarm manager creates
    headings = [ln for ln in OPERATE.read_text().splitlines() if ln.startswith("### ")]
    ids = _alarm_ids(synthesized)
    assert len(ids) >= 8
    # WHEN the guide's runbook headings are read THEN each alarm has one
    missing = [a for a in ids if not any(a in h for h in headings)]
    missing += [k for k in KINDS if not any(k in h for h in headings)]
    assert not missing, f"no runbook in docs/operate.md for: {missing}"


def test_verify_looks_for_statements_the_stacks_write(synthesized: SynthesizedApp) -> None:
    # GIVEN the synthesized bucket and queue policies WHEN their statement ids are read
    bucket_sids = {
        s.get("Sid")
        for p in _resources(synthesized, "AWS::S3::BucketPolicy")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Effect") == "Deny"
    }
    queue_sids = {
        s.get("Sid")
        for p in _resources(synthesized, "AWS::SQS::QueuePolicy")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    }
    # THEN the statements `profstack verify` requires are there (a rename breaks this test, not the smoke test)
    assert set(BOUNDARY_SIDS) <= bucket_sids
    assert set(QUEUE_SIDS) <= queue_sids


def test_the_guides_cost_block_is_the_commands_output() -> None:
    from profstack.config import load_config

    # GIVEN the cost block of docs/operate.md WHEN compared with `profstack cost` on the example config
    text = OPERATE.read_text()
    block = text.split("<!-- cost:start -->\n", 1)[1].split("<!-- cost:end -->", 1)[0]
    expected = "```text\n" + format_text(estimate(load_config(EXAMPLE_CONFIG), Assumptions())) + "```\n"
    # THEN they are the same (regenerate: python -m scripts.operate_cost_block)
    assert block == expected


@pytest.mark.parametrize("jobs", [0, 100, 10_000])
def test_the_monthly_total_adds_up(example_config: ProfStackConfig, jobs: int) -> None:
    est = estimate(example_config, Assumptions(jobs_per_month=jobs))
    a = est.assumptions
    assert est.monthly == pytest.approx(
        est.total(est.standing)
        + jobs * est.total(est.per_job)
        + jobs * a.running_hours_per_job * est.total(est.per_running_hour)
    )
    assert all(line.usd >= 0 for line in [*est.standing, *est.per_job, *est.per_running_hour])
