"""Requirements, Dockerfile, pyproject and setup.cfg lines installing smprof/smppy."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from profstack.migrate.dependencies import included_files, kind_of, rewrite_dependencies

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
    assert pyproject.manual == []
    assert 'profiling = ["tensorboard"]\n' in pyproject.source  # the inline array loses only the Profiler
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


@pytest.mark.parametrize(
    "line",
    [
        # another option's value names the Profiler: not an index option the codemod may drop
        "RUN pip install -c https://smppy.s3.amazonaws.com/constraints.txt torch\n",
        # the only package goes but other commands share the RUN: a person decides what is left
        "RUN apt-get update && pip install smprof && rm -rf /var/lib/apt/lists/*\n",
        # `#` starts a shell comment: shlex.join quoted it into a package named '#'
        "RUN pip install smprof  # profiler\n",
        "RUN pip install torch smprof # profiler\n",
    ],
)
def test_pip_lines_that_cannot_be_edited_token_by_token_are_reported(line: str) -> None:
    # GIVEN a RUN pip install where the Profiler token is an option's value, or a comment follows
    # WHEN rewritten
    result = rewrite_dependencies("dockerfile", "FROM python:3.11\n" + line)
    # THEN the line is kept and reported (before: `--index-url torch`, or `pip install '#' profiler`)
    assert result.source == "FROM python:3.11\n" + line
    assert [f.line for f in result.manual] == [2]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("RUN pip install --no-cache-dir -U torch smprof==0.3\n", "RUN pip install --no-cache-dir -U torch\n"),
        ("RUN pip install -r requirements.txt smprof\n", "RUN pip install -r requirements.txt\n"),
        ("RUN pip install --no-cache-dir smprof\n", ""),
        # the Profiler's index options go with their value (before: reported, then `--index-url torch`)
        ("RUN pip install --index-url https://smppy.s3.amazonaws.com/simple torch\n", "RUN pip install torch\n"),
        ("RUN pip install -f https://smppy.s3.amazonaws.com/pytorch/cu121/ torch smprof\n", "RUN pip install torch\n"),
        ("RUN pip install --extra-index-url=https://smppy.s3.amazonaws.com/simple smppy\n", ""),
        (
            "RUN apt-get update && pip install torch smprof && rm -rf /x\n",
            "RUN apt-get update && pip install torch && rm -rf /x\n",
        ),
    ],
)
def test_pip_lines_keep_flags_and_their_values(line: str, expected: str) -> None:
    result = rewrite_dependencies("dockerfile", line)
    assert result.source == expected
    assert result.manual == []


def test_cli_follows_requirements_includes_inside_the_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    # GIVEN requirements.txt including base.txt (a name the tree walk does not pick), which installs
    # smprof, and an include outside the given folder
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("-r base.txt\n--constraint=../outside.txt\ntorch==2.3\n")
    (repo / "base.txt").write_text("numpy==2.0\nsmprof==0.3\n")
    (tmp_path / "outside.txt").write_text("smprof==0.3\n")
    # WHEN checked THEN it fails on base.txt (before: exit 0, a false all-clear)
    assert main(["migrate", "smprof", "--check", str(repo)]) == 1
    # WHEN written THEN base.txt loses smprof; the file outside the given folder is untouched
    assert main(["migrate", "smprof", "--write", str(repo)]) == 0
    assert (repo / "base.txt").read_text() == "numpy==2.0\n"
    assert (tmp_path / "outside.txt").read_text() == "smprof==0.3\n"
    assert "rewrote 1 file(s)" in capsys.readouterr().err
    assert main(["migrate", "smprof", "--check", str(repo)]) == 0


def test_included_files() -> None:
    text = "-r base.txt\n  -c pins.txt  # pins\n--requirement=dev.txt\n-r https://x/req.txt\ntorch\n"
    assert included_files(text) == ["base.txt", "pins.txt", "dev.txt"]


def test_poetry_dependency_tables_lose_the_profiler() -> None:
    # GIVEN Poetry tables (name = version / inline table), the way most Poetry projects pin
    text = (
        "[tool.poetry.dependencies]\n"
        'python = "^3.10"\n'
        'smprof = "^0.3"\n'
        'smppy = { version = "0.3.1", optional = true }  # images before 2024\n'
        "\n"
        "[tool.poetry.group.dev.dependencies]\n"
        'smprof = ">=0.3"\n'
        "\n"
        "[tool.other]\n"
        'smprof = "not a dependency table"\n'
    )
    # WHEN rewritten
    result = rewrite_dependencies("pyproject", text)
    # THEN the entries in dependency tables go, the rest stays (before: each was kept and reported as
    # "an inline array")
    assert result.source == (
        '[tool.poetry.dependencies]\npython = "^3.10"\n\n[tool.poetry.group.dev.dependencies]\n\n'
        '[tool.other]\nsmprof = "not a dependency table"\n'
    )
    assert [f.line for f in result.edits] == [3, 4, 7]
    assert [f.line for f in result.manual] == [10]


def test_pipfile_packages_lose_the_profiler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    # GIVEN a Pipfile (before: never scanned, so --check passed on it)
    assert kind_of(PurePath("Pipfile")) == "pipfile"
    (tmp_path / "Pipfile").write_text('[packages]\ntorch = "==2.3"\nsmprof = "*"\n\n[dev-packages]\nsmppy = "*"\n')
    assert main(["migrate", "smprof", "--check", str(tmp_path)]) == 1
    assert main(["migrate", "smprof", "--write", str(tmp_path)]) == 0
    assert (tmp_path / "Pipfile").read_text() == '[packages]\ntorch = "==2.3"\n\n[dev-packages]\n'
    capsys.readouterr()


@pytest.mark.parametrize("name", ["environment.yml", "environment.yaml", "conda-gpu.yml", "env.conda.yaml"])
def test_conda_environment_files_are_recognised(name: str) -> None:
    assert kind_of(PurePath(name)) == "conda"


def test_conda_environment_loses_the_profiler_pip_entries() -> None:
    # GIVEN a conda environment whose pip section installs smprof (before: never scanned)
    text = (
        "name: train\n"
        "dependencies:\n"
        "  - python=3.10\n"
        "  - pip\n"
        "  - pip:\n"
        "      - torch==2.3\n"
        "      - smprof==0.3  # profiler\n"
        "      - https://smppy.s3.amazonaws.com/pytorch/cu121/smppy-0.3-py3-none-any.whl\n"
        "      - --extra-index-url https://smppy.s3.amazonaws.com/simple\n"
    )
    # WHEN rewritten
    result = rewrite_dependencies("conda", text)
    # THEN the two entries that install it go, and the index option naming its bucket
    assert "smprof==0.3" not in result.source
    assert "smppy" not in result.source
    assert "      - torch==2.3\n" in result.source
    assert [f.line for f in result.edits] == [7, 8, 9]
    assert result.manual == []
    assert not rewrite_dependencies("conda", result.source).changed


def test_multi_line_dockerfile_run_loses_the_index_option_and_package_where_they_stand() -> None:
    # GIVEN a `RUN pip install \\` continued over lines, the Profiler's index and package among others
    text = (
        "FROM python:3.11\n"
        "RUN pip install --no-cache-dir \\\n"
        "        --extra-index-url https://smppy.s3.amazonaws.com/simple \\\n"
        '        "torch==2.3.1" \\\n'
        "        smppy>=0.3 transformers \\\n"
        "        datasets\n"
        "RUN pip install torch \\\n"
        "    smprof\n"
    )
    # WHEN rewritten
    result = rewrite_dependencies("dockerfile", text)
    # THEN each line keeps what is not the Profiler's, with its layout; a last line gone takes its `\\` along
    assert result.source == (
        "FROM python:3.11\n"
        "RUN pip install --no-cache-dir \\\n"
        '        "torch==2.3.1" \\\n'
        "        transformers \\\n"
        "        datasets\n"
        "RUN pip install torch\n"
    )
    assert [f.line for f in result.edits] == [2, 7]
    assert result.manual == []
    assert not rewrite_dependencies("dockerfile", result.source).changed


def test_requirements_lose_the_profilers_index_options_and_keep_the_rest_of_the_line() -> None:
    text = (
        "--extra-index-url https://smppy.s3.amazonaws.com/simple\n"
        "--index-url=https://pypi.org/simple\n"
        "--extra-index-url https://download.pytorch.org/whl/cu121 --trusted-host smppy.s3.amazonaws.com  # GPU\n"
        "-f https://smppy.s3.amazonaws.com/pytorch/cu121/\n"
        "torch==2.3.1\n"
    )
    result = rewrite_dependencies("requirements", text)
    assert result.source == (
        "--index-url=https://pypi.org/simple\n--extra-index-url https://download.pytorch.org/whl/cu121  # GPU\n"
        "torch==2.3.1\n"
    )
    assert [f.line for f in result.edits] == [1, 3, 4]
    assert result.manual == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('profiling = ["smppy>=0.3", "tensorboard"]\n', 'profiling = ["tensorboard"]\n'),
        ('dependencies = ["torch", "smprof>=0.3"]  # main\n', 'dependencies = ["torch"]  # main\n'),
        ("only = ['smppy']\n", "only = []\n"),
        ('mid = ["a", "smprof", "b"]\n', 'mid = ["a", "b"]\n'),
        ('    "x", "smppy==0.3",\n', '    "x",\n'),
    ],
)
def test_pyproject_inline_arrays_lose_only_the_profiler(line: str, expected: str) -> None:
    result = rewrite_dependencies("pyproject", "[project.optional-dependencies]\n" + line)
    assert result.source == "[project.optional-dependencies]\n" + expected
    assert result.manual == []


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("requirements", "smprofiler-tools==1.0\nsmprof-docs\n--extra-index-url https://download.pytorch.org/whl\n"),
        ("pyproject", '[project]\ndependencies = ["smprofiler-tools", "smprof-docs>=1"]\n'),
        ("dockerfile", "FROM python:3.11\nRUN pip install smprofiler-tools smprof-docs\n"),
    ],
)
def test_dependency_decoys_are_untouched_and_not_reported(kind: str, text: str) -> None:
    # GIVEN packages whose names start like the Profiler's WHEN rewritten THEN byte-identical, nothing reported
    result = rewrite_dependencies(kind, text)
    assert result.source == text
    assert result.edits == []
    assert result.manual == []
