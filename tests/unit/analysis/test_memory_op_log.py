"""The memory attribution from the op log: for a trace whose header says ``profile_memory``, the main pass's C
reader logs the timed CPU ops (``memory.OpLog``) and ``memory.attribute_log`` finds each ``[memory]`` event's op
from them, without reading the file again. The summary is the one the second read (``memory.attribute``) gives,
whatever the trace holds; where the log cannot hold exactly the ops that read would find (a batch read another
way with an event msgspec cannot decode, a name cut as too long, too many ops or names), the log is dropped and
the file is read again."""

from __future__ import annotations

import json
from array import array
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, memory, native, parse
from tests.unit.analysis.neutral import engine_neutral

from .test_consume_native import C_MODULE
from .test_memory_second_pass import ODD, Interner, memory_events, op

HAS_LOG = C_MODULE is not None and hasattr(C_MODULE, "attribute_log")
needs_c = pytest.mark.skipif(not HAS_LOG, reason="profstack.analysis._gpuaccel (attribute_log) is not built")


def mem_event(ts: float, tid: object = 1, nbytes: int = 512) -> dict[str, object]:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "ts": ts,
        "pid": 1,
        "tid": tid,
        "args": {"Bytes": nbytes, "Total Allocated": 4096, "Total Reserved": 8192, "Device Type": 1, "Device Id": 0},
    }


def trace(events: list[dict[str, object]], *, profile_memory: bool = True) -> bytes:
    head: dict[str, object] = {"schemaVersion": 1}
    if profile_memory:
        head["profile_memory"] = 1
    return json.dumps({**head, "traceEvents": events}, indent=1, ensure_ascii=False).encode()


