"""Fixtures for the analysis engine tests: the repository's sample traces and analyses cached per session."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisOptions, AnalysisResult, FileTraceSource, analyze
from tests.conftest import TRACES_DIR as TRACES

REFERENCE = TRACES / "reference_values" / "hta_0.5.0.json"


#: sample files that are not Kineto traces: HTA keeps a PyTorch execution trace beside the trace it describes
NOT_TRACES = frozenset({"hta/execution_trace/benchmark_simple_add_et.json.gz"})


def all_trace_files() -> list[Path]:
    return sorted(
        p
        for p in TRACES.rglob("*")
        if p.name.endswith((".json", ".json.gz"))
        and "reference_values" not in p.parts
        and p.relative_to(TRACES).as_posix() not in NOT_TRACES
    )


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    assert TRACES.is_dir(), f"sample traces missing at {TRACES}"
    return TRACES


@pytest.fixture(scope="session")
def hta_reference(traces_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE.read_text())
    return data


@pytest.fixture(scope="session")
def analysis_cache() -> Callable[..., AnalysisResult]:
    """analyze() each (files, options) combination at most once per test session."""
    cache: dict[tuple[Any, ...], AnalysisResult] = {}

    def run(files: tuple[Path, ...], **opts: Any) -> AnalysisResult:
        key = (files, tuple(sorted(opts.items())))
        if key not in cache:
            cache[key] = analyze([FileTraceSource(f) for f in files], AnalysisOptions(**opts))
        return cache[key]

    return run


@pytest.fixture(scope="session")
def summary_validator() -> Callable[[dict[str, Any]], None]:
    jsonschema = pytest.importorskip("jsonschema")
    from profstack.analysis import summary_schema

    validator = jsonschema.Draft202012Validator(summary_schema())

    def check(summary: dict[str, Any]) -> None:
        errors = sorted(validator.iter_errors(summary), key=lambda e: list(e.path))
        assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
        json.dumps(summary, allow_nan=False)  # strict JSON: no NaN/Infinity

    return check
