"""The pre-commit hooks run the project's own pinned tools, offline."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.conftest import REPO_ROOT


def test_config_is_valid_and_every_hook_is_local_and_uses_the_venv() -> None:
    # GIVEN the committed hook config WHEN pre-commit validates it THEN it is accepted
    run = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # AND no hook fetches a repository: each runs a tool from .venv (the pins in requirements/)
    config = yaml.safe_load((REPO_ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [h for repo in config["repos"] for h in repo["hooks"]]
    assert {r["repo"] for r in config["repos"]} == {"local"}
    assert {h["id"] for h in hooks} >= {"ruff-check", "ruff-format", "mypy"}
    assert all(h["entry"].startswith(".venv/bin/") for h in hooks)
