"""The memory attribution's second read of a trace (``memory.attribute``): every batch read by the C reader
(``_gpuaccel.attribute_ops``) where it is built and takes the batch, else decoded by msgspec a batch at a time,
else one event at a time. Each way finds the same allocating op for every ``[memory]`` event, and interns the
same names in the same order, as decoding every event on its own, whatever odd events sit among the ops.

The reader's contract has the two halves of ``test_reader_native``'s: it never takes a batch msgspec rejects,
and where it takes one it leaves what ``memory._apply(_OPS.decode(batch))`` leaves, bit for bit; where it declines
it has changed nothing."""

from __future__ import annotations

import json
import math
from array import array
from typing import Any

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from profstack.analysis import memory, native
from profstack.analysis.jsonstream import EventStream, raw_events
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import BytesTraceSource

from .test_consume_native import C_MODULE
from .test_reader_native import SETTINGS, batch_text

LIMIT = 1 << 30
HAS_ATTRIBUTE = C_MODULE is not None and hasattr(C_MODULE, "attribute_ops")
needs_c = pytest.mark.skipif(not HAS_ATTRIBUTE, reason="profstack.analysis._gpuaccel (attribute_ops) is not built")


class Interner:
    """A symbol table's ``intern``: the calls in order, one id per distinct name."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.calls: list[str] = []

    def __call__(self, name: str) -> int:
        self.calls.append(name)
        return self.ids.setdefault(name, len(self.ids))


#: [memory] events: (tid, ts) on the threads and at the times the ops below and test_reader_native's generated ones
#: use (its TS_TEXT: 0 .. 2e300, ns-digit Kineto times), and a thread no op names
MEMORY_AT = [
    (1, 0.0), (1, 1.0), (1, 2.25), (1, 3.0), (1, 5.5), (7, 1.0), (7, 100.0), (7, 1712195495501690.0), ("stream 7", 1.0),
    ("stream 7", 2.5), (None, 1.0), (None, 6.0), ("t", 7.5), (2, 9.0), (2, 8.0), (99, 1.0), (1, 1e300),
]  # fmt: skip


def memory_events(at: list[tuple[Any, float]] = MEMORY_AT) -> memory.MemoryEvents:
    mem = memory.MemoryEvents()
    for tid, ts in at:
        mem.add(ts, tid, dtype=1, did=0, nbytes=512, alloc=1024, reserved=4096)
    return mem


def reference(data: bytes, mem: memory.MemoryEvents) -> Interner:
    """The pass with every raw event decoded on its own (skipped when it does not fit ``_Op``), in Python."""
    intern, spans = Interner(), memory._spans(mem)
    best = array("d", [math.inf]) * len(mem)
    with BytesTraceSource(data, "t.json").open() as fh:
        stream = EventStream(iter_chunks(fh, max_decompressed=LIMIT), max_value_bytes=LIMIT)
        for raw in raw_events(stream):
            try:
                ev = memory._OP.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            memory._apply([ev], mem, spans, best, intern)
    return intern


def attribute(data: bytes, mem: memory.MemoryEvents, accel: Any) -> Interner:
    intern = Interner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "ACCEL", accel)
        assert memory.attribute(BytesTraceSource(data, "t.json"), mem, intern, max_decompressed=LIMIT, max_event=LIMIT)
    return intern


def op(i: int, **kw: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 50}", "ts": 0.5 * i, "dur": 4.0, "tid": 1, **kw}


ODD = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::f", "ts": 1.0, "dur": 1.0, "tid": 1.5},  # float tid: does not fit
    {"ph": "X", "cat": "cpu_op", "name": "aten::s", "ts": "late", "dur": 1.0, "tid": 1},  # ill-typed ts
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 0.0, "dur": 9.0, "tid": 1},  # a primitive
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty_strided", "ts": 0.0, "dur": 0.1, "tid": 1},  # one too
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 4.0, "tid": 1, "args": {"Bytes": 8}},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 3, "ts": 5.0, "tid": 1},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 0.0, "dur": 0.2, "tid": 1, "args": {"stream": 7}},  # not CPU
    {"ph": "X", "cat": "Operator", "name": "aten::old", "ts": 7.0, "dur": 2.0, "tid": "t"},  # 2021 category
    {"ph": "X", "cat": "cpu_op", "name": "aten::nots", "dur": 0.01, "tid": 1},  # no ts
    {"ph": "X", "cat": "cpu_op", "name": "aten::x" * 200, "ts": 8.0, "dur": 2.0, "tid": 2, "args": {"a": [1, {}]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::ü", "ts": 0.9, "dur": 0.2, "tid": None},  # non-ASCII, no tid
    {"ph": "X", "cat": "cpu_op", "name": "aten::neg", "ts": 2.0, "dur": -1.0, "tid": 1},  # negative dur
    {"ph": "X", "cat": "cpu_op", "name": "aten::\u0007bell", "ts": 2.0, "dur": 0.5, "tid": 1},  # an escape
    {"ph": "X", "cat": "cpu_op", "name": "aten::gone", "ts": 2.0, "dur": 0.5, "tid": 12345},  # no memory there
]


def trace(events: list[dict[str, object]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1, ensure_ascii=False).encode()


def mixed_trace() -> bytes:
    """12,000 CPU ops (over 2 MB: several 1 MB batches) with every kind of odd event mixed in."""
    events: list[dict[str, object]] = []
    for i in range(12000):
        events.append(op(i))
        events.append(ODD[i % len(ODD)])
    return trace(events)


@pytest.mark.parametrize("accel", ["c", "python"])
def test_a_trace_with_odd_events_gets_the_ops_the_one_by_one_pass_finds(accel: str) -> None:
    if accel == "c" and not HAS_ATTRIBUTE:
        pytest.skip("the C module is not built")
    # GIVEN a trace of many batches with odd events among the ops, and [memory] events on five threads
    data = mixed_trace()
    assert len(data) > 2 << 20
    mem, want_mem = memory_events(), memory_events()
    # WHEN attributed in batches (C reader, or msgspec) and one event at a time
    got = attribute(data, mem, C_MODULE if accel == "c" else None)
    want = reference(data, want_mem)
    # THEN the same op for every event, and the same names interned in the same order
    assert list(mem.op) == list(want_mem.op)
    assert got.calls == want.calls
    # AND the answers are the ones the ops imply: the innermost op around each event, primitives aside
    names = {v: k for k, v in got.ids.items()}
    by_event = {(tid, ts): names.get(o) for (tid, ts), o in zip(MEMORY_AT, mem.op, strict=True)}
    assert by_event[("stream 7", 1.0)] is None  # no op on that thread
    assert by_event[(None, 1.0)] == "aten::ü"  # the op without a tid is the tid-less events' op
    assert by_event[("t", 7.5)] == "aten::old"
    assert by_event[(2, 8.0)] == by_event[(2, 9.0)] == "aten::x" * 200
    assert by_event[(99, 1.0)] is None
    assert by_event[(1, 1e300)] is None
    assert by_event[(1, 0.0)] == "aten::op0"  # not the kernel, not the primitives around it
    assert by_event[(1, 3.0)] == "aten::op0"
    assert by_event[(1, 5.5)] == "aten::op3"
    assert by_event[(1, 2.25)] == "aten::\u0007bell"  # a name the C reader declines (an escape): msgspec's


@needs_c
def test_the_c_reader_takes_the_plain_batches() -> None:
    # GIVEN a trace of plain Kineto-like ops (no odd event)
    data = trace([op(i) for i in range(20000)])
    calls: list[object] = []

    class Spy:
        @staticmethod
        def attribute_ops(*args: object) -> object:
            r = C_MODULE.attribute_ops(*args)
            calls.append(r)
            return r

    mem = memory_events()
    # WHEN attributed
    attribute(data, mem, Spy)
    # THEN every batch was read by the C reader, and it found the ops
    assert len(calls) >= 2
    assert all(r is None for r in calls)
    assert list(mem.op).count(-1) < len(mem)


def _state(mem: memory.MemoryEvents, best: array[float], intern: Interner) -> tuple[object, ...]:
    return list(mem.op), [b if not math.isinf(b) else "inf" for b in best], list(intern.calls)


@needs_c
@SETTINGS
@given(batch=batch_text())
def test_the_c_reader_matches_msgspec_and_python_on_generated_json(batch: bytes) -> None:
    # GIVEN a batch of JSON text with every freedom of the format, wrong types and invalid text
    # (test_reader_native's generator: tids 1, 7, "stream 7", 1.5, null and hostile ones)
    def fresh() -> tuple[memory.MemoryEvents, memory.Spans, array[float], Interner]:
        mem = memory_events()
        return mem, memory._spans(mem), array("d", [math.inf]) * len(mem), Interner()

    ref_mem, ref_spans, ref_best, ref_intern = fresh()
    try:
        events = memory._OPS.decode(batch)
    except (msgspec.DecodeError, msgspec.ValidationError):
        events = None
    else:
        memory._apply(events, ref_mem, ref_spans, ref_best, ref_intern)
    mem, spans, best, intern = fresh()
    before = _state(mem, best, intern)
    # WHEN the C reader reads it
    with memoryview(bytearray(batch)) as view:
        took = C_MODULE.attribute_ops(view, mem.tids, spans, best, mem.op, intern)
    # THEN it declines what msgspec rejects, changing nothing; where it takes the batch, msgspec's state
    if took is NotImplemented:
        assert _state(mem, best, intern) == before
        event("declined")
        return
    assert took is None
    assert events is not None, "the reader took a batch msgspec rejects"
    assert _state(mem, best, intern) == _state(ref_mem, ref_best, ref_intern)
    event("taken")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.integers(0, 40).map(op)), max_size=60))
def test_any_mix_gets_the_same_ops_every_way(events: list[dict[str, object]]) -> None:
    data = trace(events)
    want_mem = memory_events()
    want = reference(data, want_mem)
    for accel in [None, C_MODULE] if HAS_ATTRIBUTE else [None]:
        mem = memory_events()
        got = attribute(data, mem, accel)
        assert list(mem.op) == list(want_mem.op)
        assert got.calls == want.calls
