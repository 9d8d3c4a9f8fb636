"""Requirements, Dockerfile, pyproject and setup.cfg lines installing smprof/smppy."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from profstack.migrate.dependencies import kind_of, rewrite_dependencies

DEPS = Path(__file__).resolve().parents[2] / "fixtures" / "smprof" / "deps"


def test_requirements_lose_the_profiler_and_its_wheel_and_keep_the_rest() -> None:
    result = rewrite_dependencies("requirements", (DEPS / "requirements.txt").read_text())
    assert result.source == "# training image extras\ntorch==2.3.1\nnumpy>=1.26\ntransformers==4.44.0\n"
    assert [f.line for f in result.edits] == [3, 4, 6]  # pin, smppy bucket wheel, smppy with its --hash line
    assert result.manual == []
    assert not rewrite_dependencies("requirements", result.source).changed


def test_dockerfile_removes_safe_installs_and_reports_the_rest() -> None:
    result = rewrite_dependencies("dockerfile", (DEPS / "Dockerfile").read_text())
    lines = result.source.splitlines()
    assert "smppy.s3.amazonaws.com" not in "\n".join(lines[2:])  # the RUN of the wheel alone is gone
    assert "RUN pip install --no-cache-dir transformers==4.44.0 datasets==2.20.0" in lines
    # the ARG holding the wheel URL and the chained RUN that installs it are not safe to edit: reported
    assert {f.line for f in result.manual} == {2, 6}
    assert any(line.startswith("ARG SMPROF_WHEEL=") for line in lines)


def test_pyproject_and_setup_cfg() -> None:
    pyproject = rewrite_dependencies("pyproject", (DEPS / "pyproject.toml").read_text())
    assert '    "smprof>=0.3",\n' not in pyproject.source
    assert "smppy" not in pyproject.source.split("[project.optional-dependencies]")[0]
    assert [f.line for f in pyproject.manual] == [11]  # an inline array: reported
    cfg = rewrite_dependencies("setup.cfg", (DEPS / "setup.cfg").read_text())
    assert "smprof" not in cfg.source
    assert "    torch>=2.3\n    numpy\n" in cfg.source


@pytest.mark.parametrize(
    ("line", "removed"),
    [
        ("smprof\n", True),
        ("SMPROF[extra] >= 0.3\n", True),
        ("smppy==0.3.1 ; python_version<'3.10'\n", True),
        ("https://smppy.s3.amazonaws.com/tensorflow/cu112/smppy-0.3.0-cp39-cp39-linux_x86_64.whl\n", True),
        ("smprofiler-tools==1.0\n", False),  # another package whose name starts the same
        ("torch==2.3\n", False),
    ],
)
def test_requirement_lines(line: str, removed: bool) -> None:
    result = rewrite_dependencies("requirements", line)
    assert (result.source == "") is removed


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("requirements.txt", "requirements"),
        ("requirements-dev.in", "requirements"),
        ("constraints.txt", "requirements"),
        ("Dockerfile", "dockerfile"),
        ("Dockerfile.gpu", "dockerfile"),
        ("train.dockerfile", "dockerfile"),
        ("pyproject.toml", "pyproject"),
        ("setup.cfg", "setup.cfg"),
        ("notes.txt", None),
    ],
)
def test_kind_of(name: str, kind: str | None) -> None:
    assert kind_of(PurePath(name)) == kind
