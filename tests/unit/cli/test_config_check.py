"""`profstack config check [FILE]` and its older spelling `python -m profstack.config --check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profstack.cli import main
from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT


def test_the_example_config_is_valid_in_shape(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the shipped example WHEN checked as `make synth` checks it THEN exit 0 and one line naming what it holds
    assert main(["config", "check", str(EXAMPLE_CONFIG), "--allow-example-values"]) == 0
    captured = capsys.readouterr()
    out = captured.out.strip().splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"{EXAMPLE_CONFIG}: valid (")
    # AND one warning says it holds placeholders and cannot deploy
    assert [ln for ln in captured.err.splitlines() if "placeholders" in ln] == [
        f"profstack: warning: {EXAMPLE_CONFIG} holds the example config's placeholders (domain.vpc_id, "
        "domain.subnet_ids[0], domain.subnet_ids[1], users[0].email, users[1].email, notifications.emails[0]): it "
        "synthesizes but cannot deploy; `profstack config check` says what to set, `profstack init` writes a config "
        "from your account"
    ]


def test_the_example_config_is_refused_one_line_per_placeholder(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the shipped example, followed literally WHEN checked THEN exit 1
    assert main(["config", "check", str(EXAMPLE_CONFIG)]) == 1
    captured = capsys.readouterr()
    # THEN one line per example value, each naming the field and the value, nothing on stdout
    lines = captured.err.strip().splitlines()
    fields = [ln.removeprefix(f"profstack: invalid config: {EXAMPLE_CONFIG}: ").split(":", 1)[0] for ln in lines]
    assert fields == [
        "domain.vpc_id",
        "domain.subnet_ids[0]",
        "domain.subnet_ids[1]",
        "users[0].email",
        "users[1].email",
        "notifications.emails[0]",
    ]
    assert all(ln.startswith(f"profstack: invalid config: {EXAMPLE_CONFIG}: ") for ln in lines)
    assert "vpc-0a1b2c3d4e5f60718 is the example config's placeholder" in lines[0]
    assert "profstack init" in lines[0]
    assert captured.out == ""


def test_every_problem_is_its_own_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a config with three unrelated problems
    bad = tmp_path / "bad.yaml"
    text = EXAMPLE_CONFIG.read_text()
    text = text.replace("email: alice@example.com", "email: alice-at-example", 1)
    text = text.replace("reserved_concurrency: 5", "reserved_concurrency: 0", 1)
    text = text.replace("prefix: profstack", "prefix: Profstack", 1)
    bad.write_text(text)
    # WHEN checked THEN exit 1 with one line each (as the help promises), naming each field
    assert main(["config", "check", str(bad)]) == 1
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("profstack: invalid config:")]
    assert len(lines) == 3, lines
    joined = "\n".join(lines)
    assert "prefix:" in joined
    assert "users[0].email" in joined
    assert "processing.reserved_concurrency" in joined


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("domain",), {"mode": "import", "domain_id": "d-abcdef123456"}, "domain.domain_id"),
        (("domain", "vpc_id"), "vpc-00000000", "domain.vpc_id"),
        (("environment",), {"account": "123456789012", "region": "us-east-1"}, "environment.account"),
        (("environment",), {"account": "111122223333", "region": "us-east-1"}, "environment.account"),
        (("notifications", "emails"), ["oncall@team.example"], "notifications.emails[0]"),
        (("users",), [{"name": "carol", "email": "carol@mail.example.org"}], "users[0].email"),
        (
            ("storage", "break_glass_principal_arns"),
            ["arn:aws:iam::123456789012:role/IncidentResponse"],
            "storage.break_glass_principal_arns[0]",
        ),
        (
            ("users",),
            [{"name": "dana", "email": "dana@mlplatform.io", "principals": ["arn:aws:iam::123456789012:user/dana"]}],
            "users[0].principals[0]",
        ),
    ],
)
def test_each_kind_of_example_value_is_named(path: tuple[str, ...], value: object, field: str) -> None:
    import yaml

    from profstack.config import example_value_problems, parse_config

    # GIVEN a config whose values are all real but one placeholder
    data = yaml.safe_load(REAL_CONFIG)
    target = data
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    # WHEN its example values are listed THEN exactly that field is named
    problems = example_value_problems(parse_config(data))
    assert [p.split(":", 1)[0] for p in problems] == [field], problems


def test_a_real_config_has_no_example_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a config of real-looking values WHEN checked THEN it is valid, with no warning about placeholders
    real = tmp_path / "real.yaml"
    real.write_text(REAL_CONFIG)
    assert main(["config", "check", str(real)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{real}: valid (1 users, domain create)")
    assert "placeholder" not in captured.err


def test_json_lists_problems_and_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["config", "check", str(EXAMPLE_CONFIG), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert len(report["problems"]) == 6
    assert report["problems"][0].startswith(f"{EXAMPLE_CONFIG}: domain.vpc_id: ")


REAL_CONFIG = """\
prefix: mlplat
environment: {account: "403921877410", region: eu-west-1}
domain:
  mode: create
  vpc_id: vpc-0e5d2a91c7b3f4d86
  subnet_ids: [subnet-09f3c2e1d8a7b6c54]
users:
  - name: dana
    email: dana@mlplatform.io
notifications:
  emails: [ml-oncall@mlplatform.io]
"""


def test_an_invalid_config_is_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a config whose first user has a broken e-mail address
    bad = tmp_path / "bad.yaml"
    text = EXAMPLE_CONFIG.read_text()
    bad.write_text(text.replace("email: alice@example.com", "email: alice-at-example", 1))
    # WHEN checked THEN exit 1, one line on stderr that names users[0].email, nothing on stdout
    assert main(["config", "check", str(bad)]) == 1
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if not ln.startswith("profstack: warning:")]
    assert len(lines) == 1
    assert lines[0].startswith("profstack: invalid config: ")
    assert "users[0].email" in lines[0]
    assert captured.out == ""


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(tmp_path / "nope.yaml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "nope.yaml" in err[0]


def test_module_spelling_runs_the_same_check() -> None:
    # GIVEN the spelling `make synth` used before the sub-command existed
    run = subprocess.run(
        [sys.executable, "-m", "profstack.config", "--check", str(EXAMPLE_CONFIG)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN the same result: the example's placeholders are refused, one line each
    assert run.returncode == 1
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 6
