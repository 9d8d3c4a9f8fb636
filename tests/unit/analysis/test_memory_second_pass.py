"""The memory attribution's second read of a trace decodes whole batches: the same CPU ops as one-by-one decoding,
whatever odd events sit among them, and a per-step peak from a bisect equal to a scan."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import memory
from profstack.analysis.jsonstream import EventStream, raw_events
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import BytesTraceSource

LIMIT = 1 << 30


def reference_cpu_ops(data: bytes) -> list[memory._Op]:
    """The pass as it was: every raw event decoded on its own, skipped when it does not fit."""
    src = BytesTraceSource(data, "t.json")
    out = []
    with src.open() as fh:
        stream = EventStream(iter_chunks(fh, max_decompressed=LIMIT), max_value_bytes=LIMIT)
        for raw in raw_events(stream):
            try:
                ev = memory._OP.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            cpu_op = ev.ph == "X" and ev.ts is not None and ev.cat in ("cpu_op", "Operator")
            if cpu_op and not ev.name.startswith(memory._PRIMITIVES):
                out.append(ev)
    return out


def batched(data: bytes) -> list[memory._Op]:
    return list(memory._cpu_ops(BytesTraceSource(data, "t.json"), LIMIT, LIMIT))


def op(i: int, **kw: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": 10.0 * i, "dur": 5.0, "tid": 7, **kw}


ODD = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::f", "ts": 1.0, "dur": 1.0, "tid": 1.5},  # float tid: does not fit
    {"ph": "X", "cat": "cpu_op", "name": "aten::s", "ts": "late", "dur": 1.0, "tid": 1},  # ill-typed ts
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 3.0, "dur": 1.0, "tid": 1},  # a primitive
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 4.0, "tid": 1, "args": {"Bytes": 8}},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 3, "ts": 5.0, "tid": 1},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 6.0, "dur": 2.0, "tid": 9, "args": {"stream": 7}},
    {"ph": "X", "cat": "Operator", "name": "aten::old", "ts": 7.0, "dur": 2.0, "tid": "t"},  # 2021 category
    {"ph": "X", "cat": "cpu_op", "name": "aten::nots", "dur": 2.0, "tid": 1},  # no ts
    {"ph": "X", "cat": "cpu_op", "name": "aten::x" * 200, "ts": 8.0, "dur": 2.0, "tid": 2, "args": {"a": [1, {}]}},
]


def trace(events: list[dict[str, object]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1).encode()


def test_a_batch_with_odd_events_keeps_every_op_the_one_by_one_pass_kept() -> None:
    # GIVEN 12,000 CPU ops (over 2 MB: several 1 MB batches) with every kind of odd event mixed in
    events: list[dict[str, object]] = []
    for i in range(12000):
        events.append(op(i))
        events.append(ODD[i % len(ODD)])
    data = trace(events)
    assert len(data) > 2 << 20
    # WHEN the ops are read in batches THEN exactly the ops (and order) of the one-by-one pass
    got, want = batched(data), reference_cpu_ops(data)
    assert [(e.name, e.ts, e.tid) for e in got] == [(e.name, e.ts, e.tid) for e in want]
    # AND of the odd ones only the 2021 "Operator" and the long-named op count (2 of 9, 1,333 times each)
    assert len(got) == 12000 + 2 * 1333


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.integers(0, 10**6).map(op)), max_size=60))
def test_any_mix_reads_the_same_ops(events: list[dict[str, object]]) -> None:
    data = trace(events)
    assert [msgspec.to_builtins(e) for e in batched(data)] == [msgspec.to_builtins(e) for e in reference_cpu_ops(data)]
