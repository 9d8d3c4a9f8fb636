"""The C reader (``_gpuaccel.decode_consume``) leaves exactly the state msgspec's decode and the loop leave.

``parse._parse`` hands each fast batch (one JSON array of events, as a memoryview) to ``_Parser.consume_json``,
which runs ``decode_consume``: the batch's JSON read straight into the per-event loop, with no ``parse.Event``
per event. Where it declines (``NotImplemented``, nothing changed), ``_parse`` decodes the batch with
``parse._LIST_DECODER`` (msgspec) and calls ``consume``; where msgspec rejects the batch too, the stream re-splits
it exactly. So the reader's contract has two halves, and each test checks both:

1. it never accepts a batch that msgspec rejects (the reader never decides what is malformed), and
2. where it accepts, the parser's state (every column, aggregate, counter, dict order, exception) is bit for bit
   the state after ``consume(_LIST_DECODER.decode(batch))`` with the Python loop.

The JSON is generated as text, not through ``json.dumps``: whitespace, key order, duplicate keys, unknown keys
with nested values, escapes, raw UTF-8 and invalid bytes, control characters, numbers in every JSON form (and
some that are not JSON), wrong types for each field. Tests that need the C module skip when it is not built.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze, native, parse, reader
from profstack.analysis.memory import MEMORY_EVENT
from profstack.analysis.sources import discover_sources
from tests.unit.analysis.neutral import engine_neutral

from .bitexact import Flat, first_difference, flatten
from .test_consume_native import C_MODULE, CATS, COMMON_CATS, JSON_NAMES, PHS, Knobs, knobs_strategy, make_parser

HAS_READER = C_MODULE is not None and hasattr(C_MODULE, "decode_consume")
needs_reader = pytest.mark.skipif(
    not HAS_READER, reason="profstack.analysis._gpuaccel (with decode_consume) is not built"
)
REPO = Path(__file__).resolve().parents[3]
SAMPLES = sorted(
    p
    for p in (REPO / "samples" / "traces").rglob("*.json*")
    if "reference_values" not in p.parts and p.name != "benchmark_simple_add_et.json.gz"  # not a trace
)


# ---------------------------------------------------------------------------------------------------------------
# Running batches of JSON text through a parser, as _parse does
# ---------------------------------------------------------------------------------------------------------------


class Run:
    """What a sequence of batches left: the flattened parser after each, and which batches the reader took."""

    def __init__(self) -> None:
        self.trace: Flat = []
        self.accepted: list[int] = []
        self.rejected_by_msgspec: list[int] = []
        self.dirty_declines: list[str] = []


def run_json(batches: Sequence[bytes], knobs: Knobs, *, reader: bool) -> Run:
    """``reader``: C reader first (``consume_json``), then msgspec where it declines; else msgspec and the
    Python loop only (``native.ACCEL = None``)."""
    out = Run()
    with pytest.MonkeyPatch.context() as mp:
        knobs.patch(mp)
        mp.setattr(native, "ACCEL", C_MODULE if reader else None)
        parser = make_parser(knobs)
        for k, raw in enumerate(batches):
            try:
                parser.before_batch()  # as _parse does
                if reader:
                    before = flatten(parser)
                    buf = bytearray(raw)  # _parse's batches are views of a bytearray
                    with memoryview(buf) as view:
                        took = parser.consume_json(view)
                    if took:
                        out.accepted.append(k)
                        flatten(parser, f"batch{k}", out.trace)
                        continue
                    diff = first_difference(before, flatten(parser), "before vs after a decline")
                    if diff is not None:
                        out.dirty_declines.append(diff)
                try:
                    events = parse._LIST_DECODER.decode(raw)
                except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                    # _parse then reads the batch event by event (the stream's reject(), then decode_one), which
                    # reads numbers written as strings by the loose rule; a batch that is not even a JSON array of
                    # values is left out here
                    raws = _events_of(raw)
                    if raws is None:
                        out.rejected_by_msgspec.append(k)
                        flatten("rejected", f"batch{k}", out.trace)
                        continue
                    if parser.op_log is not None:
                        parser.op_log.drop()
                    events = [ev for ev in (parser.decode_one(r) for r in raws) if ev is not None]
                parser.consume(events)
            except Exception as exc:  # the same exception, after the same partial state, from both
                flatten(f"{type(exc).__name__}: {exc}", f"batch{k}.exception", out.trace)
                flatten(parser, f"batch{k}.after_exception", out.trace)
                break
            flatten(parser, f"batch{k}", out.trace)
    return out


def _events_of(raw: bytes) -> list[bytes] | None:
    """A batch's events as the stream hands them over after a reject (one value each), or None where the batch is
    not a JSON array of values."""
    try:
        values = msgspec.json.decode(raw, type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return [bytes(v) for v in values]


def check(batches: Sequence[bytes], knobs: Knobs | None = None) -> Run:
    knobs = knobs or Knobs()
    ref = run_json(batches, knobs, reader=False)
    got = run_json(batches, knobs, reader=True)
    assert not got.dirty_declines, got.dirty_declines[0]
    taken_but_rejected = sorted(set(got.accepted) & set(ref.rejected_by_msgspec))
    assert not taken_but_rejected, f"the reader took batches {taken_but_rejected}, which msgspec rejects"
    diff = first_difference(ref.trace, got.trace, "msgspec + Python vs the C reader")
    assert diff is None, diff
    return got


# ---------------------------------------------------------------------------------------------------------------
# JSON text, generated with the freedom the format allows (and some it does not)
# ---------------------------------------------------------------------------------------------------------------

WS = st.sampled_from(["", "", " ", "\n  ", "\t", "\r\n", "  \n    "])
VALID_NUMBER_TEXT = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: f"{f:.3f}"),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.builds(
        lambda sign, i, frac, e: f"{sign}{i}{frac}{e}",
        st.sampled_from(["", "", "-"]),
        st.sampled_from(["0", "1", "7", "1712195495501688", "4294967295", "9007199254740993", "12345678901234567890"]),
        st.sampled_from(["", ".0", ".5", ".612", ".000001", ".1234567890123456789", ".99999999999999999999"]),
        st.sampled_from(["", "", "e0", "E+2", "e-3", "e308", "e-330", "e400", "E-30", "e22", "e23"]),
    ),
    st.sampled_from(["-0", "-0.0", "0e5", "-0e-5", "1E1", "0.0000"]),
)
NUMBER_TEXT = VALID_NUMBER_TEXT | st.sampled_from(
    ["01", "1.", ".5", "1e", "+1", "-", "NaN", "Infinity", "0x10", "1.5e+"]
)
BAD_STRINGS = [
    '"\\ud800"',  # a lone surrogate escape (msgspec: truncated)
    '"\\uDBFF\\uDFFF"',  # a valid pair (the reader declines any surrogate escape)
    '"\\x41"',  # not a JSON escape
    '"tab\there"',  # a raw control character
    '"\\u00e9t\\u00e9"',
    '"\\"quoted\\" \\\\ \\/ \\b\\f\\n\\r\\t"',
    '"\\u004"',
]


def _raw_string(text: str) -> st.SearchStrategy[str]:
    """``text`` as JSON string text: plain (UTF-8 on encode), or with every character escaped."""
    return st.sampled_from(
        [
            json.dumps(text, ensure_ascii=False),
            json.dumps(text),  # \\uXXXX for non-ASCII
        ]
    )


@st.composite
def string_text(draw: st.DrawFn, pool: Sequence[str] | None = None, hostile: bool = True) -> str:
    how = draw(st.integers(0, 9))
    if how == 0 and hostile:
        return draw(st.sampled_from(BAD_STRINGS))
    if not hostile and pool:  # names as a Kineto writer writes them: UTF-8, escapes only where JSON needs them
        text = draw(st.sampled_from(list(pool)))
        return json.dumps(text, ensure_ascii=False) if how else json.dumps(text)
    text = draw(st.sampled_from(list(pool))) if pool and how < 7 else draw(st.text(max_size=12))
    return draw(_raw_string(text))


@st.composite
def json_value(draw: st.DrawFn, depth: int = 0) -> str:
    """Any JSON value (and some text that is not one), as text."""
    kinds = ["num", "str", "lit"] + (["obj", "arr"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "num":
        return draw(NUMBER_TEXT)
    if kind == "str":
        return draw(string_text())
    if kind == "lit":
        return draw(st.sampled_from(["true", "false", "null", "tru", "nul"]))
    n = draw(st.integers(0, 3))
    ws = draw(WS)
    if kind == "arr":
        return "[" + ws + ("," + ws).join(draw(json_value(depth + 1)) for _ in range(n)) + "]"
    items = [f"{draw(string_text())}{ws}:{ws}{draw(json_value(depth + 1))}" for _ in range(n)]
    return "{" + ws + ("," + ws).join(items) + "}"


def _int_text(values: Sequence[int]) -> st.SearchStrategy[str]:
    return st.sampled_from([str(v) for v in values])


#: numbers written as strings (ROCm's roctracer: "bytes": "32768"), and strings parse.loose_int does not read: the C
#: reader reads the first by the same rule, and declines the batch for the rest
LOOSE_TEXT = st.sampled_from(
    ['"128"', '" 7 "', '"+5"', '"-3"', '"007"', '"0x10"', '"1e3"', '"1.0"', '"12345678901234567890"',
     '"9223372036854775807"', '"9223372036854775808"', '"-9223372036854775808"', '"\\u0037"', '""', '"  "',
     '"\u0663"', '"1 2"', '"-"', '"2147483648"', '"-2147483649"']
)  # fmt: skip
ARGS_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "correlation": _int_text([0, 1, 7, 123456789, 2**31, 2**63 - 1, -(2**63), 2**63, -1]) | LOOSE_TEXT,
    "stream": _int_text([0, 7, 8, -1, 4294967295, 2**31, 2**63 - 1, 2**63]) | st.just('"0x7f"') | LOOSE_TEXT,
    "bytes": _int_text([0, 64, 2**40, 2**63 - 1, 2**63, -5])
    | st.sampled_from(["1.5", "0.0", "-0.0", "-1.5", "4.6e18"])
    | LOOSE_TEXT,
    "est. achieved occupancy %": st.sampled_from(["0", "50", "100", "100.5", "-1", "33.25", "1e400"]),
    "device": _int_text([0, 1, 3, -5, 2**63, 2**70]) | LOOSE_TEXT,
    "Bytes": _int_text([512, -512, 2**63]) | LOOSE_TEXT,
    "Total Allocated": _int_text([1024]) | LOOSE_TEXT,
    "Total Reserved": _int_text([4096]),
    "Device Type": _int_text([0, 1, 2**31]) | LOOSE_TEXT,
    "Device Id": _int_text([0, -1, -(2**31) - 1]) | LOOSE_TEXT,
    "External id": _int_text([1, 3, 3, 2**63 - 1, 2**63, -(2**63), 2**70])
    | st.sampled_from(["3.0", "2.5", "3e0", "1e18", "1e999", "true", "[3]", '{"a": 1}', '"x"', "-0"])
    | LOOSE_TEXT,
    "external id": _int_text([1, 3]) | LOOSE_TEXT,
    "Input type": st.sampled_from(
        [
            '["c10::BFloat16", "c10::BFloat16", "", "Scalar"]',
            '["float"]',
            '[ "float" ,"c10::Half" ]',
            '["long int"]',
            '["signed char", "int"]',
            "[]",
            '["float", 1]',
            '"float"',
            '[["float"]]',
            '["c10::BFloat\\u0031\\u0036"]',
            '["\\ud800"]',
            '["caf\u00e9"]',
        ]
    ),
    "grid": st.just("[1, 2, 3]"),
}
NAMES_TEXT = [*JSON_NAMES, "ProfilerStep#3", "ProfilerStep#4", MEMORY_EVENT, "cudaLaunchKernel", "cudaMemcpyAsync"]


@st.composite
def field_value(draw: st.DrawFn, good: st.SearchStrategy[str], hostile: bool) -> str:
    """Mostly a well-typed value; in a hostile batch sometimes null, or a value of any type (msgspec rejects most
    of those)."""
    how = draw(st.integers(0, 19)) if hostile else 9
    if how == 0:
        return "null"
    if how == 1:
        return draw(json_value())
    return draw(good)


@st.composite
def args_text(draw: st.DrawFn, hostile: bool) -> str:
    keys = draw(st.lists(st.sampled_from(sorted(ARGS_FIELDS)), max_size=6))
    if not hostile:  # values every decoder takes (the pools' edges are for hostile batches)
        pools = {k: ARGS_FIELDS[k] for k in ("correlation", "External id", "grid", "Total Allocated", "Input type")}
        pools.update(
            correlation=st.sampled_from(["0", "1", "7", '"5190"']),
            stream=st.sampled_from(["0", "7", "-1", "4294967295", '"0x0"']),
            bytes=st.sampled_from(["0", "64", "1.5", "-0.0", '"32768"', '" 128 "']),
            device=st.sampled_from(["0", "1", "-5"]),
            Bytes=st.sampled_from(["512", "-512"]),
            **{
                "External id": st.sampled_from(["1", "3", "3", '"3"', "3.0", "null"]),
                "Input type": st.sampled_from(['["c10::BFloat16", "Scalar"]', '["float"]', '["long int"]', "[]"]),
            },
        )
        keys = [k for k in keys if k in pools]
    else:
        pools = ARGS_FIELDS
    items = [f'"{k}": {draw(field_value(pools[k], hostile))}' for k in keys]
    for _ in range(draw(st.integers(0, 2))):
        value = draw(json_value()) if hostile else draw(st.sampled_from(['"x"', "[1, 2]", '{"a": null}', "1e999"]))
        key = draw(string_text()) if hostile else draw(st.sampled_from(['"Sequence number"', '"Input Dims"', '"é"']))
        items.insert(draw(st.integers(0, len(items))), f"{key}: {value}")
    ws = draw(WS)
    return "{" + ws + ("," + ws).join(items) + ws + "}"


TS_TEXT = st.sampled_from(
    ["0", "1", "5", "100", "1.5", "-3.5", "1712195495501688.612", "1712195495519695.812", "5104278151461.690", "2e300"]
)
DUR_TEXT = st.sampled_from(["0", "1", "2", "0.5", "63.813", "-1", "-0.0", "1e300", "3"])


@st.composite
def event_text(draw: st.DrawFn, hostile: bool) -> str:
    if hostile and draw(st.integers(0, 39)) == 0:
        return draw(json_value())  # an element that is not an object
    fields: list[tuple[str, str]] = []
    num = NUMBER_TEXT if hostile else VALID_NUMBER_TEXT if draw(st.integers(0, 3)) == 0 else st.nothing()
    if draw(st.integers(0, 9)):
        fields.append(("ph", draw(field_value(st.sampled_from([f'"{p}"' for p in PHS if p]), hostile))))
    fields.append(("cat", draw(field_value(st.sampled_from([f'"{c}"' for c in [*CATS, *COMMON_CATS]]), hostile))))
    fields.append(("name", draw(field_value(string_text(NAMES_TEXT, hostile), hostile))))
    if draw(st.integers(0, 9)):
        fields.append(("ts", draw(field_value(TS_TEXT | num, hostile))))
    if draw(st.integers(0, 9)):
        fields.append(("dur", draw(field_value(DUR_TEXT | num, hostile))))
    fields.append(("pid", draw(st.sampled_from(["1", '"host"', "0"]))))
    tids = ["1", "7", '"stream 7"', "1.5", "null"] + (['"\\u0041"', "true", "2e400"] if hostile else [])
    fields.append(("tid", draw(st.sampled_from(tids))))
    if draw(st.integers(0, 3)):
        odd = hostile and draw(st.integers(0, 19)) == 0
        fields.append(("args", draw(st.sampled_from(["null", "[]"])) if odd else draw(args_text(hostile))))
    if draw(st.integers(0, 9)) == 0:  # a duplicate key: msgspec keeps the last
        fields.append(draw(st.sampled_from(fields)))
    keys: list[str] = [f'"{k}"' for k, _ in fields]
    if hostile and draw(st.integers(0, 29)) == 0:  # an escaped key that still names a field
        keys[-1] = '"n\\u0061me"'
    items = [f"{k}: {v}" for k, (_, v) in zip(keys, fields, strict=True)]
    for _ in range(draw(st.integers(0, 2))):
        extra = draw(json_value()) if hostile else draw(st.sampled_from(["1", '"e"', "[]", '{"b": [true, false]}']))
        items.insert(
            draw(st.integers(0, len(items))), f'"{draw(st.sampled_from(["id", "s", "bp", "cname"]))}": {extra}'
        )
    order = draw(st.permutations(items))
    ws = draw(WS)
    return "{" + ws + ("," + ws).join(order) + ws + "}"


@st.composite
def batch_text(draw: st.DrawFn) -> bytes:
    hostile = draw(st.integers(0, 3)) == 0  # a quarter of the batches: invalid text and wrong types
    events = draw(st.lists(event_text(hostile), max_size=12))
    sep = draw(st.sampled_from([",", ", ", "\n  },\n  {"[3:], ",\n"]))
    body = ("[" + draw(WS) + sep.join(events) + draw(WS) + "]").encode()
    mutate = draw(st.integers(0, 29)) if hostile else -1
    if mutate == 0 and len(body) > 2:  # a raw invalid byte somewhere
        at = draw(st.integers(1, len(body) - 2))
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x7f"])) + body[at:]
    elif mutate == 1:
        body += draw(st.sampled_from([b" ", b"\n", b"x", b",", b"]"]))
    elif mutate == 2 and body.endswith(b"]"):
        body = body[:-1]
    return body


# ---------------------------------------------------------------------------------------------------------------
# The reader against msgspec + Python
# ---------------------------------------------------------------------------------------------------------------

SETTINGS = settings(
    max_examples=int(os.environ.get("PROFSTACK_FUZZ_EXAMPLES", "500")),  # more for a local hunt
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@needs_reader
@SETTINGS
@given(batches=st.lists(batch_text(), min_size=1, max_size=3), knobs=knobs_strategy)
def test_the_reader_matches_msgspec_and_python_on_generated_json(batches: list[bytes], knobs: Knobs) -> None:
    # GIVEN batches of JSON text with every freedom of the format, wrong types, invalid text and shrunk bounds
    # WHEN read by the C reader (msgspec where it declines) and by msgspec with the Python loop
    got = check(batches, knobs)
    # THEN the same state (check)
    if got.accepted:
        event("the reader took a batch")
    if got.rejected_by_msgspec:
        event("msgspec rejected a batch")
    for what, path in (("an operator kept", ".op_types.ops["), ("a kernel counted", ".op_types.by_key[")):
        if any(path in p for p, _ in got.trace):
            event(f"op types: {what}")


# op types (op_types.Collector): operators with input types and the kernels they launched, in either order
OP_KERNEL_NAMES = ["triton_poi_fused_add_mul_0", "volta_sgemm_128x64_nn", "ampere_bf16_s16816gemm_bf16_128x64"]
#: External ids and input types the reader reads itself (every JSON type), and those it declines (escapes, numbers
#: it does not convert, a loose event's input types), where msgspec.Raw and Python read them
EXT_READ = st.sampled_from(["1", "2", "3"] * 4 + ['"2"', '" 3 "', "3.0", "3e0", "null", "true", "[1]", "-0", '"x"'])
EXT_ODD = st.sampled_from(["1e999", '"\\u0031"', "99999999999999999999"])
TYPES_READ = st.sampled_from(
    ['["float"]', '["c10::Half", "float"]', '[ "c10::BFloat16" ,"Scalar" ]', "[]", "null", '["float", 1]', '"float"',
     '["c10::BFloat\\u0031\\u0036"]', '["caf\u00e9"]', '[["float"]]']
)  # fmt: skip
TYPES_ODD = st.sampled_from(['["\\ud800"]', '["float",]'])


@st.composite
def operators_and_kernels_text(draw: st.DrawFn) -> bytes:
    odd = draw(st.integers(0, 3)) == 0  # a quarter of the batches: values the reader declines
    ext_text = EXT_READ | EXT_ODD if odd else EXT_READ
    types_text = TYPES_READ | TYPES_ODD if odd else TYPES_READ
    rows = []
    for i in range(draw(st.integers(1, 20))):
        ext_key = draw(st.sampled_from(["External id", "External id", "external id"]))
        ext = f'"{ext_key}": {draw(ext_text)}'
        if draw(st.booleans()):
            cat = draw(st.sampled_from(["cpu_op", "Operator"]))
            args = f'{ext}, "Input type": {draw(types_text)}, "Input Dims": [[2, 3], []]'
            if odd and draw(st.integers(0, 4)) == 0:
                args += ', "correlation": "7"'  # a loose event (numbers as text), which the reader declines
            rows.append(f'{{"ph": "X", "cat": "{cat}", "name": "aten::mm", "ts": {i}, "dur": 1, "args": {{{args}}}}}')
        else:
            name = draw(st.sampled_from(OP_KERNEL_NAMES))
            cat = draw(st.sampled_from(["kernel", "kernel", "Kernel", "gpu_memset"]))
            dur = draw(st.sampled_from(["0", "2.5"]))
            rows.append(
                f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "ts": {i}, "dur": {dur},'
                f' "args": {{"stream": 7, "correlation": {i}, {ext}}}}}'
            )
    return ("[" + ",\n".join(rows) + "]").encode()


@needs_reader
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(operators_and_kernels_text(), min_size=1, max_size=3), knobs=knobs_strategy)
def test_the_reader_reads_operators_and_their_kernels_as_msgspec_and_python(batches: list[bytes], knobs: Knobs) -> None:
    # GIVEN operators with input types of every shape and kernels with External ids of every JSON type
    # WHEN read by the C reader (msgspec where it declines) and by msgspec with the Python loop
    got = check(batches, knobs)
    # THEN the same state, the op-types collector's included (check)
    event(f"the reader took a batch: {bool(got.accepted)}")
    event(f"op types: a kernel counted {any('.op_types.by_key[' in p for p, _ in got.trace)}")


def _plain_kineto_batch(n: int, seed: int) -> bytes:
    """libkineto's own layout: one event per item, ``"\\n  },\\n  {"`` between them, ts with ns digits."""
    rows = []
    t = 1712195495501688.612 + seed
    for i in range(n):
        kind = ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "user_annotation", "cuda_sync", "python_function")[
            i % 7
        ]
        name = {"cuda_runtime": "cudaLaunchKernel", "user_annotation": f"ProfilerStep#{i // 7}"}.get(
            kind, f"op_{i % 5}"
        )
        args = (
            f'"args": {{\n      "External id": {i}, "correlation": {i}, "stream": 7, "device": 0, '
            f'"grid": [1, 1, 1], "bytes": 64, "est. achieved occupancy %": 50}}'
        )
        rows.append(
            f'"ph": "X", "cat": "{kind}", "name": "{name}", "pid": 1, "tid": 7,\n    '
            f'"ts": {t + i * 3.125:.3f}, "dur": {1.5 + i % 3:.3f},\n    {args}'
        )
    return ("[{\n    " + "\n  },\n  {\n    ".join(rows) + "\n  }]").encode()


