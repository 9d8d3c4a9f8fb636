"""`npx cdk deploy` (app.py) refuses the example config's placeholders; `make synth` synthesizes the example on
purpose, with the context flag that turns the refusal into one warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT


def _run_app(config: Path, outdir: Path, **context: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            **{k: v for k, v in os.environ.items() if k in {"JSII_NODE", "PYTHONPATH"}},
            "CDK_CONTEXT_JSON": json.dumps({"config": str(config), **context}),
            "CDK_OUTDIR": str(outdir),
        },
        check=False,
        timeout=300,
    )


def test_the_app_refuses_the_example_config_one_line_per_placeholder(tmp_path: Path) -> None:
    # GIVEN the shipped example, followed literally WHEN the CDK app runs as `cdk deploy` runs it
    result = _run_app(EXAMPLE_CONFIG, tmp_path / "out")
    # THEN it stops before synthesizing anything, one line per placeholder, no traceback
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 6
    assert all(line.startswith(f"profstack: invalid config: {EXAMPLE_CONFIG}: ") for line in lines)
    assert "domain.vpc_id: vpc-0a1b2c3d4e5f60718" in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_make_synth_passes_the_flag_that_allows_the_example() -> None:
    # GIVEN the Makefile WHEN its synth recipe is read THEN both the check and the app are told the example is fine
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile.split("\nsynth:", 1)[1].split("\n\n", 1)[0]
    assert "config check --allow-example-values $(CONFIG)" in recipe
    assert "-c allow_example_values=true" in recipe
