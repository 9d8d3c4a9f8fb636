"""Summaries compared across engines (C against Python): equal but for the field that names the engine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def engine_neutral(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary without `generator.engine` / `engine_reason` (schema 1.4): the only fields that differ by design."""
    out = dict(summary)
    generator = out.get("generator")
    if isinstance(generator, Mapping):
        out["generator"] = {k: v for k, v in generator.items() if k not in {"engine", "engine_reason"}}
    return out
