"""Local Lambda bundling without Docker: fetched arm64 wheels plus our packages, and a stable hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.components import python_function as pf


@pytest.fixture(scope="module")
def wheels() -> Path:
    # GIVEN the Lambda wheels that `make install` fetches (fetched here if this is a fresh clone)
    return pf.fetch_wheels()


def test_bundle_holds_dependencies_for_the_lambda_platform_and_our_code(wheels: Path, tmp_path: Path) -> None:
    # WHEN the bundler runs
    assert pf.LocalPythonBundler().try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    # THEN the runtime pins, our two packages and aarch64 CPython 3.14 extension modules are there
    names = {p.name for p in tmp_path.iterdir()}
    assert {"aws_lambda_powertools", "msgspec", "pydantic", "lambdas", "profstack"} <= names
    extensions = [p.name for p in tmp_path.rglob("*.so")]
    assert extensions
    assert all("cpython-314-aarch64-linux-gnu" in name for name in extensions), extensions
    assert not list(tmp_path.rglob("__pycache__"))


def test_bundler_refuses_to_go_online_without_fetched_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no wheelhouse WHEN bundling THEN a clear error says how to fetch, instead of a network call
    monkeypatch.setattr(pf, "wheelhouse", lambda: tmp_path / "nowhere")
    with pytest.raises(pf.MissingWheelsError, match="make install"):
        pf.LocalPythonBundler().try_bundle(str(tmp_path / "out"), image=None)  # type: ignore[arg-type]


def test_asset_hash_changes_with_code_and_only_with_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a copy of the hashed inputs
    for name in ("lambdas", "profstack"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mod.py").write_text("x = 1\n")
    (tmp_path / "requirements").mkdir()
    for name in ("runtime.txt", "constraints.txt"):
        (tmp_path / "requirements" / name).write_text("msgspec==0.23.0\n")
    monkeypatch.setattr(pf, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(pf, "REQUIREMENTS", tmp_path / "requirements" / "runtime.txt")
    monkeypatch.setattr(pf, "CONSTRAINTS", tmp_path / "requirements" / "constraints.txt")
    first = pf.code_asset_hash()
    # WHEN nothing changes THEN the hash is the same; WHEN code changes THEN it differs
    assert pf.code_asset_hash() == first
    (tmp_path / "lambdas" / "mod.py").write_text("x = 2\n")
    assert pf.code_asset_hash() != first