@needs_reader
@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_the_reader_takes_plain_kineto_json_and_matches(n: int) -> None:
    # GIVEN batches in libkineto's layout
    batches = [_plain_kineto_batch(n, s) for s in range(3)]
    # WHEN read both ways
    got = check(batches)
    # THEN the reader took every one (the comparison above is not vacuous) and the state is the same
    assert got.accepted == [0, 1, 2]


def _kernel_at(ts: str, dur: str) -> bytes:
    return (
        f'[{{"ph": "X", "cat": "kernel", "name": "k", "ts": {ts}, "dur": {dur}, '
        f'"args": {{"stream": 7, "correlation": 1, "bytes": {dur}}}}}]'
    ).encode()


def _midpoints() -> list[str]:
    """Decimals exactly halfway between two doubles, written in at most 19 significant digits (round-half-even
    decides them), and their neighbours one unit of the last digit away."""
    out = []
    for x in (2.0**53, 2.0**54 + 2, 9007199254740993.0, 1712195495501688.5, 4503599627370497.0, 0.1, 123.456):
        nxt = math.nextafter(x, math.inf)
        mid = (Decimal(x) + Decimal(nxt)) / 2
        text = format(mid, "f")
        digits = text.replace(".", "").replace("-", "").lstrip("0")
        if len(digits) <= 19:
            out.append(text if "." in text else text + ".0")
            last = Decimal(1).scaleb(mid.as_tuple().exponent)  # type: ignore[arg-type]
            out += [format(mid - last, "f"), format(mid + last, "f")]
    return out