class Passes:
    """Which way each file's memory was attributed (spies on parse's two entry points)."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.log = self.read = 0
        log, read = parse.attribute_log, parse.attribute

        def spy_log(*a: Any, **k: Any) -> Any:
            self.log += 1
            return log(*a, **k)

        def spy_read(*a: Any, **k: Any) -> Any:
            self.read += 1
            return read(*a, **k)

        mp.setattr(parse, "attribute_log", spy_log)
        mp.setattr(parse, "attribute", spy_read)


def summary(data: bytes, *, use_log: bool) -> tuple[dict[str, Any], Passes]:
    with pytest.MonkeyPatch.context() as mp:
        passes = Passes(mp)
        if not use_log:
            mp.setattr(parse, "_op_log", lambda meta: None)
        result = analyze([BytesTraceSource(data, "rank0.pt.trace.json")], AnalysisOptions(top_k=50))
    return json.loads(json.dumps(engine_neutral(result.summary))), passes


def memory_section(s: dict[str, Any]) -> Any:
    return [r.get("memory") for r in s["ranks"]]


def train_loop(n: int = 6000) -> list[dict[str, object]]:
    """Ops on two threads, and after them (as Kineto writes them) the memory events inside some of them."""
    events: list[dict[str, object]] = [op(i) for i in range(n)]
    events += [op(i, tid=2, name=f"aten::t2_{i % 7}") for i in range(0, n, 3)]
    events += [mem_event(0.5 * i + 0.25) for i in range(0, n, 5)]
    events += [mem_event(0.5 * i + 1.0, tid=2, nbytes=-64) for i in range(0, n, 11)]
    return events


@needs_c
def test_a_profile_memory_trace_is_attributed_from_the_log_with_the_second_reads_answers() -> None:
    # GIVEN a profile_memory trace of several batches: ops, then the memory events inside them
    data = trace(train_loop(12000))
    assert len(data) > 2 << 20
    # WHEN analysed with the op log and with the second read
    got, got_passes = summary(data, use_log=True)
    want, want_passes = summary(data, use_log=False)
    # THEN the log was used (no second read) and the summary is the same, to the byte
    assert (got_passes.log, got_passes.read) == (1, 0)
    assert (want_passes.log, want_passes.read) == (0, 1)
    assert got == want
    # AND the memory section names real operators
    ops = {o["name"] for m in memory_section(got) for o in m["top_operators"]}
    assert "(no enclosing CPU op)" not in ops
    assert any(name.startswith("aten::op") for name in ops)


def test_a_trace_without_the_header_flag_is_read_again() -> None:
    # GIVEN the same trace from an older profiler that does not write profile_memory in its header
    data = trace(train_loop(600), profile_memory=False)
    # WHEN analysed
    got, passes = summary(data, use_log=True)
    # THEN its memory is attributed by a second read (the main pass kept no log), with the same answer
    assert (passes.log, passes.read) == (0, 1)
    assert got == summary(data, use_log=False)[0]


@needs_c
@pytest.mark.parametrize(
    ("why", "extra"),
    [
        ("an ill-typed ts: msgspec cannot decode the event", {"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x"}),
        ("ill-typed args: kept without its tid", {**op(3), "args": {"correlation": "x"}}),
        ("a name cut as too long", {**op(4), "name": "aten::" + "n" * (parse.MAX_STRING_BYTES + 10)}),
    ],
)
def test_a_trace_the_log_cannot_hold_exactly_is_read_again(why: str, extra: dict[str, object]) -> None:
    # GIVEN a profile_memory trace with one event the log cannot stand for exactly
    events = train_loop(600)
    events.insert(300, extra)
    data = trace(events)
    # WHEN analysed
    got, passes = summary(data, use_log=True)
    # THEN the log was dropped and the file read again: the second read's answer
    assert (passes.log, passes.read) == (0, 1), why
    assert got == summary(data, use_log=False)[0]


@needs_c
@pytest.mark.parametrize("bound", ["ops", "ops, some spilled", "names"])
def test_a_log_beyond_its_bounds_is_dropped(bound: str) -> None:
    # GIVEN a log bound below what the trace holds (4,000 ops; in the second case ops are spilled before)
    data = trace(train_loop(3000 if bound != "ops, some spilled" else 30000))
    with pytest.MonkeyPatch.context() as mp:
        if bound == "ops":
            mp.setattr(memory, "MAX_LOGGED_OPS", 100)
            mp.setattr(memory.OpLog.__init__, "__defaults__", (100,))
        elif bound == "ops, some spilled":  # 40,000 ops against a cap of 25,000, 500 of them in memory
            mp.setattr(memory, "SPILL_OPS", 500)
            mp.setattr(memory.OpLog.__init__, "__defaults__", (25_000,))
        else:
            mp.setattr(memory, "MAX_LOGGED_NAMES", 20)
        # WHEN analysed
        got, passes = summary(data, use_log=True)
    # THEN the file is read again, with the same answer
    assert (passes.log, passes.read) == (0, 1)
    assert got == summary(data, use_log=False)[0]


class Spills:
    """The op logs the parser made, and the size of their arrays in memory after each spill."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.logs: list[memory.OpLog] = []
        self.held: list[int] = []
        real_init, real_spill = memory.OpLog.__init__, memory.OpLog.spill

        def init(log: memory.OpLog, *a: Any, **k: Any) -> None:
            real_init(log, *a, **k)
            self.logs.append(log)

        def spill(log: memory.OpLog) -> None:
            self.held.append(len(log.ts))
            real_spill(log)

        mp.setattr(memory.OpLog, "__init__", init)
        mp.setattr(memory.OpLog, "spill", spill)


@needs_c
@pytest.mark.parametrize("accel", ["C", "Python"])
def test_a_log_spilled_to_its_file_gives_the_answers_of_one_held_in_memory(accel: str) -> None:
    # GIVEN a profile_memory trace of several batches, and a log that holds 500 ops in memory
    data = trace(train_loop(30000))
    kept, _ = summary(data, use_log=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memory, "SPILL_OPS", 500)
        spills = Spills(mp)
        if accel == "Python":  # the Python loops: msgspec's events logged by OpLog.add, applied by _apply_op
            mp.setattr(native, "ACCEL", None)
            mp.setattr(parse, "_op_log", lambda meta: memory.OpLog())
        # WHEN analysed
        got, passes = summary(data, use_log=True)
    # THEN the ops went to the file after each batch, in records, and were applied from it: the same answers
    (log,) = spills.logs
    assert len(spills.held) >= 3
    assert min(spills.held) > 500
    assert (passes.log, passes.read) == (1, 0)
    assert got == kept
    assert got == summary(data, use_log=False)[0]
    # AND the file was removed at the end
    assert log.spill_file is None


