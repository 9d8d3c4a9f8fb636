"""Rule actions (profstack/actions.py): a job is stopped only when every opt-in holds and the finding rests on files
read in full; anything else notifies and says why. Generated findings, tags and policies, not only the samples."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.actions import (
    ACTIONS_TAG,
    ActionPolicy,
    action_lines,
    decide,
    job_allows_stop,
    live_enabled,
    read_in_full,
)
from profstack.config import ConfigError, parse_config

POLICY = ActionPolicy(stop_enabled=True, rules={"LowGPUUtilization": "stop"}, stop_min_severity="critical")
TAGS = {ACTIONS_TAG: "stop"}


def _summary(*findings: dict[str, Any], statuses: tuple[str, ...] = ("ok",)) -> dict[str, Any]:
    return {
        "inputs": [{"name": f"r{i}", "rank": i, "status": s} for i, s in enumerate(statuses)],
        "findings": list(findings),
    }


def _finding(
    rule: str = "LowGPUUtilization", severity: str = "critical", ranks: list[int] | None = None
) -> dict[str, Any]:
    return {"rule_id": rule, "severity": severity, "message": f"{rule} fired", "ranks": [0] if ranks is None else ranks}


def test_a_critical_idle_finding_stops_a_job_that_opted_in() -> None:
    (decision,) = decide(_summary(_finding()), POLICY, TAGS)
    assert decision.action == "stop"
    assert decision.reason is None


@pytest.mark.parametrize(
    ("policy", "tags", "summary", "why"),
    [
        (ActionPolicy(rules={"LowGPUUtilization": "stop"}), TAGS, _summary(_finding()), "stop_enabled"),
        (POLICY, {}, _summary(_finding()), f"{ACTIONS_TAG}=stop"),
        (POLICY, {ACTIONS_TAG: "notify"}, _summary(_finding()), f"{ACTIONS_TAG}=stop"),
        (POLICY, TAGS, _summary(_finding(severity="warning")), "below processing.actions.stop_min_severity"),
        (POLICY, TAGS, _summary(_finding(), statuses=("partial",)), "not read in full"),
        (POLICY, TAGS, _summary(_finding(ranks=[]), statuses=("ok", "failed")), "not read in full"),
    ],
)
def test_a_stop_rule_only_notifies_when_any_condition_is_missing_and_says_which(
    policy: ActionPolicy, tags: dict[str, str], summary: dict[str, Any], why: str
) -> None:
    (decision,) = decide(summary, policy, tags)
    assert decision.action == "notify"
    assert decision.reason is not None
    assert why in decision.reason
    assert action_lines({"actions": [decision.to_json()]}) == [
        f"LowGPUUtilization would stop this job, but {decision.reason}"
    ]


def test_a_finding_of_a_rank_read_in_full_stops_even_beside_a_cut_file_of_another_rank() -> None:
    # rank 0 read in full and idle; rank 1 cut short: the finding names rank 0 only
    (decision,) = decide(_summary(_finding(ranks=[0]), statuses=("ok", "partial")), POLICY, TAGS)
    assert decision.action == "stop"


def test_rules_that_describe_files_never_stop_and_info_findings_do_nothing() -> None:
    policy = ActionPolicy(stop_enabled=True, rules={"UnreadableTraceFiles": "stop", "TensorCoreUnderuse": "stop"})
    decisions = decide(_summary(_finding("UnreadableTraceFiles"), _finding("TensorCoreUnderuse", "info")), policy, TAGS)
    assert [(d.rule_id, d.action) for d in decisions] == [("UnreadableTraceFiles", "notify")]
    assert decisions[0].reason is not None
    assert "trace files" in decisions[0].reason


def test_tags_are_read_case_and_blank_insensitively() -> None:
    assert not live_enabled({"profstack:live": " Off "})
    assert live_enabled({"profstack:live": "on"})
    assert live_enabled({})
    assert job_allows_stop({ACTIONS_TAG: "STOP"})
    assert not job_allows_stop({ACTIONS_TAG: "stopped"})


_severity = st.sampled_from(["info", "warning", "critical", "", "CRITICAL", "fatal"])
_rule = st.sampled_from(["LowGPUUtilization", "CPUBound", "UnreadableTraceFiles", "", "x"])
_finding_st = st.one_of(
    st.fixed_dictionaries(
        {
            "rule_id": st.one_of(_rule, st.none(), st.integers()),
            "severity": _severity,
            "message": st.text(max_size=20),
            "ranks": st.one_of(st.lists(st.integers(0, 3), max_size=3), st.none(), st.text(max_size=3)),
        }
    ),
    st.none(),
    st.text(max_size=5),
    st.integers(),
)
_input_st = st.fixed_dictionaries(
    {"rank": st.one_of(st.integers(0, 3), st.none()), "status": st.sampled_from(["ok", "partial", "failed"])}
)


@settings(max_examples=300, deadline=None)
@given(
    findings=st.lists(_finding_st, max_size=8),
    inputs=st.lists(_input_st, max_size=4),
    stop_enabled=st.booleans(),
    rules=st.dictionaries(_rule, st.sampled_from(["notify", "stop"]), max_size=3),
    min_severity=st.sampled_from(["warning", "critical"]),
    tag=st.sampled_from(["stop", "Stop ", "", "no", None]),
)
def test_generated_inputs_never_stop_without_every_opt_in(
    *,
    findings: list[Any],
    inputs: list[dict[str, Any]],
    stop_enabled: bool,
    rules: dict[str, str],
    min_severity: str,
    tag: str | None,
) -> None:
    summary = {"findings": findings, "inputs": inputs}
    tags = {} if tag is None else {ACTIONS_TAG: tag}
    policy = ActionPolicy(stop_enabled=stop_enabled, rules=rules, stop_min_severity=min_severity)
    decisions = decide(summary, policy, tags)
    # one decision per rule, never for info or unknown severities
    assert len({d.rule_id for d in decisions}) == len(decisions)
    assert all(d.severity in {"warning", "critical"} for d in decisions)
    for d in decisions:
        if d.action == "stop":
            assert stop_enabled
            assert rules.get(d.rule_id) == "stop"
            assert job_allows_stop(tags)
            assert d.rule_id != "UnreadableTraceFiles"
            assert d.severity == "critical" or min_severity == "warning"
            # the finding it acts on rests only on files read in full
            behind = [f for f in findings if isinstance(f, dict) and f.get("rule_id") == d.rule_id]
            assert any(f.get("severity") == d.severity and read_in_full(f, summary) for f in behind)
        else:
            assert d.reason is None or rules.get(d.rule_id) == "stop"
    assert len(action_lines({"actions": [d.to_json() for d in decisions]})) <= len(decisions)


def test_read_in_full_needs_at_least_one_input() -> None:
    assert not read_in_full(_finding(ranks=[]), {"inputs": []})
    assert not read_in_full(_finding(ranks=[5]), _summary(statuses=("ok",)))


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ({"rules": {"LowGPUUtilization": "kill"}}, "processing.actions.rules"),
        ({"rules": {"low gpu": "stop"}}, "processing.actions.rules"),
        ({"stop_min_severity": "info"}, "processing.actions.stop_min_severity"),
        ({"stop": True}, "unknown key"),
    ],
)
def test_config_refuses_what_it_cannot_act_on_in_one_line(actions: dict[str, Any], message: str) -> None:
    data = {"prefix": "profstack", "domain": {"mode": "import", "domain_id": "d-abcdef123456"}}
    data["processing"] = {"actions": actions}
    with pytest.raises(ConfigError, match=message) as caught:
        parse_config(data)
    assert "\n" not in str(caught.value)


def test_policy_round_trips_through_the_functions_environment() -> None:
    assert ActionPolicy.from_json(POLICY.to_json()) == POLICY
    with pytest.raises(ValueError, match="notify or stop"):
        ActionPolicy.from_json({"rules": {"A": "reboot"}})


def test_config_warns_when_a_stop_rule_cannot_stop() -> None:
    data: dict[str, Any] = {"prefix": "profstack", "domain": {"mode": "import", "domain_id": "d-abcdef123456"}}
    data["processing"] = {"actions": {"rules": {"LowGPUUtilization": "stop"}}}
    assert any("LowGPUUtilization say stop, but stop_enabled is false" in w for w in parse_config(data).warnings())
    data["processing"] = {"actions": {"stop_enabled": True}, "live": {"enabled": False}}
    assert any("processing.live.enabled is false" in w for w in parse_config(data).warnings())
    data["processing"] = {"actions": {"stop_enabled": True, "rules": {"LowGPUUtilization": "stop"}}}
    assert not any("processing.actions" in w for w in parse_config(data).warnings())


@pytest.mark.parametrize(
    ("finding_ranks", "input_ranks", "possible", "stops"),
    [
        ([0], (0,), 16, True),
        ([15], (15,), 16, True),
        ([16], (16,), 16, False),  # one past the job's last GPU
        ([3, 63], (3, 63), 16, False),
        ([], (0, 63), 16, False),  # a finding naming no rank rests on every input's
        ([63], (63,), None, True),  # GPUs unknown (a type the table lacks): no bound is invented
    ],
)
def test_a_finding_about_a_rank_the_job_cannot_have_never_stops_it(
    finding_ranks: list[int], input_ranks: tuple[int, ...], possible: int | None, stops: bool
) -> None:
    summary = {
        "inputs": [{"name": f"r{r}", "rank": r, "status": "ok"} for r in input_ranks],
        "findings": [_finding(ranks=finding_ranks)],
    }
    (decision,) = decide(summary, POLICY, TAGS, ranks_possible=possible)
    assert (decision.action == "stop") is stops
    if not stops:
        assert f"beyond the job's {possible} GPUs" in str(decision.reason)


def test_the_gpus_a_job_has_come_from_its_resource_config() -> None:
    from profstack.jobs.instances import accelerator_count

    assert accelerator_count({"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}) == 16
    assert accelerator_count({"InstanceGroups": [
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}, {"InstanceType": "ml.g5.xlarge", "InstanceCount": 3},
    ]}) == 11  # fmt: skip
    assert accelerator_count({"InstanceType": "ml.m5.xlarge", "InstanceCount": 4}) is None  # CPU ranks: unbounded
    assert accelerator_count({"InstanceType": "ml.p99.huge", "InstanceCount": 1}) is None
    assert accelerator_count(None) is None