@needs_reader
@settings(max_examples=3 * int(os.environ.get("PROFSTACK_FUZZ_EXAMPLES", "1000")), deadline=None)
@given(
    ts=NUMBER_TEXT
    | st.sampled_from(_midpoints())
    | st.builds(
        lambda m, e: f"{m}e{e}" if e else str(m),
        st.integers(0, 10**19),
        st.integers(-30, 25),
    )
    | st.builds(
        lambda i, f: f"{i}.{f}",
        st.integers(0, 2**63),
        st.text("0123456789", min_size=1, max_size=8),
    )
)
@example(ts="1712195495501688.612")
@example(ts="9007199254740993.0")
@example(ts="9007199254740995.0")
@example(ts="0.000000000000000000000000001")
def test_a_number_reads_as_msgspec_reads_it(ts: str) -> None:
    # GIVEN a kernel whose ts, dur and bytes are this number text
    # WHEN read both ways
    got = check([_kernel_at(ts, "1.5"), _kernel_at("10", ts)])
    # THEN the columns hold the same bits (check); numbers with at most 19 significant digits are taken
    if got.accepted:
        event("taken")


@needs_reader
def test_a_decline_is_every_case_the_reader_does_not_convert() -> None:
    # GIVEN batches msgspec decodes but the reader does not take (an escaped kept string, a surrogate pair, a
    # an escaped string stream, 20 significant digits, nesting beyond 64)
    deep = "[" * 70 + "]" * 70
    cases = [
        b'[{"ph": "X", "cat": "cpu_op", "name": "a\\"b", "ts": 1, "dur": 1}]',
        b'[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "x": "\\uD83D\\uDE00"}]',
        b'[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"stream": "0x\\u0037f"}}]',
        b'[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1.2345678901234567890, "dur": 1}]',
        ('[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "x": ' + deep + "}]").encode(),
        b'[{"n\\u0061me": "a", "ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1}]',
    ]
    for raw in cases:
        parse._LIST_DECODER.decode(raw)  # msgspec takes each
        # WHEN read both ways
        got = check([raw])
        # THEN the reader declined (and the state is msgspec's)
        assert got.accepted == [], raw


