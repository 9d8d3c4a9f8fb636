"""The wheel a user gets from `pip install .`: only the `profstack` package, a working CLI, no AWS needed.

Builds the wheel from a copy of the project, installs it with its declared dependencies into a fresh
virtualenv (no boto3: that is the `aws` extra), and runs the CLI there on a sample trace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_CONFIG, REPO_ROOT, TRACES_DIR

pytestmark = pytest.mark.slow

SAMPLE = TRACES_DIR / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=600, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "profstack", src / "profstack", ignore=shutil.ignore_patterns("__pycache__"))
    dist = root / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)])
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("profstack-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    pip = _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    assert pip.returncode == 0, pip.stderr[-2000:]
    return wheel, env_dir


def test_the_wheel_ships_only_the_profstack_package(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    # THEN one package and its metadata: no stacks, lambdas, demo, tests or bench
    assert tops == {"profstack", next(t for t in tops if t.endswith(".dist-info"))}
    assert not [n for n in names if n.startswith(("profstack/demo", "profstack/local_emf"))]
    # AND the data the engine and report need at run time are inside
    assert "profstack/analysis/summary.schema.json" in names


def test_the_installed_cli_analyses_a_sample_and_checks_a_config_without_boto3(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, env_dir = installed
    exe = str(env_dir / "bin" / "profstack")
    # GIVEN a virtualenv holding only the wheel and its declared dependencies
    assert _run([str(env_dir / "bin" / "python"), "-c", "import boto3"]).returncode != 0
    version = _run([exe, "--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("profstack ")

    # WHEN it analyses a sample trace (from another directory, so nothing of the repo is on sys.path)
    out = tmp_path / "out"
    run = _run([exe, "analyze", str(SAMPLE), "--out", str(out)], cwd=tmp_path)

    # THEN every output is written and the summary names the GPU rank
    assert run.returncode == 0, run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"][0]["has_gpu"] is True
    assert (out / "report.html").stat().st_size > 10_000
    assert list((out / "perfetto").glob("*.trace.json.gz"))

    # AND the config check works, and an AWS command names the missing extra in one line
    check = _run([exe, "config", "check", str(EXAMPLE_CONFIG)], cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    aws = _run([exe, "users", "list", "--config", str(EXAMPLE_CONFIG)], cwd=tmp_path)
    assert aws.returncode == 2
    assert aws.stderr.strip().splitlines() == [
        "profstack: error: this command talks to AWS and needs boto3: pip install 'profstack[aws]'"
    ]
