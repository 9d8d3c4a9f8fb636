"""#46 item 4: dependency files match the Profiler by PEP 503 normalised names and by index host, never by substring.

`smppy_lint` is another project (PEP 503 treats `_`, `.` and `-` alike, so it is `smppy-lint`), and an
`--extra-index-url` on another host whose path merely contains `smppy-` is someone else's index. Each test
generates look-alikes with hypothesis and checks every dependency format the codemod supports.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from profstack.migrate.dependencies import (
    is_profiler_index,
    is_profiler_source,
    mentions_profiler,
    rewrite_dependencies,
)
from profstack.migrate.scan import notebook_uses, remaining_uses

PROFILER = {"smprof", "smppy"}

# a Profiler name in any case, or a look-alike: another word joined by a PEP 503 separator run, a name that
# starts the same, a name with a separator inside
_SEPARATOR = st.sampled_from(["-", "_", ".", "__", "-_", "._"])
_WORD = st.sampled_from(["lint", "docs", "tools", "x", "2", "utils", "iler"])
_BASE = st.sampled_from(["smprof", "smppy"])


@st.composite
def names(draw: st.DrawFn) -> str:
    base = draw(_BASE)
    base = "".join(c.upper() if draw(st.booleans()) else c for c in base)
    form = draw(st.sampled_from(["same", "suffix", "prefix", "glued", "split"]))
    if form == "suffix":
        return base + draw(_SEPARATOR) + draw(_WORD)
    if form == "prefix":
        return draw(_WORD) + draw(_SEPARATOR) + base
    if form == "glued":
        return base + draw(_WORD)
    if form == "split":
        cut = draw(st.integers(min_value=1, max_value=len(base) - 1))
        return base[:cut] + draw(_SEPARATOR) + base[cut:]
    return base


def _is_profiler(name: str) -> bool:
    return canonicalize_name(name) in PROFILER


def _documents(name: str) -> dict[str, str]:
    """The same dependency in every format the codemod reads (the decoy `torch` beside it)."""
    return {
        "requirements": f"torch==2.3\n{name}>=0.3\n",
        "pyproject": f'[project]\ndependencies = [\n    "torch",\n    "{name}>=0.3",\n]\n',
        "poetry": f'[tool.poetry.dependencies]\ntorch = "^2.3"\n{name} = "^0.3"\n',
        "setup.cfg": f"[options]\ninstall_requires =\n    torch\n    {name}>=0.3\n",
        "pipfile": f'[packages]\ntorch = "*"\n{name} = "*"\n',
        "conda": f"dependencies:\n  - {name}=0.3\n  - pip:\n      - {name}>=0.3\n      - torch\n",
        "dockerfile": f"FROM python:3.11\nRUN pip install torch {name}==0.3\n",
    }


_KINDS = {"poetry": "pyproject"}


@settings(max_examples=120, deadline=None)
@given(name=names())
def test_only_the_profilers_normalised_names_are_removed_and_look_alikes_are_not_reported(name: str) -> None:
    # GIVEN a requirement on the Profiler or a look-alike (smppy_lint, SMPROF, sm.prof, smprofiler), in each format
    mine = _is_profiler(name)
    for kind, text in _documents(name).items():
        # WHEN rewritten
        result = rewrite_dependencies(_KINDS.get(kind, kind), text)
        # THEN the Profiler's name goes wherever it stands, and a look-alike stays byte for byte, unreported
        if mine:
            assert result.changed, (kind, name)
            assert name not in result.source, (kind, result.source)
            assert "torch" in result.source, kind
            assert not rewrite_dependencies(_KINDS.get(kind, kind), result.source).changed, kind
        else:
            assert result.source == text, (kind, name)
            assert result.edits == [], (kind, name)
            assert result.manual == [], (kind, name, result.manual)


@settings(max_examples=60, deadline=None)
@given(name=names())
def test_check_flags_a_look_alike_nowhere(name: str) -> None:
    # GIVEN a look-alike in setup.py's install_requires and in a notebook's pip line
    setup_py = f'from setuptools import setup\nsetup(install_requires=["{name}>=0.3"])\n'
    notebook = (
        '{"cells": [{"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [], '
        f'"source": ["%pip install {name}\\n", "import torch"]}}], '
        '"metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    # WHEN checked THEN only the Profiler's own names count (before: `smppy_lint` failed --check forever)
    assert bool(remaining_uses(setup_py)) is _is_profiler(name), name
    assert bool(notebook_uses(notebook)) is _is_profiler(name), name


# index URLs: (url, whether it is the Profiler's bucket)
_INDEXES = [
    ("https://smppy.s3.amazonaws.com/simple", True),
    ("https://smppy.s3.us-west-2.amazonaws.com/simple/", True),
    ("https://smppy.s3-us-west-2.amazonaws.com/pytorch/cu121/", True),
    ("https://s3.amazonaws.com/smppy/simple", True),
    ("https://s3.eu-west-1.amazonaws.com/smppy/", True),
    ("https://SMPPY.S3.AMAZONAWS.COM/simple", True),
    ("https://user:pw@smppy.s3.amazonaws.com:443/simple", True),
    ("https://pypi.mycorp.example/smppy-simple/", False),
    ("https://mirror.example.com/smppy-cache/simple", False),
    ("https://smppy-mirror.example.com/simple", False),
    ("https://example.com/smppy.s3.amazonaws.com/simple", False),
    ("https://s3.amazonaws.com/smppy-backup/simple", False),
    ("https://smppy.s3.amazonaws.com.evil.example/simple", False),
    ("https://notsmppy.s3.amazonaws.com/simple", False),
    ("https://download.pytorch.org/whl/cu121", False),
]


@pytest.mark.parametrize(("url", "mine"), _INDEXES)
def test_index_host_decides(url: str, mine: bool) -> None:
    assert is_profiler_index(url) is mine


@settings(max_examples=80, deadline=None)
@given(
    url=st.sampled_from(_INDEXES),
    option=st.sampled_from(["--extra-index-url", "--index-url", "-i", "--find-links", "-f"]),
    equals=st.booleans(),
)
def test_an_index_option_goes_only_when_its_host_is_the_profilers(
    url: tuple[str, bool], option: str, equals: bool
) -> None:
    # GIVEN an index option in a requirements file, a conda pip list and a Dockerfile RUN
    address, mine = url
    spelled = f"{option}={address}" if equals and option.startswith("--") else f"{option} {address}"
    documents = {
        "requirements": f"{spelled}\ntorch==2.3\n",
        "conda": f"dependencies:\n  - pip:\n      - {spelled}\n      - torch\n",
        "dockerfile": f"FROM python:3.11\nRUN pip install {spelled} torch\n",
    }
    for kind, text in documents.items():
        # WHEN rewritten
        result = rewrite_dependencies(kind, text)
        # THEN it goes with its value when the host is the Profiler's bucket; another host's stays unreported
        # (before: `https://pypi.mycorp.example/smppy-simple/` was deleted by a path substring)
        if mine:
            assert address not in result.source, (kind, result.source)
            assert "torch" in result.source
        else:
            assert result.source == text, (kind, result.source)
            assert result.manual == [], (kind, result.manual)


@pytest.mark.parametrize(
    ("token", "mine"),
    [
        ("smprof-0.3.334-cp311-cp311-linux_x86_64.whl", True),
        ("https://wheels.mycorp.example/profiler/SMPROF-0.3.334-py3-none-any.whl", True),
        ("./vendor/smppy-0.3.0.tar.gz", True),
        ("git+https://git.mycorp.example/tools/profiler.git#egg=smprof", True),
        ("smprof @ https://wheels.mycorp.example/smprof-0.3-py3-none-any.whl", True),
        ("smppy_lint-1.0-py3-none-any.whl", False),
        ("https://files.example/smppy-lint/smppy_lint-1.0-py3-none-any.whl", False),
        ("git+https://git.example/smppy.git#egg=smppy_lint", False),
        ("smprofiler_tools-1.0.tar.gz", False),
    ],
)
def test_sources_by_project_name(token: str, mine: bool) -> None:
    assert is_profiler_source(token) is mine


@pytest.mark.parametrize(
    ("text", "mine"),
    [
        ("RUN pip install ${SMPROF_WHEEL}", True),
        ("ARG WHEEL=https://smppy.s3.amazonaws.com/pytorch/cu121/x.whl", True),
        ("RUN pip install smppy_lint", False),
        ("RUN pip install --extra-index-url https://pypi.mycorp.example/smppy-simple/ torch", False),
        ("ENV SMPPYLINT_HOME=/opt/lint", False),
        ("COPY smppy_lint-1.0-py3-none-any.whl /tmp/", False),
    ],
)
def test_free_text_mentions(text: str, mine: bool) -> None:
    assert mentions_profiler(text) is mine


def test_a_requirement_url_with_the_profilers_egg_is_removed_and_an_editable_source_too() -> None:
    text = (
        "torch==2.3\n"
        "-e git+https://git.mycorp.example/profiler.git#egg=smprof\n"
        "https://wheels.mycorp.example/smppy-0.3-py3-none-any.whl  # vendored\n"
        "smppy_lint==1.0\n"
    )
    result = rewrite_dependencies("requirements", text)
    assert result.source == "torch==2.3\nsmppy_lint==1.0\n"
    assert [f.line for f in result.edits] == [2, 3]
    assert result.manual == []
    assert re.search("smppy_lint", result.source)
