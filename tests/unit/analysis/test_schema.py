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