@needs_reader
@pytest.mark.parametrize(
    "raw",
    [
        b'[{"ph": "X", "cat": "cpu_op", "name": "\xff", "ts": 1, "dur": 1}]',  # invalid UTF-8 in a kept string
        b'[{"ph": "X", "cat": "cpu_op", "name": "a\x01", "ts": 1, "dur": 1}]',  # a raw control character
        b'[{"ph": "X", "ts": 1e400}]',  # out of range
        b'[{"ph": "X", "ts": "1"}]',
        b'[{"ph": null}]',
        b"[null]",
        b'[{"args": []}]',
        b'[{"args": {"bytes": -1.5}}]',
        b'[{"args": {"stream": 1.0}}]',
        b'[{"args": {"Device Type": 2147483648}}]',
        b'[{"tid": true}]',
        b'[{"tid": "\xff"}]',
        b'[{"x": [1,]}]',
        b'[{"x": 1},]',
        b'[{"a": 1} {"b": 2}]',
        b'[{"x": 01}]',
        b'[{"x": "\\ud800"}]',
        b'[{"x": 1}] x',
        b'[{"x": 1}',
    ],
)
def test_the_reader_declines_what_msgspec_rejects(raw: bytes) -> None:
    # GIVEN a batch msgspec rejects
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        parse._LIST_DECODER.decode(raw)
    # WHEN the reader is given it
    got = check([raw])
    # THEN it declined, having changed nothing (check)
    assert got.accepted == []


