"""The config model: the example validates, and each bad config gives one line naming the field."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from profstack.config import ConfigError, ProfStackConfig, load_config, parse_config
from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    return data


def _with(path: str, value: Any) -> dict[str, Any]:
    """The example config with one field replaced; path like 'users.0.email'."""
    data = copy.deepcopy(_example())
    node: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def test_example_config_is_valid() -> None:
    # GIVEN the committed example WHEN loaded THEN it validates with its two users and a created domain
    config = load_config(EXAMPLE_CONFIG)
    assert [u.name for u in config.users] == ["alice", "bob"]
    assert config.domain.mode == "create"
    assert config.environment.account is None  # env-agnostic by default


BAD_CONFIGS = [
    pytest.param(_with("prefix", 42), r"^config: prefix: Input should be a valid string", id="wrong-type"),
    pytest.param({**_example(), "colour": "blue"}, r"^config: colour: unknown key", id="unknown-key"),
    pytest.param(_with("users.1.name", "alice"), r"^config: users: duplicate user 'alice'", id="duplicate-user"),
    pytest.param(
        _with("users.0.email", "alice-at-example"),
        r"^config: users\[0\]\.email: 'alice-at-example' is not a valid e-mail address",
        id="bad-email",
    ),
    pytest.param(
        _with("domain", {"mode": "import", "domain_id": "domain-1"}),
        r"^config: domain\.domain_id: String should match pattern",
        id="bad-domain-id",
    ),
    pytest.param(
        _with("legacy.rule_output_expire_after_days", -5),
        r"^config: legacy\.rule_output_expire_after_days: Input should be greater than 0",
        id="negative-days",
    ),
    pytest.param(
        _with("retention.raw_traces.glacier_ir_after_days", 20),
        r"^config: retention\.raw_traces: days must increase",
        id="unordered-tiers",
    ),
    pytest.param(
        _with("retention.log_retention_days", 10),
        r"^config: retention\.log_retention_days: 10 is not a CloudWatch Logs retention value",
        id="bad-log-retention",
    ),
    pytest.param(
        _with("environment", {"account": "123456789012"}),
        r"^config: environment: set both account and region, or neither",
        id="account-without-region",
    ),
    pytest.param(
        _with("domain", {"mode": "create", "vpc_id": "vpc-0a1b2c3d", "subnet_ids": []}),
        r"^config: domain\.subnet_ids: List should have at least 1 item",
        id="no-subnets",
    ),
    pytest.param(_with("domain", {"mode": "magic"}), r"^config: domain: Input tag 'magic'", id="bad-domain-mode"),
    pytest.param(
        _with("users.0.tensorboard_instance_type", "r5.large"),
        r"^config: users\[0\]\.tensorboard_instance_type: String should match pattern",
        id="bad-instance-type",
    ),
    pytest.param(_with("notifications.emails", ["x@y.io", "X@y.io"]), r"must be unique", id="duplicate-email"),
    pytest.param(
        _with("users.0.principals", ["arn:aws:iam::123456789012:role/*"]),
        r"^config: users\[0\]\.principals\[0\]: String should match pattern",
        id="principal-with-wildcard",
    ),
    pytest.param(
        _with("users", [{**u, "principals": ["arn:aws:iam::123456789012:user/shared"]} for u in _example()["users"]]),
        r"^config: users: principal arn:aws:iam::123456789012:user/shared is listed for both 'alice' and 'bob'",
        id="principal-of-two-users",
    ),
    pytest.param(["not", "a", "mapping"], r"^config: the file must hold a YAML mapping", id="not-a-mapping"),
]


@pytest.mark.parametrize(("data", "expected"), BAD_CONFIGS)
def test_bad_config_gives_one_line_naming_the_field(data: Any, expected: str) -> None:
    # GIVEN a config with one problem WHEN parsed THEN one ConfigError line names the field and the problem
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    message = str(caught.value)
    assert "\n" not in message
    assert __import__("re").search(expected, message), message


def test_several_problems_report_the_first_and_count_the_rest() -> None:
    data = _with("prefix", 42)
    data["colour"] = "blue"
    with pytest.raises(ConfigError, match=r"\(and 1 more problem\)$"):
        parse_config(data)


def test_unreadable_and_invalid_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("prefix: [unclosed\n")
    with pytest.raises(ConfigError, match=r"invalid YAML at line \d+"):
        load_config(broken)


def test_region_outside_tensorboard_documented_list_warns() -> None:
    config = parse_config(_with("environment", {"account": "123456789012", "region": "ap-south-1"}))
    assert any("not documented in ap-south-1" in w for w in config.warnings())
    config = parse_config(_with("environment", {"account": "123456789012", "region": "eu-west-1"}))
    assert not any("not documented" in w for w in config.warnings())


def test_committed_json_schema_matches_the_model() -> None:
    # GIVEN the JSON Schema shipped for editors WHEN compared to the model THEN they agree
    committed = json.loads((REPO_ROOT / "config" / "profstack.schema.json").read_text())
    assert committed == ProfStackConfig.model_json_schema(), "run: python -m profstack.config --schema"


def _run_app(config_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            # the repository's Node.js, as `make synth` gives it (tests/conftest.py sets JSII_NODE)
            **{k: v for k, v in os.environ.items() if k == "JSII_NODE"},
            "CDK_CONTEXT_JSON": json.dumps({"config": str(config_path)}),
            "CDK_OUTDIR": str(config_path.parent / "out"),
        },
        check=False,
        timeout=120,
    )


def test_app_exits_non_zero_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    # GIVEN a config with a bad e-mail WHEN app.py runs (as `cdk synth` runs it)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with("users.0.email", "nope")))
    result = _run_app(bad)
    # THEN it exits non-zero with exactly one line naming the field, and no traceback
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"profstack: invalid config: {bad}: users[0].email: 'nope' is not a valid e-mail address"
    ]
    assert "Traceback" not in result.stderr + result.stdout


def _with_thresholds(thresholds: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(_example())
    data.setdefault("processing", {})["rule_thresholds"] = thresholds
    return data


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        pytest.param(
            {"low_gpu_util_busy_pc": 60},
            r"^config: processing\.rule_thresholds: unknown rule threshold\(s\) low_gpu_util_busy_pc; valid: ",
            id="mistyped-rule-name",
        ),
        pytest.param(
            {"low_gpu_util_busy_pct": "sixty"},
            r"^config: processing\.rule_thresholds: rule threshold low_gpu_util_busy_pct must be a number, "
            r"got 'sixty'$",
            id="not-a-number",
        ),
        pytest.param(
            {"step_outlier_sigma": -1},
            r"^config: processing\.rule_thresholds: rule threshold step_outlier_sigma must be a finite number >= 0",
            id="negative",
        ),
        pytest.param(
            {"straggler_pct": float("nan")},
            r"^config: processing\.rule_thresholds: rule threshold straggler_pct must be a finite number >= 0",
            id="nan",
        ),
    ],
)
def test_bad_rule_threshold_fails_the_config_check_in_one_line(thresholds: dict[str, Any], expected: str) -> None:
    # GIVEN processing.rule_thresholds with a typo or a bad value WHEN the config is checked
    with pytest.raises(ConfigError) as caught:
        parse_config(_with_thresholds(thresholds))
    # THEN one line names the field and the problem (before: accepted here, then every job failed into the DLQ)
    message = str(caught.value)
    assert "\n" not in message
    assert __import__("re").search(expected, message), message


def test_known_rule_thresholds_pass_the_config_check_unchanged() -> None:
    # GIVEN valid overrides WHEN parsed THEN they are kept as given (the Lambda's RULE_THRESHOLDS env)
    config = parse_config(_with_thresholds({"low_gpu_util_busy_pct": 60, "step_outlier_sigma": 2.5}))
    assert config.processing.rule_thresholds == {"low_gpu_util_busy_pct": 60.0, "step_outlier_sigma": 2.5}


def test_schema_lists_exactly_the_engines_rule_thresholds() -> None:
    # GIVEN the editor schema WHEN compared to the engine's typed thresholds THEN the names agree
    from profstack.analysis.options import RuleThresholds

    node = ProfStackConfig.model_json_schema()["$defs"]["Processing"]["properties"]["rule_thresholds"]
    assert sorted(node["properties"]) == sorted(RuleThresholds.names())
    assert node["additionalProperties"] is False


def _with_system_thresholds(thresholds: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(_example())
    data.setdefault("processing", {})["system_rule_thresholds"] = thresholds
    return data


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        pytest.param(
            {"system_low_gpu_p95": 60},
            r"^config: processing\.system_rule_thresholds: unknown system rule threshold\(s\) system_low_gpu_p95; "
            r"valid: system_low_gpu_p95_pct, ",
            id="mistyped-name",
        ),
        pytest.param(
            {"system_low_gpu_p95_pct": "sixty"},
            r"^config: processing\.system_rule_thresholds: system rule threshold system_low_gpu_p95_pct must be a "
            r"number, got 'sixty'$",
            id="not-a-number",
        ),
        pytest.param(
            {"system_patience_minutes": -1},
            r"^config: processing\.system_rule_thresholds: system rule threshold system_patience_minutes must be a "
            r"finite number >= 0",
            id="negative",
        ),
        pytest.param(
            {"system_min_points": float("nan")},
            r"^config: processing\.system_rule_thresholds: system rule threshold system_min_points must be a finite",
            id="nan",
        ),
    ],
)
def test_bad_system_rule_threshold_fails_the_config_check_in_one_line(
    thresholds: dict[str, Any], expected: str
) -> None:
    # GIVEN processing.system_rule_thresholds (issue 15: Debugger's system rules) with a typo or a bad value
    with pytest.raises(ConfigError) as caught:
        parse_config(_with_system_thresholds(thresholds))
    # THEN one line names the field and the problem, at config check and synth, not in every job
    message = str(caught.value)
    assert "\n" not in message
    assert __import__("re").search(expected, message), message


def test_system_rule_thresholds_pass_unchanged_and_the_schema_lists_exactly_the_rules_keys() -> None:
    from profstack.jobs.instance_rules import SYSTEM_RULE_DEFAULTS

    config = parse_config(_with_system_thresholds({"system_low_gpu_p95_pct": 50, "system_patience_minutes": 0}))
    assert config.processing.system_rule_thresholds == {"system_low_gpu_p95_pct": 50.0, "system_patience_minutes": 0.0}
    node = ProfStackConfig.model_json_schema()["$defs"]["Processing"]["properties"]["system_rule_thresholds"]
    assert sorted(node["properties"]) == sorted(SYSTEM_RULE_DEFAULTS)
    assert node["additionalProperties"] is False


def test_config_check_command_rejects_a_mistyped_rule_threshold(tmp_path: Path) -> None:
    # GIVEN a config file with a mistyped rule threshold WHEN `python -m profstack.config --check` runs
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with_thresholds({"sync_time_pc": 3})))
    result = subprocess.run(
        [sys.executable, "-m", "profstack.config", "--check", str(bad)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    # THEN exit 1 with one line naming the field, and no traceback
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"profstack: invalid config: {bad}: processing.rule_thresholds: unknown rule threshold(s) sync_time_pc"
    )
    assert "Traceback" not in result.stderr + result.stdout


def test_app_rejects_a_bad_rule_threshold_value_in_one_line(tmp_path: Path) -> None:
    # GIVEN a config with a non-numeric rule threshold WHEN app.py runs (as `cdk synth` runs it)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with_thresholds({"memcpy_time_pct": "ten"})))
    result = _run_app(bad)
    # THEN it exits non-zero with exactly one line naming the field, and no traceback
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"profstack: invalid config: {bad}: processing.rule_thresholds: "
        "rule threshold memcpy_time_pct must be a number, got 'ten'"
    ]
    assert "Traceback" not in result.stderr + result.stdout


def test_include_last_step_defaults_to_hta_and_reaches_the_processor() -> None:
    # GIVEN the shipped config WHEN parsed THEN the last ProfilerStep is dropped by default, like HTA and the engine
    from lambdas.trace_processor.env import ProcessorEnv
    from profstack.analysis.options import DEFAULT_INCLUDE_LAST_STEP

    config = parse_config(_with("processing", {}))
    assert config.processing.include_last_step is DEFAULT_INCLUDE_LAST_STEP is False
    assert not any("include_last_step" in w for w in config.warnings())
    config = parse_config(_with("processing", {"include_last_step": True}))
    assert config.processing.include_last_step is True
    # AND the processor's environment model reads the variable the stack sets from it (template: infra tests)
    fields = ProcessorEnv.model_fields["include_last_step"]
    assert fields.alias == "INCLUDE_LAST_STEP"
    assert fields.default is DEFAULT_INCLUDE_LAST_STEP