@needs_c
@pytest.mark.parametrize("fault", ["no space", "cut short"])
def test_a_spill_file_that_fails_is_a_second_read_with_the_same_answers(fault: str) -> None:
    # GIVEN a log whose temporary file cannot be written, or comes back shorter than written
    data = trace(train_loop(30000))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memory, "SPILL_OPS", 500)
        if fault == "no space":

            def full(*a: Any, **k: Any) -> Any:
                raise OSError(28, "No space left on device")

            mp.setattr(memory.tempfile, "TemporaryFile", full)
        else:
            real = memory.OpLog.columns

            def cut(log: memory.OpLog) -> Any:
                assert log.spill_file is not None
                log.spill_file.truncate(log.spill_file.tell() // 2)
                return real(log)

            mp.setattr(memory.OpLog, "columns", cut)
        # WHEN analysed
        got, passes = summary(data, use_log=True)
    # THEN the file was read again (no half-attributed events), with the second read's answers
    assert passes.read == 1
    assert passes.log == (1 if fault == "cut short" else 0)
    assert got == summary(data, use_log=False)[0]


def test_the_budget_sets_the_event_cap() -> None:
    # GIVEN the budget of the memory section
    per_event = memory.EVENT_BYTES + memory.ATTRIBUTION_BYTES
    # THEN the columns and the attribution of MAX_EVENTS events fit in it, and no more
    assert memory.MAX_EVENTS * per_event <= memory.MEMORY_BUDGET_BYTES < (memory.MAX_EVENTS + 1) * per_event
    # AND the widths are those of the columns MemoryEvents and OpLog hold
    columns = memory.MemoryEvents()
    assert (
        sum(getattr(columns, c).itemsize for c in ("ts", "tid", "dev", "nbytes", "alloc", "reserved", "op"))
        == memory.EVENT_BYTES
    )
    log = memory.OpLog()
    assert sum(getattr(log, c).itemsize for c in ("ts", "dur", "name", "tid")) == memory.OP_BYTES


@needs_c
def test_the_c_loop_and_the_python_loop_give_the_same_answers() -> None:
    # GIVEN a log of msgspec-decoded ops (odd ones among them) and memory events on several threads
    events: list[dict[str, object]] = []
    for i in range(3000):
        events += [op(i), ODD[i % len(ODD)]]
    log = memory.OpLog()
    for e in events:
        try:
            log.add(parse._LIST_DECODER.decode(json.dumps([e]).encode()))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    assert log.valid
    assert len(log) > 3000
    answers = []
    for accel in (C_MODULE, None):
        mem, intern = memory_events(), Interner()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(native, "ACCEL", accel)
            # WHEN attributed by the C loop and by the Python loop
            memory.attribute_log(log, mem, intern)
        answers.append((list(mem.op), intern.calls))
    # THEN the same ops, the same names interned in the same order
    assert answers[0] == answers[1]
    assert sum(o >= 0 for o in answers[0][0]) >= 8


@needs_c
def test_the_c_loop_declines_a_log_whose_indices_do_not_fit() -> None:
    # GIVEN a log that names a thread it does not have
    mem = memory_events()
    spans = memory._spans(mem)
    best, names = array("d", [1e300]) * len(mem), ["aten::a"]
    args = (array("d", [0.0]), array("d", [10.0]), array("i", [0]), array("i", [5]), array("i", [0]))
    # WHEN the C loop is given it THEN it declines, changing nothing
    before = list(mem.op)
    assert C_MODULE.attribute_log(*args, spans, best, mem.op, names, Interner()) is NotImplemented
    assert list(mem.op) == before


SHAPES = st.one_of(
    st.sampled_from(ODD),
    st.integers(0, 40).map(op),
    st.integers(0, 40).map(lambda i: op(i, tid=2)),
    st.builds(
        mem_event, st.sampled_from([0.0, 0.3, 1.0, 2.25, 3.0, 7.5, 9.0, 19.0]), st.sampled_from([1, 2, "t", None, 1.5])
    ),
)


@needs_c
@settings(max_examples=80, deadline=None)
@given(st.lists(SHAPES, max_size=80))
def test_any_mix_gets_the_same_summary_from_the_log_and_from_the_second_read(events: list[dict[str, object]]) -> None:
    data = trace(events)
    got, _ = summary(data, use_log=True)
    want, _ = summary(data, use_log=False)
    assert got == want


THREADS: list[object] = [0, "0", None, 1.5, 7, "t", 2**40, -1]


@pytest.mark.parametrize("how", ["log from the C reader", "log from msgspec's events", "second read"])
def test_threads_of_every_kind_keep_their_own_ops(how: str) -> None:
    use_log = how != "second read"
    if use_log and not HAS_LOG:
        pytest.skip("the C module is not built")
    # GIVEN ops on threads named by ints, strings, null and a float (which attribute's read does not decode),
    # alternating thread by thread, each op around one memory event of its own thread
    events: list[dict[str, object]] = []
    for k in range(40):
        for j, tid in enumerate(THREADS):
            t0 = 100.0 * k + 10.0 * j
            events.append(op(0, tid=tid, name=f"aten::thread{j}", ts=t0, dur=5.0))
            if tid is None:  # shorter, around the same event: a float-tid op (not decoded), then a GPU row
                events.append(op(0, tid=1.5, name="aten::float_tid", ts=t0 + 1.0, dur=2.0))
            if tid == 7:  # and rows of other categories, each shorter than the op around the same event
                events.append(
                    {**op(0, tid=7, ts=t0 + 1.5, dur=1.0), "cat": "kernel", "name": "k", "args": {"stream": 7}}
                )
                events.append({**op(0, tid=7, ts=t0 + 1.7, dur=0.5), "cat": "user_annotation", "name": "ann"})
    for k in range(40):
        for j, tid in enumerate(THREADS):
            events.append(mem_event(100.0 * k + 10.0 * j + 2.0, tid=tid, nbytes=1000 + j))
    if how == "log from msgspec's events":  # an escaped name: the C reader declines the batch, msgspec decodes it
        events.insert(0, op(0, tid=99, name="aten::\u0007bell", ts=1e6))
    data = trace(events)
    # WHEN analysed (with the op log, or reading the file again)
    got, passes = summary(data, use_log=use_log)
    assert (passes.log, passes.read) == ((1, 0) if use_log else (0, 1))
    # THEN each thread's events are its own op's, and the float thread's have none
    [section] = memory_section(got)
    by_name = {o["name"]: o["bytes"] for o in section["top_operators"]}
    want = {f"aten::thread{j}": 40 * (1000 + j) for j, tid in enumerate(THREADS) if not isinstance(tid, float)}
    want["(no enclosing CPU op)"] = 40 * (1000 + THREADS.index(1.5))
    assert by_name == want


def _cut_warnings(s: dict[str, Any]) -> list[str]:
    return [w["message"] for w in s["errors"] + s["warnings"] if w["error_type"] == "MemoryEventsCutError"]


@pytest.mark.parametrize("accel", ["C", "Python"])
def test_memory_events_beyond_the_bound_are_a_warning_and_mark_the_memory_section_incomplete(accel: str) -> None:
    # GIVEN a profile_memory trace of 873 memory events, and a bound of 50 events kept
    data = trace(train_loop(3000))
    whole, _ = summary(data, use_log=True)
    assert whole["complete"]
    assert _cut_warnings(whole) == []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memory, "MAX_EVENTS", 50)
        if accel == "Python":
            mp.setattr(native, "ACCEL", None)
        # WHEN analysed (by the C reader or the Python loop)
        got, _ = summary(data, use_log=True)
    # THEN the section holds the first 50 and says it is incomplete, and so do the warning and the summary
    assert memory_section(got)[0]["events"] == 50
    assert memory_section(got)[0]["complete"] is False
    (msg,) = _cut_warnings(got)
    assert "823 of the file's 873 [memory] events left out, beyond the first 50" in msg
    # AND only the memory section is incomplete: no other number rests on those events (#43 item 2)
    assert got["ranks"][0]["completeness"]["memory"] == {"complete": False, "gaps": ["MemoryEventsCutError"]}
    assert got["ranks"][0]["completeness"]["gpu_time"]["complete"] is True
    assert got["complete"] is True


def test_memory_events_without_a_time_are_a_warning_of_their_own() -> None:
    # GIVEN a trace with two [memory] events without a ts, and one whose Bytes is null (no allocation: not a
    # memory event at all)
    events = train_loop(600)
    no_bytes = mem_event(3.0)
    no_bytes["args"] = {"Bytes": None}
    no_ts = {k: v for k, v in mem_event(4.0).items() if k != "ts"}
    events += [no_bytes, no_ts, no_ts]
    # WHEN analysed
    got, _ = summary(trace(events), use_log=True)
    # THEN the warning counts the two and says why; the memory section is incomplete (the run is not)
    (msg,) = _cut_warnings(got)
    assert "2 of the file's 177 [memory] events left out, without a time or a byte count" in msg
    assert got["ranks"][0]["completeness"]["memory"]["complete"] is False
    assert got["complete"] is True