@needs_reader
def test_skipped_strings_are_checked_as_msgspec_checks_them() -> None:
    # GIVEN invalid UTF-8 in strings the event does not keep (msgspec does not check those) and in one it keeps
    skipped = (
        b'[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "x": "\xff", "\xfe": {"y": ["\xed\xa0\x80"]}}]'
    )
    kept = b'[{"ph": "X", "cat": "cpu_op", "name": "\xed\xa0\x80", "ts": 1, "dur": 1}]'
    # WHEN read both ways
    # THEN the first is taken as msgspec takes it, the second declined as msgspec rejects it
    assert check([skipped]).accepted == [0]
    assert check([kept]).accepted == []


@needs_reader
def test_a_memory_event_and_an_invalid_event_leave_what_pythons_helpers_leave() -> None:
    # GIVEN a [memory] instant event (the reader adds it to fd.memory as MemoryEvents.add does, from its tid and
    # memory args) and X events with bad times (they reach Python's helper with msgspec's event)
    raw = (
        b'[{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": "7", "ts": 5, '
        b'"args": {"Bytes": 512, "Total Allocated": 1024, "Total Reserved": 4096, "Device Type": 1, "Device Id": 0}},'
        b'{"ph": "X", "cat": "kernel", "name": "late", "ts": 1e17, "dur": 1, "args": {"stream": 7}},'
        b'{"ph": "X", "cat": "cpu_op", "name": "neg", "ts": 3, "dur": -2}]'
    )
    # WHEN read both ways
    got = check([raw])
    # THEN the reader took it and the helpers saw the same events (the memory list, the first invalid message)
    assert got.accepted == [0]


