"""The typed summary (profstack/analysis/summary.py) and the published JSON Schema describe the same thing."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from profstack.analysis import summary as s
from profstack.analysis.summary import summary_schema

EXAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"

#: Fields whose typed form is knowingly wider than the schema, and why.
WIDER_THAN_SCHEMA = {
    # merge_partials lists a fan-out file whose partial never arrived with rank None (schema: integer)
    "inputs[].rank",
}


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the node without $ref / null alternatives, whether null is allowed)."""
    if "$ref" in node:
        return _resolve(schema["$defs"][node["$ref"].rsplit("/", 1)[-1]], schema)
    if "anyOf" in node:
        rest = [n for n in node["anyOf"] if n.get("type") != "null"]
        nullable = len(rest) < len(node["anyOf"])
        assert len(rest) == 1, node
        inner, inner_null = _resolve(rest[0], schema)
        return inner, nullable or inner_null
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [k for k in kind if k != "null"]
        return {**node, "type": rest[0] if len(rest) == 1 else rest}, True
    return node, False


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        optional = len(args) < len(get_args(hint))
        return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), optional  # noqa: UP007
    return hint, False


def _compare(td: Any, node: dict[str, Any], schema: dict[str, Any], path: str, problems: list[str]) -> None:
    node, _ = _resolve(node, schema)
    hints = get_type_hints(td)
    props = node.get("properties", {})
    if set(hints) != set(props):
        problems.append(
            f"{path or '<summary>'} ({td.__name__}): only typed {sorted(set(hints) - set(props))}, "
            f"only in schema {sorted(set(props) - set(hints))}"
        )
    if set(td.__required_keys__) != set(node.get("required", [])):
        problems.append(
            f"{path or '<summary>'} ({td.__name__}): required typed {sorted(td.__required_keys__)} "
            f"!= schema {sorted(node.get('required', []))}"
        )
    for key in sorted(set(hints) & set(props)):
        where = f"{path}.{key}" if path else key
        sub, nullable = _resolve(props[key], schema)
        inner, optional = _strip_none(hints[key])
        if optional != nullable and where not in WIDER_THAN_SCHEMA:
            problems.append(f"{where}: typed {'optional' if optional else 'not optional'}, schema nullable={nullable}")
        if is_typeddict(inner):
            _compare(inner, sub, schema, where, problems)
        elif get_origin(inner) is list:
            (item,) = get_args(inner)
            item, _ = _strip_none(item)
            if is_typeddict(item):
                _compare(item, sub["items"], schema, f"{where}[]", problems)


def test_typed_summary_and_json_schema_have_the_same_fields() -> None:
    # GIVEN the TypedDicts and the committed JSON Schema
    schema = summary_schema()
    problems: list[str] = []
    # WHEN every nested structure is compared (fields, required fields, nullability)
    _compare(s.Summary, schema, schema, "", problems)
    # THEN they agree: adding a field to one and not the other fails here
    assert problems == []


def test_the_comparison_catches_a_field_added_to_one_side_only() -> None:
    # GIVEN the schema with one extra rank field WHEN compared THEN the comparison reports it (it can fail)
    schema = summary_schema()
    schema["$defs"]["rank"]["properties"]["new_metric_us"] = {"type": "number"}
    problems: list[str] = []
    _compare(s.Summary, schema, schema, "", problems)
    assert any("new_metric_us" in p for p in problems)


def test_severities_match_the_schema_enum() -> None:
    enum = summary_schema()["$defs"]["finding"]["properties"]["severity"]["enum"]
    assert sorted(enum) == sorted(s.SEVERITIES)
    assert [s.severity_rank(x) for x in ("critical", "warning", "info", "bogus")] == [0, 1, 2, 9]


@pytest.mark.parametrize("name", ["temporal_breakdown", "launch_delay", "steps", "communication"])
def test_example_rank_sections_have_the_typed_keys(name: str) -> None:
    # GIVEN the committed example summary THEN its sections carry the typed keys (no more, no fewer)
    rank = json.loads(EXAMPLE.read_text())["ranks"][0]
    td = get_type_hints(s.RankSummary)[name]
    td, _ = _strip_none(td)
    assert set(rank[name]) <= set(get_type_hints(td))
    assert set(td.__required_keys__) <= set(rank[name])
