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


def _run(
    argv: list[str], extra_env: dict[str, str] | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(extra_env or {})
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=600, **kwargs)  # type: ignore[call-overload,no-any-return]


def _build_and_install(root: Path, **env: str) -> tuple[Path, Path, str]:
    """A wheel built from a copy of the project (no built module in it), installed into a fresh virtualenv;
    and what the build said on stderr."""
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "profstack", src / "profstack", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    dist = root / "dist"
    # -v: pip shows the build backend's own output (the "not built" line) only when verbose
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(dist), f"{src}/"]
    built = _run(argv, extra_env=env)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("profstack-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    pip = _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    assert pip.returncode == 0, pip.stderr[-2000:]
    return wheel, env_dir, built.stdout + built.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    wheel, env_dir, _ = _build_and_install(tmp_path_factory.mktemp("wheel"))
    return wheel, env_dir


def _backend(env_dir: Path, cwd: Path) -> str:
    probe = _run(
        [str(env_dir / "bin" / "python"), "-c", "from profstack.analysis import native; print(native.backend())"],
        cwd=cwd,
    )
    assert probe.returncode == 0, probe.stderr
    return probe.stdout.strip()


def test_the_wheel_carries_the_c_engine_built_for_this_python(installed: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, env_dir = installed
    # THEN `pip wheel .` compiled the engine into the wheel (before: only its .c source was in it, and an
    # installed wheel ran the Python loop), and the installed package runs it
    assert [n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("profstack/analysis/_gpuaccel.cpython-")]
    assert _backend(env_dir, tmp_path) == "c"


def test_without_a_compiler_the_install_still_works_and_says_so_once(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    # GIVEN no working C compiler (CC names a program that fails)
    _, env_dir, stderr = _build_and_install(tmp_path_factory.mktemp("nocc"), CC="false", LDSHARED="false")
    # THEN the build succeeds with one stated warning, and the installed package runs the Python loop
    assert stderr.count("profstack: the C engine was not built") == 1, stderr[-3000:]
    assert _backend(env_dir, tmp_path) == "python"


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
    check = _run([exe, "config", "check", str(EXAMPLE_CONFIG), "--allow-example-values"], cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    aws = _run([exe, "users", "list", "--config", str(EXAMPLE_CONFIG)], cwd=tmp_path)
    assert aws.returncode == 2
    python = env_dir / "bin" / "python"
    assert aws.stderr.strip().splitlines() == [
        f"profstack: error: this command talks to AWS and needs boto3, which is not installed in {env_dir}: "
        f"run `{python} -m pip install 'boto3>=1.34,<2'` (docs/first-report.md, Install)"
    ]


def test_the_manylinux_wheels_carry_a_module_for_their_platform_within_its_symbol_floor(tmp_path: Path) -> None:
    # GIVEN `make wheels`' builder (zig as the cross compiler, auditwheel as the judge), for CPython 3.11
    out = tmp_path / "dist"
    built = _run([sys.executable, "-m", "scripts.wheels", "--out", str(out), "--python", "3.11"], cwd=REPO_ROOT)
    assert built.returncode == 0, built.stderr[-3000:]
    rows = [json.loads(line) for line in built.stdout.splitlines()]
    # THEN one pure wheel and one native wheel per architecture, each within manylinux2014's glibc floor
    assert {r["engine"] for r in rows} == {"python", "native"}
    natives = {r["wheel"]: r for r in rows if r["engine"] == "native"}
    assert sorted(n.split("-")[-1] for n in natives) == [
        "manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        "manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    ]
    machine = {"x86_64": 62, "aarch64": 183}  # ELF e_machine
    for name in natives:
        arch = "aarch64" if "aarch64" in name else "x86_64"
        with zipfile.ZipFile(out / name) as whl:
            (module,) = [n for n in whl.namelist() if n.startswith("profstack/analysis/_gpuaccel.")]
            assert module.endswith(f"cpython-311-{arch}-linux-gnu.so")
            elf = whl.read(module)
            wheel_meta = whl.read("profstack-0.1.0.dist-info/WHEEL").decode()
        # AND the module is an ELF for that machine, and the metadata says the wheel is not pure
        assert elf[:4] == b"\x7fELF"
        assert int.from_bytes(elf[18:20], "little") == machine[arch]
        assert "Root-Is-Purelib: false" in wheel_meta
        assert f"Tag: cp311-cp311-manylinux2014_{arch}" in wheel_meta
    # AND the x86_64 wheel installs into a fresh virtualenv without a compiler and runs the C engine there
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    (x86,) = [n for n in natives if n.endswith("x86_64.whl")]
    pip = _run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(out / x86)], extra_env={"CC": "false"}
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    assert _backend(env_dir, tmp_path) == "c"
