"""Local Lambda bundling without Docker: fetched x86_64 wheels plus our packages, and a stable hash."""

from __future__ import annotations

import importlib.util
import marshal
from pathlib import Path

import pytest

from stacks.components import python_function as pf
from stacks.components.bundle_plan import plan_bundle


@pytest.fixture(scope="module")
def wheels() -> Path:
    # GIVEN the Lambda wheels that `make install` fetches (fetched here if this is a fresh clone)
    return pf.fetch_wheels()


def test_bundle_holds_dependencies_for_the_lambda_platform_and_our_code(wheels: Path, tmp_path: Path) -> None:
    # WHEN the bundler runs for the trace processor
    plan = plan_bundle("lambdas.trace_processor.handler")
    assert pf.LocalPythonBundler(plan).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    # THEN the runtime pins, our two packages and x86_64 CPython 3.11 extension modules are there
    names = {p.name for p in tmp_path.iterdir()}
    assert {"aws_lambda_powertools", "isal", "msgspec", "pydantic", "lambdas", "profstack"} <= names
    extensions = [p.name for p in tmp_path.rglob("*.so")]
    assert extensions
    # CPython 3.11 x86_64 modules, or stable-ABI ones (protobuf's upb: *.abi3.so) built for x86_64
    assert all(
        "cpython-311-x86_64-linux-gnu" in name or name.startswith("lib") or name.endswith(".abi3.so")
        for name in extensions
    ), extensions
    for so in tmp_path.rglob("*.abi3.so"):
        assert int.from_bytes(so.read_bytes()[18:20], "little") == 62, so  # ELF e_machine: x86_64
    # AND every module comes with the runtime's bytecode (Lambda cannot write __pycache__: without it each cold
    # start compiles everything again), checked against its source's hash and naming the path Lambda runs it from
    sources = [p for p in tmp_path.rglob("*.py") if "__pycache__" not in p.parts]
    ours = [p for p in sources if p.relative_to(tmp_path).parts[0] in ("lambdas", "profstack")]
    assert ours
    missing = [p for p in sources if not _pyc(p).exists()]
    assert not [p for p in missing if p in ours], missing
    assert len(missing) <= len(sources) // 100, missing  # only files that do not compile (none of ours)
    for src in [*ours, tmp_path / "pydantic" / "main.py", tmp_path / "msgspec" / "__init__.py"]:
        data = _pyc(src).read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[4:8], "little") == 0b11  # hash-based and checked (PEP 552)
        assert data[8:16] == importlib.util.source_hash(src.read_bytes())
        code = marshal.loads(data[16:])
        assert code.co_filename == f"/var/task/{src.relative_to(tmp_path).as_posix()}"


def _pyc(src: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(src)))


def test_bytecode_is_left_out_when_synth_runs_on_another_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a synth on an interpreter other than the runtime's (its bytecode would be another version's)
    monkeypatch.setattr(pf, "RUNTIME_PYTHON_VERSION", "3.99")
    (tmp_path / "m.py").write_text("X = 1\n")
    # WHEN compiling THEN nothing is written and the bundle ships its sources alone
    assert pf.compile_bytecode(tmp_path) is False
    assert not list(tmp_path.rglob("*.pyc"))


def test_bundler_refuses_to_go_online_without_fetched_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no wheelhouse WHEN bundling THEN a clear error says how to fetch, instead of a network call
    monkeypatch.setattr(pf, "wheelhouse", lambda platform=pf.PIP_PLATFORM: tmp_path / "nowhere")
    plan = plan_bundle("lambdas.idle_reaper.handler")
    with pytest.raises(pf.MissingWheelsError, match="make install"):
        pf.LocalPythonBundler(plan).try_bundle(str(tmp_path / "out"), image=None)  # type: ignore[arg-type]


def test_asset_hash_changes_with_code_and_only_with_code(tmp_path: Path) -> None:
    # GIVEN a copy of the hashed inputs: a handler importing a library module, and the pins
    (tmp_path / "lambdas" / "fn").mkdir(parents=True)
    (tmp_path / "profstack").mkdir()
    for init in ("lambdas/__init__.py", "lambdas/fn/__init__.py", "profstack/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "lambdas" / "fn" / "handler.py").write_text("import msgspec\nfrom profstack import mod\n")
    (tmp_path / "profstack" / "mod.py").write_text("x = 1\n")
    (tmp_path / "profstack" / "unused.py").write_text("y = 1\n")
    (tmp_path / "requirements").mkdir()
    for name in ("runtime.txt", "constraints.txt"):
        (tmp_path / "requirements" / name).write_text("msgspec==0.23.0\n")

    def digest() -> str:
        return pf.code_asset_hash(plan_bundle("lambdas.fn.handler", root=tmp_path), root=tmp_path)

    first = digest()
    # WHEN nothing changes THEN the hash is the same; WHEN a module it does not import changes THEN too
    assert digest() == first
    (tmp_path / "profstack" / "unused.py").write_text("y = 2\n")
    assert digest() == first
    # WHEN imported code or the pins change THEN it differs
    (tmp_path / "profstack" / "mod.py").write_text("x = 2\n")
    second = digest()
    assert second != first
    (tmp_path / "requirements" / "constraints.txt").write_text("msgspec==0.22.0\n")
    assert digest() != second