MEMORY_VARIANTS = [
    '"tid": 7, "ts": 5, "args": {"Bytes": 512, "Total Allocated": 1024, "Total Reserved": 4096, "Device Type": 1, '
    '"Device Id": 0}',
    '"tid": "7", "ts": 6, "args": {"Bytes": -512, "Total Allocated": 512}',  # str tid, no reserved, no device
    '"tid": 7.0, "ts": 7, "args": {"Bytes": 64, "Device Type": 0, "Device Id": -1}',  # float tid equal to 7: one thread
    '"tid": null, "ts": 8, "args": {"Bytes": 1, "Device Type": 40000, "Device Id": 70000}',  # ids out of range
    '"ts": 9, "args": {"Bytes": 2, "Device Type": -3, "Device Id": 65535}',  # no tid
    '"tid": 8, "ts": 10, "args": {"Bytes": null, "Total Allocated": 1}',  # null Bytes: not an event
    '"tid": 8, "ts": 11, "args": null',  # no args
    '"tid": 8, "ts": 12',
    '"tid": 8, "args": {"Bytes": 3}',  # no ts: counted, not kept
    '"tid": 8, "ts": 13, "args": {"Bytes": 3}, "args": {"Total Allocated": 5}',  # the last args wins: no Bytes
    '"tid": 8, "ts": 14, "args": {"Total Allocated": 5}, "args": {"Bytes": 4, "Bytes": null, "Bytes": 6}',
    '"tid": 8, "ts": 16, "args": {"Bytes": 4, "Total Reserved": 8, "Bytes": null, "Total Reserved": null}',
    '"tid": 9, "tid": 10, "ts": 15, "args": {"Bytes": 9223372036854775807, "Total Allocated": -9223372036854775808}',
]


