"""The summary schema itself, and the example summary other components develop against."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import SUMMARY_SCHEMA_VERSION, summary_schema

EXAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = summary_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"]["const"] == SUMMARY_SCHEMA_VERSION


def test_example_summary_validates(summary_validator: Callable[[dict[str, Any]], None]) -> None:
    # GIVEN the committed example (regenerated from real traces) THEN it matches the current schema
    example = json.loads(EXAMPLE.read_text())
    summary_validator(example)
    assert example["schema_version"] == SUMMARY_SCHEMA_VERSION


def test_schema_rejects_unknown_keys(summary_validator: Callable[[dict[str, Any]], None]) -> None:
    # GIVEN a summary with a misspelt key THEN validation fails (stable key names are enforced)
    example = json.loads(EXAMPLE.read_text())
    example["ranks"][0]["idle_time"] = 1
    with pytest.raises(AssertionError):
        summary_validator(example)


def _with_system(**section: Any) -> dict[str, Any]:
    example = json.loads(EXAMPLE.read_text())
    example["system"] = {
        "status": "unavailable",
        "reason": "GetMetricData failed after retries (Throttling): Rate exceeded",
        "file": "system.json",
        "hosts": 0,
        "period_s": None,
        "start_s": None,
        "end_s": None,
        "complete": False,
        "downsampled": False,
        **section,
    }
    return example


def test_schema_1_3_takes_the_processors_system_section(summary_validator: Callable[[dict[str, Any]], None]) -> None:
    # GIVEN the system section the trace processor adds (issue 15) THEN each stated status validates
    for status in ("ok", "partial", "no_data", "unavailable"):
        summary_validator(_with_system(status=status))
    summary_validator(_with_system(status="ok", reason=None, hosts=2, period_s=60, start_s=1.0, end_s=61.0))
    # AND a status the schema does not name, a missing key or an extra key is refused
    with pytest.raises(AssertionError):
        summary_validator(_with_system(status="empty"))
    broken = _with_system()
    del broken["system"]["reason"]
    with pytest.raises(AssertionError):
        summary_validator(broken)
    with pytest.raises(AssertionError):
        summary_validator(_with_system(series=[]))
