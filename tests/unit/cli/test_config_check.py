"""`profstack config check [FILE]` and its older spelling `python -m profstack.config --check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profstack.cli import main
from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT


def test_the_example_config_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the shipped example WHEN checked THEN exit 0 and one line naming what it holds
    assert main(["config", "check", str(EXAMPLE_CONFIG)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"{EXAMPLE_CONFIG}: valid (")


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
    # THEN the same result
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{EXAMPLE_CONFIG}: valid (")