@needs_reader
@pytest.mark.parametrize("max_events", [1000, 3])
def test_memory_events_of_every_shape_are_added_as_python_adds_them(max_events: int) -> None:
    # GIVEN [memory] events with every shape of tid and args, in two batches (the second adds to the first's threads)
    def batch(variants: list[str]) -> bytes:
        rows = [f'{{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, {v}}}' for v in variants]
        return ("[" + ",\n".join(rows) + "]").encode()

    with pytest.MonkeyPatch.context() as mp:
        # AND (second case) a bound on the events kept that the first batch already passes
        mp.setattr("profstack.analysis.memory.MAX_EVENTS", max_events)
        # WHEN read both ways
        got = check([batch(MEMORY_VARIANTS), batch(MEMORY_VARIANTS[:3])])
    # THEN the reader took both and left fd.memory as the Python loop left it (check compares every column)
    assert got.accepted == [0, 1]


class CountingReader:
    """The C module, counting which batches its reader took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.taken: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decode_consume(self, *a: Any) -> Any:
        r = self.inner.decode_consume(*a)
        self.taken.append(r is not NotImplemented)
        return r


@needs_reader
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_sample_trace_gives_the_same_summary_with_the_reader(path: Path) -> None:
    # GIVEN a real trace
    texts = {}
    counting = CountingReader(C_MODULE)
    for use, accel in (("python", None), ("reader", counting)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(native, "ACCEL", accel)
            # WHEN analysed with the Python loops only, and with the C reader
            result = analyze(discover_sources([path]), AnalysisOptions(top_k=10))
            texts[use] = json.dumps(engine_neutral(result.summary), sort_keys=True)
    # THEN the summaries are the same text, and the reader took every batch
    assert texts["python"] == texts["reader"]
    assert counting.taken, "the reader was not called"
    assert all(counting.taken), f"the reader declined {counting.taken.count(False)} of {len(counting.taken)} batches"


def test_the_midpoints_are_halfway_cases() -> None:
    # GIVEN the midpoint texts the number test draws from
    mids = _midpoints()[::3]
    # THEN each is exactly halfway between two adjacent doubles (so the test exercises round-half-even)
    assert mids
    for text in mids:
        d = Decimal(text)
        lo = float(d)
        if Decimal(lo) > d:
            lo = math.nextafter(lo, -math.inf)
        hi = math.nextafter(lo, math.inf)
        assert (Decimal(lo) + Decimal(hi)) / 2 == d, text
        assert struct.pack("<d", float(text))[0] % 2 == 0  # Python rounds it to the even one


def _escaped_names_trace(n: int) -> bytes:
    rows = [
        f'{{"ph": "X", "cat": "cpu_op", "name": "op \\"{i % 3}\\"", "pid": 1, "tid": 1, "ts": {i * 2}, "dur": 1}}'
        for i in range(n)
    ]
    return ('{"traceEvents": [\n' + ",\n".join(rows) + "\n]}").encode()


@needs_reader
def test_a_file_the_reader_keeps_declining_goes_to_msgspec_without_a_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a trace whose every batch has escaped names (which the reader declines), in small batches
    path = tmp_path / "rank0.pt.trace.json"
    path.write_bytes(_escaped_names_trace(4000))
    monkeypatch.setattr(parse, "BATCH_BYTES", 4096)
    monkeypatch.setattr(reader, "READ_SIZE", 4096)
    monkeypatch.setattr(reader, "OUT_SIZE", 4096)
    counting = CountingReader(C_MODULE)
    monkeypatch.setattr(native, "ACCEL", counting)
    # WHEN analysed
    with_reader = json.dumps(
        engine_neutral(analyze(discover_sources([path]), AnalysisOptions()).summary), sort_keys=True
    )
    # THEN the reader was tried READER_GIVE_UP + 1 times, then no more; the summary is the Python loop's
    assert counting.taken == [False] * (parse.READER_GIVE_UP + 1)
    monkeypatch.setattr(native, "ACCEL", None)
    plain = analyze(discover_sources([path]), AnalysisOptions()).summary
    assert with_reader == json.dumps(engine_neutral(plain), sort_keys=True)
