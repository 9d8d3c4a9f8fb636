"""The C per-event loop of the parser (``_gpuaccel.consume_events``) leaves exactly the state Python's leaves.

``_Parser.consume`` runs ``native.ACCEL.consume_events`` where the C module is built, else
``_Parser._consume_events``. The two must return the same (launches, X events, runtime calls) tuple, append the
same to the four arrays they are given, and leave the parser (its FileData, the symbol table, the GPU feed's op
columns, the stream ids, the name budgets) the same to the bit: the same values, the same Python types, the same
dict orders, the same exceptions; or C returns ``NotImplemented`` having changed nothing. Each test runs the same
batches through two fresh parsers, one with the C module and one with ``native.ACCEL = None``, and compares a
canonical, bit-exact flattening of everything (``flatten``). Tests that need the C module skip when it is not
built; the tests of the comparison itself (``test_the_comparison_*``) run without it, against wrong accelerators.
"""

from __future__ import annotations

import importlib
import json
import math
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, engine, native, op_types, parse
from profstack.analysis.classify import follows
from profstack.analysis.errors import StepWindowError
from profstack.analysis.gpu import (
    HTA_LAUNCH_CALLS,
    GpuFeed,
    Selection,
    StepFrontier,
    dedupe_steps,
    select,
)
from profstack.analysis.memory import MEMORY_EVENT
from profstack.analysis.sources import discover_sources
from tests.unit.analysis.neutral import engine_neutral

from .bitexact import Flat, first_difference, flatten
from .hostile_traces import distinct_kernel_names, one_huge_name
from .synth import TraceBuilder, busy_steps, cycle_events, kernel_event, launch_event, step_event


def _import_c() -> tuple[ModuleType | None, str]:
    try:
        return importlib.import_module("profstack.analysis._gpuaccel"), ""
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"


C_MODULE, C_IMPORT_ERROR = _import_c()
HAS_CONSUME = C_MODULE is not None and hasattr(C_MODULE, "consume_events")
needs_c = pytest.mark.skipif(
    not HAS_CONSUME,
    reason="profstack.analysis._gpuaccel (with consume_events) is not built "
    "(python -m profstack.analysis.native_build): " + (C_IMPORT_ERROR or "the built module has no consume_events"),
)

NAN = math.nan
INF = math.inf
E = parse.Event
A = parse.Args
PY_CONSUME = parse._Parser._consume_events  # the Python loop, unwrapped
BEYOND_INT64 = [2**63, -(2**63) - 1, 2**70]

# ---------------------------------------------------------------------------------------------------------------
# A parser as _parse builds one, the knobs a test may shrink, and running batches through it
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knobs:
    bounded: bool = True
    count_sync: bool = True
    launch_calls: str = "hta"
    include_last_step: bool = False
    hta_compat: bool = False  # the start column's time model (gpu.start_ns)
    window: int | None = None  # GpuFeed reorder window / drain chunk / launch capacity (None: the defaults)
    chunk: int | None = None
    capacity: int | None = None
    max_name_chars: int | None = None  # parse.MAX_NAME_CHARS
    names_per_file: int | None = None  # parse.MAX_NAMES_PER_FILE (read by each _NameBudget when made)
    names_total: int | None = None  # parse.MAX_NAMES_TOTAL (read by SymbolTable.full at each call)
    max_devices: int | None = None
    max_streams: int | None = None  # parse.MAX_STREAMS (what _stream_of reads)
    max_unknown: int | None = None
    op_types: bool = True  # a collector of op types on the parser (op_types.Collector), as _parse attaches one
    promised: bool = False  # its header promised record_shapes
    max_ops: int | None = None  # op_types.MAX_OPS / MAX_PENDING / GIVE_UP_EVENTS
    max_pending: int | None = None
    give_up: int | None = None
    dense_ids: int | None = None  # op_types.DENSE_IDS

    def patch(self, mp: pytest.MonkeyPatch) -> None:
        for attr, v in (
            ("MAX_NAME_CHARS", self.max_name_chars),
            ("MAX_NAMES_PER_FILE", self.names_per_file),
            ("MAX_NAMES_TOTAL", self.names_total),
            ("MAX_DEVICES", self.max_devices),
            ("MAX_STREAMS", self.max_streams),
            ("MAX_UNKNOWN_CATEGORIES", self.max_unknown),
        ):
            if v is not None:
                mp.setattr(parse, attr, v)
        for attr, v in (
            ("MAX_OPS", self.max_ops),
            ("MAX_PENDING", self.max_pending),
            ("GIVE_UP_EVENTS", self.give_up),
            ("DENSE_IDS", self.dense_ids),
        ):
            if v is not None:
                mp.setattr(op_types, attr, v)

    def options(self) -> AnalysisOptions:
        return AnalysisOptions(
            count_sync=self.count_sync,
            launch_calls=self.launch_calls,
            include_last_step=self.include_last_step,
            hta_compat=self.hta_compat,
        )


def make_parser(knobs: Knobs) -> parse._Parser:
    """A fresh parser wired as ``parse._parse`` wires one (FileData, SymbolTable, GpuFeed, selection_now)."""
    opts = knobs.options()
    fd = parse.FileData(name="rank0.pt.trace.json", size_bytes=None)
    symbols = parse.SymbolTable()

    def selection_now(n_launches: int) -> Selection:
        steps = dedupe_steps(fd.st_num, fd.st_ts, fd.st_dur)
        try:
            return select(steps, opts, has_launches=n_launches > 0, label=fd.name)
        except StepWindowError:
            return Selection("none")

    feed = GpuFeed(
        symbols.names,
        opts.thresholds(),
        StepFrontier(opts),
        bounded=knobs.bounded,
        window=knobs.window,
        chunk=knobs.chunk,
        launch_capacity=knobs.capacity,
        all_launch_calls=opts.launch_calls == "all",
        clip_delays=opts.clip_launch_delay,
        hta_compat=opts.hta_compat,
    )
    fd.gpu_feed = feed
    parser = parse._Parser(fd, symbols, feed, selection_now, count_sync=opts.count_sync)
    if knobs.op_types:
        fd.op_types = parser.op_types = op_types.Collector(symbols.names, follows, promised=knobs.promised)
    return parser


def _decline(*_a: Any) -> Any:
    return NotImplemented


class Spy:
    """Wraps an accelerator's ``consume_events``: counts calls and declines, records what it returned and appended,
    and checks that a decline changed nothing. With ``only_consume`` its other entry points (add_ops, bins_add,
    ...) decline, so a difference is the per-event loop's."""

    def __init__(self, inner: Any, record: Flat, *, only_consume: bool = True) -> None:
        self.inner = inner
        self.record = record
        self.only_consume = only_consume
        self.calls = 0
        self.declines = 0
        self.declined: list[int] = []  # which calls (0-based) declined
        self.dirty_declines: list[str] = []

    def consume_events(self, parser: parse._Parser, events: Any, *arrays: array) -> Any:
        self.calls += 1
        before = flatten((parser, *arrays))
        try:
            r = self.inner.consume_events(parser, events, *arrays)
        except Exception as exc:
            flatten((exc, *arrays), f"raw{len(self.record)}", self.record)
            raise
        if r is NotImplemented:
            self.declines += 1
            self.declined.append(self.calls - 1)
            diff = first_difference(before, flatten((parser, *arrays)), "before vs after a decline")
            if diff is not None:
                self.dirty_declines.append(diff)
        else:
            flatten((r, *arrays), f"raw{len(self.record)}", self.record)
        return r

    def __getattr__(self, name: str) -> Any:
        return _decline if self.only_consume else getattr(self.inner, name)


def recording_python(record: Flat) -> Callable[..., Any]:
    """``_Parser._consume_events`` that records its result (or exception) and the arrays, as ``Spy`` does."""

    def _consume_events(self: parse._Parser, events: Any, *arrays: array) -> Any:
        try:
            r = PY_CONSUME(self, events, *arrays)
        except Exception as exc:
            flatten((exc, *arrays), f"raw{len(record)}", record)
            raise
        flatten((r, *arrays), f"raw{len(record)}", record)
        return r

    return _consume_events


@dataclass
class Outcome:
    trace: Flat
    calls: int = 0
    declines: int = 0
    declined: list[int] = field(default_factory=list)
    dirty: list[str] = field(default_factory=list)
    raised: str | None = None


def run_batches(
    batches: Sequence[Sequence[Any]],
    knobs: Knobs,
    accel: Any,
    *,
    setup: Callable[[pytest.MonkeyPatch], None] | None = None,
) -> Outcome:
    """Feed the batches to a fresh parser with ``native.ACCEL = Spy(accel)`` (or None), flattening everything."""
    record: Flat = []
    out = Outcome(trace=record)
    spy = Spy(accel, record) if accel is not None else None
    with pytest.MonkeyPatch.context() as mp:
        knobs.patch(mp)
        if setup is not None:
            setup(mp)
        mp.setattr(native, "ACCEL", spy)
        mp.setattr(parse._Parser, "_consume_events", recording_python(record))
        parser = make_parser(knobs)
        for k, batch in enumerate(batches):
            try:
                parser.before_batch()  # as _parse does
                parser.consume(list(batch) if not isinstance(batch, list) else batch)
            except Exception as exc:
                out.raised = f"{type(exc).__name__}: {exc}"
                flatten(exc, f"batch{k}.exception", record)
                flatten(parser, f"batch{k}.after_exception", record)
                break
            flatten(parser, f"batch{k}", record)
    if spy is not None:
        out.calls, out.declines, out.declined, out.dirty = spy.calls, spy.declines, spy.declined, spy.dirty_declines
    return out


def compare(
    batches: Sequence[Sequence[Any]],
    knobs: Knobs,
    accel: Any,
    *,
    setup: Callable[[pytest.MonkeyPatch], None] | None = None,
) -> tuple[Outcome, Outcome]:
    """Run with ``accel`` and with Python; fail with the first difference."""
    py = run_batches(batches, knobs, None, setup=setup)
    acc = run_batches(batches, knobs, accel, setup=setup)
    assert not acc.dirty, acc.dirty[0]
    diff = first_difference(py.trace, acc.trace)
    assert diff is None, diff
    return py, acc


# ---------------------------------------------------------------------------------------------------------------
# Accelerators for testing the comparison: Python itself, and deliberately wrong ones
# ---------------------------------------------------------------------------------------------------------------


class PythonAccel:
    """An 'accelerator' that is the Python loop: must compare equal."""

    def __getattr__(self, name: str) -> Any:
        return _decline

    @staticmethod
    def consume_events(parser: parse._Parser, events: Any, *arrays: array) -> Any:
        return PY_CONSUME(parser, events, *arrays)


class Mutant(PythonAccel):
    """The Python loop, then one perturbation of the state, the arrays or the returned tuple."""

    def __init__(self, how: str) -> None:
        self.how = how

    def consume_events(self, parser: parse._Parser, events: Any, *arrays: array) -> Any:
        if self.how == "dirty decline":
            parser.fd.no_ph += 1
            return NotImplemented
        r = list(PY_CONSUME(parser, events, *arrays))
        PERTURB[self.how](parser, r, arrays)
        return tuple(r)


def _negative_zero_durations(l_dur: array) -> None:
    for i, v in enumerate(l_dur):
        if v == 0:
            l_dur[i] = -0.0


def _int_total(rec: list[Any]) -> None:
    rec[2] = int(rec[2])


def _move_first_last(d: dict[Any, Any]) -> None:
    k0 = next(iter(d))
    d[k0] = d.pop(k0)


def _one_ulp(col: array) -> None:
    col[0] = math.nextafter(col[0], INF)


Perturb = Callable[[parse._Parser, list[Any], tuple[array, ...]], None]
PERTURB: dict[str, Perturb] = {
    "x events as float": lambda _p, r, _a: r.__setitem__(1, float(r[1])),
    "one launch fewer": lambda _p, r, _a: r.__setitem__(0, r[0] - 1),
    "negative zero duration": lambda _p, _r, a: _negative_zero_durations(a[2]),
    "cpu total as int": lambda p, _r, _a: _int_total(next(iter(p.fd.cpu_agg.values()))),
    "cpu_agg order": lambda p, _r, _a: _move_first_last(p.fd.cpu_agg),
    "one ulp in an op start": lambda p, _r, _a: _one_ulp(p.feed.ops.ts),
    "an extra device": lambda p, _r, _a: p.fd.devices.add(10**6),
    "a symbol dropped": lambda p, _r, _a: p.symbols.ids.pop(p.symbols.names[-1]),
    "first invalid reworded": lambda p, _r, _a: setattr(p.fd, "first_invalid", p.fd.first_invalid.upper()),
    "a step lost": lambda p, _r, _a: p.fd.st_num.pop(),
}


def _ordinary_batches() -> list[list[parse.Event]]:
    b1 = [
        E(ph="X", cat="user_annotation", name="ProfilerStep#1", ts=0.0, dur=100.0),
        E(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=0.0),
        E(ph="X", cat="cpu_op", name="enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts=1.5, dur=2.0),
        E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=2.0, dur=3.0, args=A(correlation=1)),
        E(ph="X", cat="cuda_runtime", name="cudaStreamSynchronize", ts=6.0, dur=0.0, args=A(correlation=2)),
        E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=6.5, dur=0.0, args=A(correlation=4)),
        E(
            ph="X",
            cat="kernel",
            name="volta_sgemm_128x64_nn",
            ts=7.5,
            dur=4.0,
            args=A(stream=7, correlation=1, device=0),
        ),
        E(ph="X", cat="cuda_sync", name="Stream Sync", ts=8.0, dur=1.0, args=A(stream=7, correlation=2)),
        E(ph="X", cat="gpu_memcpy", name="Memcpy HtoD", ts=9.0, dur=1.0, args=A(stream=8, correlation=3, bytes=64)),
    ]
    b2 = [
        E(ph="X", cat="cpu_op", name="aten::mm", ts=20.0, dur=3.0),
        E(ph="X", cat="user_annotation", name="fwd", ts=21.0, dur=5.0),
        E(ph="", cat="kernel", name="k", ts=22.0, dur=1.0),
        E(ph="X", cat="cpu_op", name="aten::add", ts=NAN, dur=1.0),
    ]
    return [b1, b2]


MUTATIONS = ["dirty decline", *PERTURB]


def test_the_comparison_accepts_the_python_loop_as_its_own_accelerator() -> None:
    # GIVEN ordinary batches WHEN run with the Python loop as the 'accelerator' and with Python THEN they agree
    py, same = compare(_ordinary_batches(), Knobs(), PythonAccel())
    assert same.calls == 2
    assert same.declines == 0
    assert len(py.trace) > 300  # the comparison sees the whole parser, not just a few counters
    paths = {p for p, _ in py.trace}
    # (the feed is reached first as fd.gpu_feed, the names as its accumulator's; parser.feed is an alias of it)
    assert {
        "batch1.fd.cpu_agg['aten::mm'][2]",
        "batch1.fd.gpu_feed.ops.ts[0]",
        "batch1.fd.gpu_feed.acc.names[0]",
    } <= paths
    assert ("batch1.feed", "alias of batch1.fd.gpu_feed") in py.trace


@pytest.mark.parametrize("how", MUTATIONS)
def test_the_comparison_catches_a_wrong_accelerator(how: str) -> None:
    # GIVEN an accelerator that is the Python loop plus one perturbation (a type, a bit, an order, a count)
    # WHEN compared with Python THEN the comparison fails
    with pytest.raises(AssertionError):
        compare(_ordinary_batches(), Knobs(), Mutant(how))


def test_the_comparison_catches_a_wrong_exception() -> None:
    # GIVEN an accelerator that raises another message than Python's loop on the same input
    class WrongMessage(PythonAccel):
        @staticmethod
        def consume_events(parser: parse._Parser, events: Any, *arrays: array) -> Any:
            try:
                return PY_CONSUME(parser, events, *arrays)
            except TypeError as exc:
                raise TypeError(f"{exc}!") from None

    batches = [[E(ph="X", cat="cpu_op", name=None, ts=1.0, dur=1.0)]]  # type: ignore[arg-type]
    # WHEN compared THEN the comparison fails
    with pytest.raises(AssertionError):
        compare(batches, Knobs(), WrongMessage())


def test_the_comparison_tells_int_from_float_and_the_sign_of_zero() -> None:
    # GIVEN values equal under == but not to the bit WHEN flattened THEN they differ
    assert flatten([1]) != flatten([1.0])
    assert flatten(0.0) != flatten(-0.0)
    assert flatten({1: 0, 2: 0}) != flatten({2: 0, 1: 0})
    assert flatten(NAN) == flatten(float("nan"))
    assert flatten(array("d", [0.0])) != flatten(array("d", [-0.0]))


# ---------------------------------------------------------------------------------------------------------------
# a. The differential on generated events
# ---------------------------------------------------------------------------------------------------------------

UNKNOWN_CATS = ["gpu_kernel_v2", "cuda_event", "python_function", "", "Kernel ", "ac2g"]
CATS = list(parse.CAT_KIND) + UNKNOWN_CATS
COMMON_CATS = [
    "kernel",
    "kernel",
    "gpu_memcpy",
    "cuda_runtime",
    "cpu_op",
    "user_annotation",
    "cuda_sync",
    "gpu_kernel_v2",
    "Kernel ",
]
PHS = ["X", "X", "X", "X", "X", "i", "B", "E", "", "f", "s"]
LONG = "K" * 30  # beyond the small MAX_NAME_CHARS some examples use
NAMES = [
    "aten::mm",
    "aten::mm",
    "volta_sgemm_128x64_nn",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    "Memcpy HtoD (Pageable -> Device)",
    "Memset (Device)",
    "Stream Sync",
    "fwd",
    "ProfilerStep#1",
    "ProfilerStep#2",
    "ProfilerStep#7",
    "ProfilerStep#0",
    "ProfilerStep#",
    "ProfilerStep#x",
    "ProfilerStep#" + "9" * 20,  # 18 digits or more: not a step number
    "ProfilerStep#3 " + "p" * 30,  # a step name beyond a small MAX_NAME_CHARS
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    "DataLoader _next_data " + "d" * 20,
    "DataLoader (not an iterator)",
    LONG,
    LONG + "1",
    "ncclKernel_" + LONG,
    "Memcpy " + LONG,
    "ünïcödé_kernel",
    "核函数",
    "🚀 rocket",
    "lone \udcff surrogate " + "s" * 20,  # bounded_name hashes it with surrogatepass
    parse.OTHER_NAME,
    "",
    MEMORY_EVENT,
    *sorted(HTA_LAUNCH_CALLS),
    *sorted(parse.SYNC_CALLS)[:4],
    "cudaEventQuery",
    "cudaGraphLaunch",
    "cuLaunchKernel_" + LONG,
    "INVALID",
    "triton_poi_fused_add_mul_0",  # op types: followed kernels (their names say nothing of their precision)
    "ampere_bf16_s16816gemm_bf16_128x64",  # not followed (a type word)
]
TS = [
    0.0,
    0.0,
    1.0,
    1.5,
    2.0,
    3.25,
    10.0,
    100.0,
    1000.0,
    -0.0,
    -3.5,
    0.1,
    1e-300,
    -(2.0**52),
    2.0**53 - 1,
    2.0**53,
    2.0**53 + 2,
    -(2.0**53),
    -(2.0**53) + 1,
    1e300,
    INF,
    -INF,
    NAN,
]
DURS = [0.0, 0.0, 1.0, 2.5, 7.0, 100.0, -0.0, -1.0, -1e-9, NAN, 2.0**53, 2.0**53 - 1, 1e300, INF, 0.1]
STREAMS = [
    None,
    7,
    7,
    0,
    -1,
    -7,
    2**31 - 1,
    -(2**31),
    2**31,
    -(2**31) - 1,
    2**40,
    2**63 - 1,
    -(2**63),
    "7",
    "0x7f",
    "0X1F",
    "0xzz",
    "stream 7",
    "abc",
    "-5",
    "99999999999",
    "0x" + "f" * 20,
    "",
    "stream -1",
]
CORRS = [None, 0, 1, 2, 3, 5, -1, 2**31, 2**63 - 1, -(2**63)]
BYTES = [None, 0, 64, 2**40, 2**63 - 1, -5, 0.0, 1.5, 2.0**62, -0.5, 1e18]
# only a built Event carries these (the decoder's I64 / float bounds refuse them): the loops must still agree
BUILT_CORRS = [*CORRS, *BEYOND_INT64]
BUILT_BYTES = [*BYTES, *BEYOND_INT64, 2.0**63, -(2.0**64), NAN, INF]
OCCS = [None, 0.0, 50.0, 100.0, 33.3, -0.0, -1.0, 100.5, 1e9, NAN, INF]
DEVICES = [None, 0, 0, 1, 2, 3, 5, 7, 63, 64, 100, -1, 2**40, 2**70]
TIDS = [None, 1, 2, "stream 3", 1.5]
MEM_INTS = [None, 0, 512, -512, 2**40]
R = msgspec.Raw
# op types (op_types.Collector): External ids and "Input type" lists as JSON text (parse.Args keeps msgspec.Raw;
# b"": absent), of every JSON type and beyond what loose_int reads
EXT_TEXTS = [b"", b"", b"1", b"2", b"3", b"3", b"null", b'"3"', b'" 7 "', b"2.0", b"2.5", b"-0", b"true", b"[3]",
             b'{"a": 1}', b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808", b"1e18", b'"x"',
             b"99999999999999999999", b"1e999", b'"\\u0033"', b"3.0e0"]  # fmt: skip
TYPE_TEXTS = [b"", b"", b'["c10::BFloat16", "c10::BFloat16", "", "Scalar"]', b'["float"]', b'["float","float"]',
              b'["long int"]', b'["signed char", "int"]', b"[]", b"null", b'["float", 1]', b'"float"', b'["c10::Half"]',
              b'[ "c10::Half" , "float" ]', b'["c10::Float8_e4m3fn", "float"]', b'[["float"]]', b'{"a": "float"}',
              b'["c10::BFloat\\u0031\\u0036"]']  # fmt: skip


def _args_strategy(extreme: bool) -> st.SearchStrategy[parse.Args | None]:
    corrs, nbytes = (BUILT_CORRS, BUILT_BYTES) if extreme else (CORRS, BYTES)
    return st.one_of(
        st.none(),
        st.builds(
            A,
            correlation=st.sampled_from(corrs),
            stream=st.sampled_from(STREAMS),
            bytes=st.sampled_from(nbytes),
            occupancy=st.sampled_from(OCCS),
            device=st.sampled_from(DEVICES),
            mem_bytes=st.sampled_from(MEM_INTS),
            mem_allocated=st.sampled_from(MEM_INTS),
            mem_reserved=st.sampled_from(MEM_INTS),
            mem_device_type=st.sampled_from([None, 0, 1, 6]),
            mem_device_id=st.sampled_from([None, 0, 1, -1]),
            external_id=st.sampled_from(EXT_TEXTS).map(R),
            external_id_2021=st.sampled_from(EXT_TEXTS[:8]).map(R),
            input_types=st.sampled_from(TYPE_TEXTS).map(R),
        ),
    )


ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


def _built_events(extreme: bool) -> st.SearchStrategy[parse.Event]:
    return st.builds(
        E,
        ph=st.sampled_from(PHS),
        cat=st.sampled_from(CATS) | st.sampled_from(COMMON_CATS),
        name=st.sampled_from(NAMES) | st.text(max_size=12),
        ts=st.sampled_from(TS) | ANY_FLOAT,
        dur=st.sampled_from(DURS) | ANY_FLOAT,
        args=_args_strategy(extreme),
        tid=st.sampled_from(TIDS),
    )


built_events = _built_events(extreme=False)
# also ints beyond int64 / non-finite floats in correlation and bytes: C may decline such a batch
extreme_events = _built_events(extreme=True)

memory_events = st.builds(
    E,
    ph=st.sampled_from(["i", "i", "X"]),
    cat=st.sampled_from(["cpu_instant_event", "", "cpu_op"]),
    name=st.just(MEMORY_EVENT),
    ts=st.sampled_from(TS),
    args=st.builds(
        A,
        mem_bytes=st.sampled_from(MEM_INTS),
        mem_allocated=st.sampled_from(MEM_INTS),
        mem_reserved=st.sampled_from(MEM_INTS),
        mem_device_type=st.sampled_from([None, 0, 1]),
        mem_device_id=st.sampled_from([None, 0, -1, 3]),
    ),
    tid=st.sampled_from(TIDS),
)

JSON_NAMES = [n for n in NAMES if "\udcff" not in n]  # msgspec refuses a lone surrogate escape
# what a Kineto writer puts in a JSON event (all decodable into parse.Event, so real decoder output)
JSON_TS = [0, 1, 2, 5, 10, 100, 1.5, -3.5, 0.25, 2**53 - 1, 2**53, 2**53 + 1, -(2**53), 1e300, 12345678.125]
JSON_DURS = [0, 1, 2, 3, 0.5, -1, -0.0, 2**53, 1e300]


@st.composite
def json_event(draw: st.DrawFn) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if draw(st.integers(0, 9)):  # sometimes no ph (the decoder's "")
        ev["ph"] = draw(st.sampled_from(PHS))
    ev["cat"] = draw(st.sampled_from(CATS) | st.sampled_from(COMMON_CATS))
    ev["name"] = draw(st.sampled_from(JSON_NAMES))
    if draw(st.integers(0, 9)):  # sometimes no ts (NaN) or no dur (0.0)
        ev["ts"] = draw(st.sampled_from(JSON_TS))
    if draw(st.integers(0, 9)):
        ev["dur"] = draw(st.sampled_from(JSON_DURS))
    ev["pid"] = 1
    ev["tid"] = draw(st.sampled_from([1, 7, "stream 7"]))
    if draw(st.integers(0, 3)):
        args: dict[str, Any] = {}
        for key, pool in (
            ("correlation", [c for c in CORRS if c is not None]),
            ("stream", [s for s in STREAMS if s is not None and (not isinstance(s, int) or abs(s) < 2**63)]),
            ("bytes", [b for b in BYTES if b is not None and not (isinstance(b, float) and b < 0)]),
            ("est. achieved occupancy %", [o for o in OCCS if o is not None and math.isfinite(o)]),
            ("device", [d for d in DEVICES if d is not None]),
            ("Bytes", [512, -512]),
            ("Total Allocated", [1024]),
            ("Total Reserved", [4096]),
            ("Device Type", [0, 1]),
            ("Device Id", [0, -1]),
            ("External id", [1, 2, 3, 3, "3", 2.0, None, True, [3], 2**63]),
            ("external id", [1, 3, "7"]),
            ("Input type", [["c10::BFloat16", "Scalar"], ["float"], ["long int"], [], ["float", 1], "float", None]),
        ):
            if draw(st.integers(0, 2)) == 0:
                args[key] = draw(st.sampled_from(pool))
        ev["args"] = args
    return ev


def decode(events: list[dict[str, Any]]) -> list[parse.Event]:
    """The batch as ``_parse`` decodes it (``_LIST_DECODER``)."""
    out = parse._LIST_DECODER.decode(json.dumps(events, allow_nan=False).encode())
    assert all(type(e) is parse.Event for e in out)
    return out


@st.composite
def regular_events(draw: st.DrawFn) -> list[parse.Event]:
    """A trace-like run: steps, launches and their GPU ops in (mostly) rising time, so the bounded feed hands ops
    over to the accumulator mid-file (and a late step can then abort it)."""
    t = draw(st.sampled_from([0.0, 1000.0, -500.5, 2.0**52]))
    out: list[parse.Event] = []
    for i in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 100.0, -50.0]))
        what = draw(st.sampled_from(["step", "annot step", "launch", "kernel", "kernel", "memcpy", "sync", "cpu"]))
        corr = draw(st.sampled_from([i, i, i - 1, None]))
        stream = draw(st.sampled_from([7, 7, 8, -1, "0x7f", None]))
        dur = draw(st.sampled_from([1.0, 2.5, 0.0, 50.0]))
        if what in ("step", "annot step"):
            num = draw(st.integers(0, 6))
            cat = "cpu_op" if what == "step" else "user_annotation"
            out.append(E(ph="X", cat=cat, name=f"ProfilerStep#{num}", ts=t, dur=dur * 40))
        elif what == "launch":
            name = draw(
                st.sampled_from(["cudaLaunchKernel", "cudaMemcpyAsync", "cudaGraphLaunch", "cudaStreamSynchronize"])
            )
            out.append(E(ph="X", cat="cuda_runtime", name=name, ts=t, dur=dur, args=A(correlation=corr)))
        elif what in ("kernel", "memcpy"):
            cat = "kernel" if what == "kernel" else "gpu_memcpy"
            name = draw(st.sampled_from(NAMES[:6]))
            args = A(stream=stream, correlation=corr, device=draw(st.sampled_from([0, 0, 1, None])), bytes=64)
            out.append(E(ph="X", cat=cat, name=name, ts=t, dur=dur, args=args))
        elif what == "sync":
            out.append(
                E(ph="X", cat="cuda_sync", name="Stream Sync", ts=t, dur=dur, args=A(stream=stream, correlation=corr))
            )
        else:
            out.append(E(ph="X", cat="cpu_op", name=draw(st.sampled_from(NAMES[:3])), ts=t, dur=dur))
    return out


@st.composite
def batch(draw: st.DrawFn) -> list[parse.Event]:
    how = draw(st.sampled_from(["built", "built", "decoded", "decoded", "mixed", "regular", "regular", "regular"]))
    n = draw(st.integers(0, 40))
    if how == "regular":
        evs = draw(regular_events())
        extra = draw(st.lists(built_events | memory_events, max_size=3))
        for e in extra:
            evs.insert(draw(st.integers(0, len(evs))), e)
        return evs
    if how == "built":
        pool = extreme_events if draw(st.integers(0, 4)) == 0 else built_events
        return draw(st.lists(pool | memory_events, min_size=n, max_size=n))
    if how == "decoded":
        return decode(draw(st.lists(json_event(), min_size=n, max_size=n)))
    a = draw(st.lists(built_events, max_size=n))
    b = decode(draw(st.lists(json_event(), max_size=n)))
    return draw(st.permutations(a + b))


knobs_strategy = st.builds(
    Knobs,
    bounded=st.sampled_from([True, True, False]),
    count_sync=st.booleans(),
    launch_calls=st.sampled_from(["hta", "all"]),
    include_last_step=st.booleans(),
    hta_compat=st.booleans(),
    window=st.sampled_from([None, 2, 2, 4]),  # small: ops are handed over to the accumulator mid-file
    chunk=st.sampled_from([None, 1, 1, 3]),
    capacity=st.sampled_from([None, 8]),
    max_name_chars=st.sampled_from([None, 8, 20]),
    names_per_file=st.sampled_from([None, 2, 5]),
    names_total=st.sampled_from([None, 4, 12]),
    max_devices=st.sampled_from([None, 2]),
    max_streams=st.sampled_from([None, 2]),
    max_unknown=st.sampled_from([None, 1]),
    op_types=st.sampled_from([True, True, False]),
    promised=st.booleans(),
    max_ops=st.sampled_from([None, 2]),
    max_pending=st.sampled_from([None, 1]),
    give_up=st.sampled_from([None, 3]),
    dense_ids=st.sampled_from([None, 2]),
)


def _beyond_int64_columns(e: parse.Event) -> bool:
    """A built Event whose correlation or bytes no int64 column holds (C may decline its batch)."""
    a = e.args
    if a is None:
        return False
    c, b = a.correlation, a.bytes
    if c is not None and not -(2**63) <= c < 2**63:
        return True
    if isinstance(b, int):
        return not -(2**63) <= b < 2**63
    return isinstance(b, float) and not -(2.0**63) < b < 2.0**63


@needs_c
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(batches=st.lists(batch(), min_size=1, max_size=4), knobs=knobs_strategy)
def test_c_matches_python_on_generated_batches(batches: list[list[parse.Event]], knobs: Knobs) -> None:
    # GIVEN batches of events of every category, phase, name kind and args value (built, and decoded from JSON),
    # consumed in sequence by a parser as _parse builds it, with name/device/stream bounds sometimes shrunk
    # WHEN consumed with the C loop and with the Python loop
    py, c = compare(batches, knobs, C_MODULE)
    # THEN the returns, appends, exceptions and parser state are the same (compare), and C ran every batch of
    # plain Events (it may decline only one holding a correlation/bytes beyond int64, which the decoder refuses)
    odd = {k for k, b in enumerate(batches) if any(_beyond_int64_columns(e) for e in b)}
    assert set(c.declined) <= odd, f"C declined batches {c.declined} of {c.calls}; only {sorted(odd)} may be"
    event(f"C declined: {bool(c.declined)}")
    event(f"raised: {py.raised[:60] if py.raised else 'no'}")
    event(f"op types: an operator kept {any('.op_types.ops[' in p for p, _ in py.trace)}")
    event(f"op types: a kernel counted {any('.op_types.by_key[' in p for p, _ in py.trace)}")
    event(f"op types: a kernel waiting {any('.op_types.pending_ext[' in p for p, _ in py.trace)}")
    event(f"gpu ops handed over: {any(p.endswith('.gpu_feed.handed') and v != 'int 0' for p, v in py.trace)}")


# op types (op_types.Collector): operators with input types and the kernels they launched, in either order
FOLLOWED = ["triton_poi_fused_add_mul_0", "volta_sgemm_128x64_nn", "ünïcödé_kernel"]
OP_TYPE_KERNELS = [*FOLLOWED, "ampere_bf16_s16816gemm_bf16_128x64", "ncclKernel_AllReduce_RING_LL_Sum_float"]
OP_EXTS = [b"1", b"2", b"3", b"3", b'"2"', b"3.0", b"", b"null", b"true", b"1e999", b'"\\u0031"']


@st.composite
def operators_and_kernels(draw: st.DrawFn) -> list[parse.Event]:
    out: list[parse.Event] = []
    t = draw(st.sampled_from([0.0, 100.0]))
    for _ in range(draw(st.integers(1, 30))):
        t += 1.0
        ext = R(draw(st.sampled_from(OP_EXTS)))
        if draw(st.booleans()):
            cat = draw(st.sampled_from(["cpu_op", "cpu_op", "Operator"]))
            types = R(draw(st.sampled_from(TYPE_TEXTS)))
            out.append(E(ph="X", cat=cat, name="aten::mm", ts=t, dur=1.0, args=A(external_id=ext, input_types=types)))
        else:
            cat = draw(st.sampled_from(["kernel", "kernel", "Kernel", "mtia_ccp_events", "gpu_memcpy"]))
            args = draw(
                st.sampled_from([None, A(stream=7, correlation=1, external_id=ext), A(stream=7, external_id_2021=ext)])
            )
            dur = draw(st.sampled_from([0.0, 1.5, 2.0, -0.0]))
            out.append(E(ph="X", cat=cat, name=draw(st.sampled_from(OP_TYPE_KERNELS)), ts=t, dur=dur, args=args))
    return out


op_type_knobs = st.builds(
    Knobs,
    bounded=st.sampled_from([True, False]),
    promised=st.booleans(),
    max_ops=st.sampled_from([None, None, 2]),
    max_pending=st.sampled_from([None, None, 1]),
    give_up=st.sampled_from([None, 3, 20]),
    names_per_file=st.sampled_from([None, 2]),
    dense_ids=st.sampled_from([None, None, 2, 0]),
)


@needs_c
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(operators_and_kernels(), min_size=1, max_size=4), knobs=op_type_knobs)
def test_c_matches_python_on_operators_and_the_kernels_they_launched(
    batches: list[list[parse.Event]], knobs: Knobs
) -> None:
    # GIVEN operators with input types (of every shape) and kernels carrying their External id (of every JSON
    # type), followed or not, before or after their operator, with the op-types bounds sometimes shrunk
    # WHEN consumed with the C loop and with the Python loop
    py, c = compare(batches, knobs, C_MODULE)
    # THEN the same state, the collector's included (compare), and C declined nothing
    assert not c.declined
    event(f"op types: a kernel counted {any('.op_types.by_key[' in p for p, _ in py.trace)}")
    event(f"op types: a kernel waiting {any('.op_types.pending_ext[' in p for p, _ in py.trace)}")
    event(f"op types: gave up {('batch0.fd.op_types.gave_up', 'bool True') in py.trace}")


@needs_c
def test_an_operators_kernels_are_counted_by_its_class_in_both_loops() -> None:
    # GIVEN a bf16 operator, a kernel it launched after it, and one written before its float operator
    k = "triton_poi_fused_add_mul_0"
    bf16, fp32 = R(TYPE_TEXTS[2]), R(TYPE_TEXTS[3])
    batch = [
        E(ph="X", cat="cpu_op", name="aten::mm", ts=1.0, dur=1.0, args=A(external_id=R(b"5"), input_types=bf16)),
        E(ph="X", cat="kernel", name=k, ts=2.0, dur=3.0, args=A(stream=7, external_id=R(b"5"))),
        E(ph="X", cat="kernel", name=k, ts=3.0, dur=4.0, args=A(stream=7, external_id=R(b'"6"'))),
        E(ph="X", cat="cpu_op", name="aten::mm", ts=4.0, dur=1.0, args=A(external_id=R(b"6"), input_types=fp32)),
    ]
    for accel in (None, C_MODULE):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(native, "ACCEL", accel)
            parser = make_parser(Knobs())
            parser.consume(batch)
            ot = parser.op_types
            assert ot is not None
            ot.finish()
            # THEN each is counted under its operator's class: bf16 then (settled at the end) fp32
            assert ot.result({k}).by_name == {k: {"bf16": [1, 3.0], "fp32": [1, 4.0]}}


@needs_c
@pytest.mark.parametrize("max_name_chars", [8, 20, 4096])
@pytest.mark.parametrize("bounded", [True, False])
def test_c_matches_python_on_a_batch_of_every_pool_value(bounded: bool, max_name_chars: int) -> None:
    # GIVEN one event per (category, name) and one per args value, in two batches, with small name budgets
    # (no infinite ts nor NaN dur: the CPU-op timeline and the accumulator after the loop refuse them, and both
    # batches should run to the end; the generated batches above have them)
    ts_pool = [t for t in TS if not math.isinf(t)]
    dur_pool = [d for d in DURS if not math.isnan(d)]
    evs: list[parse.Event] = []
    for i, cat in enumerate(CATS):
        for j, name in enumerate(NAMES):
            evs.append(
                E(
                    ph="X",
                    cat=cat,
                    name=name,
                    ts=ts_pool[(i + j) % len(ts_pool)],
                    dur=dur_pool[j % len(dur_pool)],
                    args=A(
                        stream=STREAMS[j % len(STREAMS)],
                        correlation=CORRS[i % len(CORRS)],
                        bytes=BYTES[j % len(BYTES)],
                        occupancy=OCCS[i % len(OCCS)],
                        device=DEVICES[(i * 3 + j) % len(DEVICES)],
                    ),
                )
            )
    half = len(evs) // 2
    knobs = Knobs(bounded=bounded, max_name_chars=max_name_chars, names_per_file=10)
    # WHEN consumed with C and with Python THEN everything is the same and C ran both batches
    py, c = compare([evs[:half], evs[half:]], knobs, C_MODULE)
    assert c.calls == 2
    assert c.declines == 0
    assert py.raised is None
    trace = dict(py.trace)
    assert trace["batch1.symbol_budget.events"] != "int 0"  # names were folded into the "other" rows
    if max_name_chars < 4096:
        assert trace["batch1.long_names"] != "int 0"


# ---------------------------------------------------------------------------------------------------------------
# b. Declines: anything but plain Events with decoder-typed fields
# ---------------------------------------------------------------------------------------------------------------

DECLINED: dict[str, Callable[[], Any]] = {
    "a BareEvent": lambda: parse.BareEvent(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0),
    "a decoded BareEvent": lambda: parse._BARE_DECODER.decode(b'{"ph":"X","cat":"cpu_op","name":"x","ts":5,"dur":1}'),
    "ts an int": lambda: E(ph="X", cat="kernel", name="k", ts=5, dur=1.0, args=A(stream=7)),  # type: ignore[arg-type]
    "dur an int": lambda: E(ph="X", cat="cpu_op", name="op", ts=5.0, dur=1),  # type: ignore[arg-type]
    "name None": lambda: E(ph="X", cat="cpu_op", name=None, ts=5.0, dur=1.0),  # type: ignore[arg-type]
    "cat None": lambda: E(ph="X", cat=None, name="k", ts=5.0, dur=1.0),  # type: ignore[arg-type]
    "ph None": lambda: E(ph=None, cat="kernel", name="k", ts=5.0, dur=1.0),  # type: ignore[arg-type]
    "args.stream a float": lambda: E(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0, args=A(stream=7.0)),  # type: ignore[arg-type]
    "args.stream a bool": lambda: E(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0, args=A(stream=True)),
    "args.device a str": lambda: E(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0, args=A(device="0")),  # type: ignore[arg-type]
    "args.correlation a float": lambda: E(
        ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=5.0, dur=1.0, args=A(correlation=1.0)
    ),  # type: ignore[arg-type]
    "args.occupancy an int": lambda: E(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0, args=A(occupancy=50)),  # type: ignore[arg-type]
    "args.bytes a str": lambda: E(ph="X", cat="gpu_memcpy", name="m", ts=5.0, dur=1.0, args=A(bytes="64")),  # type: ignore[arg-type]
    "args a dict": lambda: E(ph="X", cat="kernel", name="k", ts=5.0, dur=1.0, args={"stream": 7}),  # type: ignore[arg-type]
    "name a str subclass": lambda: E(ph="X", cat="cpu_op", name=type("S", (str,), {})("op"), ts=5.0, dur=1.0),
    "a dict": lambda: {"ph": "X", "cat": "cpu_op", "name": "op", "ts": 5.0, "dur": 1.0},
}


def _prefix_batch() -> list[parse.Event]:
    return _ordinary_batches()[0]


@needs_c
@pytest.mark.parametrize("what", list(DECLINED))
def test_c_declines_an_unexpected_element_without_changing_anything(what: str) -> None:
    # GIVEN a parser that has consumed an ordinary batch, and a batch of ordinary events with one odd element
    # (last, so a loop that ran before checking would have changed the state)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "ACCEL", None)
        parser = make_parser(Knobs())
        parser.consume(_prefix_batch())
        odd = [*_ordinary_batches()[1], *_prefix_batch(), DECLINED[what]()]
        arrays = (array("q"), array("d"), array("d"), array("d"), array("b"))
        before = flatten((parser, *arrays))
        # WHEN C's consume_events is called on it directly
        assert C_MODULE is not None
        r = C_MODULE.consume_events(parser, odd, *arrays)
        # THEN it returns NotImplemented and the parser and the four arrays are as they were
        assert r is NotImplemented
        diff = first_difference(before, flatten((parser, *arrays)), "before vs after a decline")
        assert diff is None, diff


@needs_c
@pytest.mark.parametrize("what", list(DECLINED))
def test_consume_gives_pythons_result_when_c_declines(what: str) -> None:
    # GIVEN the same odd batch after an ordinary one
    batches = [_prefix_batch(), [*_ordinary_batches()[1], DECLINED[what]()]]
    # WHEN consumed with the C module and with Python (an error Python raises on it is part of the result)
    _py, c = compare(batches, Knobs(), C_MODULE)
    # THEN the results are the same, the first batch ran in C and the odd one was declined cleanly
    assert c.calls == 2
    assert c.declines == 1


@needs_c
def test_c_declines_a_tuple_of_events_and_other_arrays() -> None:
    # GIVEN ordinary events as a tuple, or arrays of another typecode than consume makes
    parser = make_parser(Knobs())
    evs = _prefix_batch()
    assert C_MODULE is not None
    good = (array("q"), array("d"), array("d"), array("d"), array("b"))
    before = flatten((parser, *good))
    # WHEN C is called with them THEN it declines, changing nothing
    assert C_MODULE.consume_events(parser, tuple(evs), *good) is NotImplemented
    bad = (array("l" if array("l").itemsize != 8 else "i"), array("d"), array("d"), array("d"), array("b"))
    assert C_MODULE.consume_events(parser, evs, *bad) is NotImplemented
    assert (
        C_MODULE.consume_events(parser, evs, array("q"), array("f"), array("d"), array("d"), array("b"))
        is NotImplemented
    )
    assert (
        C_MODULE.consume_events(parser, evs, array("q"), array("d"), array("d"), array("d"), array("q"))
        is NotImplemented
    )
    assert first_difference(before, flatten((parser, *good)), "before vs after") is None
    assert all(len(a) == 0 for a in bad)
    # AND with the right ones it runs
    assert C_MODULE.consume_events(parser, evs, *good) == PY_CONSUME(
        make_parser(Knobs()), evs, *(array("q"), array("d"), array("d"), array("d"), array("b"))
    )


# ---------------------------------------------------------------------------------------------------------------
# c. Exceptions midway: the same exception, and exactly what Python had appended before it
# ---------------------------------------------------------------------------------------------------------------


def _step_abort_batches() -> list[list[parse.Event]]:
    """Steps, then enough ops for the bounded feed (window 2, chunk 2) to hand some over, then a step that starts
    before the last one seen: feed.step raises StreamingAbort in the middle of the last batch."""
    first = [E(ph="X", cat="user_annotation", name=f"ProfilerStep#{i}", ts=100.0 * i, dur=100.0) for i in range(1, 4)]
    for i in range(12):
        first.append(
            E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=10.0 * i, dur=1.0, args=A(correlation=i))
        )
        first.append(
            E(ph="X", cat="kernel", name="k", ts=10.0 * i + 3, dur=2.0, args=A(stream=7, correlation=i, device=0))
        )
    last = [
        E(ph="X", cat="cpu_op", name="aten::mm", ts=400.0, dur=1.0),
        E(ph="X", cat="kernel", name="k2", ts=401.0, dur=1.0, args=A(stream=7, correlation=50)),
        E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=402.0, dur=1.0, args=A(correlation=51)),
        E(ph="X", cat="cuda_sync", name="Stream Sync", ts=403.0, dur=1.0, args=A(stream=7)),
        E(ph="", cat="cpu_op", name="no ph", ts=403.5, dur=1.0),
        E(ph="B", cat="cpu_op", name="begin", ts=403.5, dur=1.0),
        E(ph="X", cat="gpu_memset", name="Memset (Device)", ts=404.0, dur=1.0, args=A(stream=7, device=0)),
        E(ph="X", cat="cpu_op", name="enumerate(DataLoader)#x.__next__", ts=404.5, dur=1.0),
        E(ph="X", cat="user_annotation", name="fwd", ts=404.7, dur=1.0),
        E(ph="X", cat="cpu_op", name="ProfilerStep#0", ts=5.0, dur=1.0),  # out of start order: aborts here
        E(ph="X", cat="cpu_op", name="aten::add", ts=405.0, dur=1.0),
        E(ph="X", cat="kernel", name="k3", ts=406.0, dur=1.0, args=A(stream=7)),
    ]
    return [first, last]


@needs_c
@pytest.mark.parametrize("cat", ["cpu_op", "user_annotation"])
def test_a_step_out_of_order_after_a_hand_over_raises_the_same_in_c(cat: str) -> None:
    # GIVEN a bounded feed that has handed GPU ops over, then a ProfilerStep (a CPU op or an annotation) that
    # starts before the steps seen, in the middle of a batch
    batches = _step_abort_batches()
    batches[1][9] = E(ph="X", cat=cat, name="ProfilerStep#0", ts=5.0, dur=1.0)
    knobs = Knobs(bounded=True, window=2, chunk=2)
    probe = make_parser(knobs)
    probe.consume(batches[0])
    assert probe.feed.handed > 0  # the premise: ops were handed over before the late step
    # WHEN consumed with C and with Python
    py, c = compare(batches, knobs, C_MODULE)
    # THEN both raise StreamingAbort there, having appended and counted exactly the same before it
    assert py.raised is not None
    assert py.raised.startswith("StreamingAbort: ProfilerSteps are out of start order")
    assert c.calls == 2
    assert c.declines == 0
    trace = dict(py.trace)
    assert trace["batch1.after_exception.fd.no_ph"] == "int 1"  # counted before the abort, not after
    assert trace["batch1.after_exception.fd.begin_end"] == "int 1"


def _helper_batch() -> list[parse.Event]:
    """Every helper the loop calls, each more than once (without sync rows needing _stream_of: see below)."""
    long = "L" * 30
    return [
        E(ph="X", cat="gpu_kernel_v2", name="u", ts=1.0, dur=1.0, args=A(stream=7)),  # _unknown
        E(ph="i", cat="cpu_instant_event", name=MEMORY_EVENT, ts=1.0, args=A(mem_bytes=512, mem_allocated=1024), tid=1),
        E(ph="X", cat="cpu_op", name="aten::mm", ts=NAN, dur=1.0),  # invalid_event
        E(ph="X", cat="cpu_op", name="aten::mm", ts=2.0, dur=1.0),  # _new_cpu_rec
        E(ph="X", cat="cpu_op", name=long, ts=2.5, dur=1.0),  # _bounded, _new_cpu_rec
        E(ph="X", cat="cpu_op", name="ProfilerStep#1", ts=3.0, dur=50.0),  # _step
        E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=4.0, dur=1.0, args=A(correlation=1)),  # _new_runtime
        E(ph="X", cat="cuda_runtime", name="cudaDeviceSynchronize", ts=4.5, dur=1.0, args=A(correlation=2)),
        E(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=4.7, dur=1.0, args=A(correlation=3)),  # cached
        E(ph="X", cat="cuda_runtime", name="cudaMemcpyAsync", ts=4.8, dur=1.0, args=A(correlation=4)),
        E(
            ph="X", cat="kernel", name="volta_sgemm", ts=5.0, dur=1.0, args=A(stream="0x7f", correlation=1, device=0)
        ),  # _gpu_name_id, _stream_of
        E(ph="X", cat="kernel", name=long + "k", ts=5.5, dur=1.0, args=A(stream="stream 9", correlation=3)),
        E(ph="X", cat="kernel", name="late", ts=2.0**60, dur=1.0, args=A(stream=7)),  # invalid_event (range)
        E(ph="X", cat="user_annotation", name="fwd", ts=6.0, dur=1.0),  # _annot_class, _new_symbol
        E(ph="X", cat="user_annotation", name="ProfilerStep#2", ts=53.0, dur=50.0),  # _annot_class, _step
        E(ph="X", cat="gpu_user_annotation", name=long + "a", ts=6.5, dur=1.0),  # _bounded, _annot_class
        E(ph="X", cat="cuda_sync", name="Context Sync", ts=7.0, dur=1.0, args=A(stream=7)),  # _new_symbol
        E(
            ph="X", cat="gpu_memcpy", name="Memcpy DtoD", ts=8.0, dur=1.0, args=A(stream=None, bytes=64)
        ),  # _stream_of(None)
        E(ph="X", cat="cpu_op", name="aten::add", ts=9.0, dur=-1.0),  # invalid_event (negative)
        E(ph="X", cat="cpu_op", name="aten::add", ts=9.5, dur=1.0),
    ]


HELPERS = {
    "_unknown": 1,
    "memory_event": 1,
    "invalid_event": 3,
    "_new_cpu_rec": 3,
    "_bounded": 4,
    "_step": 2,
    "_new_runtime": 2,
    "_gpu_name_id": 3,
    "_stream_of": 3,
    "_annot_class": 3,
    "_new_symbol": 7,
}


@needs_c
@pytest.mark.parametrize(("helper", "nth"), [(h, k) for h, n in HELPERS.items() for k in range(1, n + 1)], ids=str)
def test_a_helper_raising_midway_leaves_the_same_state_in_c(helper: str, nth: int) -> None:
    # GIVEN a batch after an ordinary one, and a _Parser helper that raises on its nth call in the batch
    calls: dict[str, Any] = {"n": 0, "armed": False}
    real = getattr(parse._Parser, helper)

    def setup(mp: pytest.MonkeyPatch) -> None:
        calls["n"], calls["armed"] = 0, False

        def failing(self: parse._Parser, *a: Any, **kw: Any) -> Any:
            if calls["armed"]:
                calls["n"] += 1
                if calls["n"] == nth:
                    raise RuntimeError(f"{helper} failed on call {nth}")
            return real(self, *a, **kw)

        mp.setattr(parse._Parser, helper, failing)

    first = _prefix_batch()
    second = _helper_batch()

    def run(accel: Any) -> Outcome:
        def armed_setup(mp: pytest.MonkeyPatch) -> None:
            setup(mp)
            real_consume = parse._Parser.consume

            def consume(self: parse._Parser, events: Any) -> None:
                calls["armed"] = events is second
                try:
                    real_consume(self, events)
                finally:
                    calls["armed"] = False

            mp.setattr(parse._Parser, "consume", consume)

        return run_batches([first, second], Knobs(max_name_chars=20, bounded=False), accel, setup=armed_setup)

    # WHEN consumed with C and with Python
    py = run(None)
    c = run(C_MODULE)
    # THEN both raise it, and the parser holds exactly what Python had appended and counted before it
    assert py.raised == f"RuntimeError: {helper} failed on call {nth}", py.raised
    assert not c.dirty
    diff = first_difference(py.trace, c.trace)
    assert diff is None, diff


@needs_c
def test_stream_of_raising_on_a_sync_row_leaves_the_same_state_in_c() -> None:
    # GIVEN a cuda_sync row whose string stream makes _Parser._stream_of raise (a monkeypatched failure)
    batches = [
        _prefix_batch(),
        [
            E(ph="X", cat="cpu_op", name="aten::mm", ts=30.0, dur=1.0),
            E(ph="X", cat="cuda_sync", name="Stream Sync", ts=31.0, dur=1.0, args=A(stream="stream 7", correlation=9)),
            E(ph="X", cat="cpu_op", name="aten::add", ts=32.0, dur=1.0),
        ],
    ]

    def setup(mp: pytest.MonkeyPatch) -> None:
        def failing(self: parse._Parser, raw: Any) -> int:
            raise RuntimeError("_stream_of failed")

        mp.setattr(parse._Parser, "_stream_of", failing)

    # WHEN consumed with C and with Python THEN both raise, leaving the same op columns (Python appends the
    # row's start, ts, dur, name and kind before it computes the stream)
    py, _c = compare(batches, Knobs(), C_MODULE, setup=setup)
    assert py.raised == "RuntimeError: _stream_of failed"


@needs_c
@pytest.mark.parametrize("cat", ["cuda_sync", "kernel"])
def test_a_stream_of_more_than_4300_digits_raises_the_same_in_c(cat: str) -> None:
    # GIVEN a decoded GPU row (a kernel, or a sync row HTA counts) whose args.stream is a string of 5000 digits:
    # _stream_of's int() refuses it (Python's int max str digits)
    raw = {"ph": "X", "cat": cat, "name": "Stream Sync", "ts": 31, "dur": 1, "args": {"stream": "9" * 5000}}
    batches = [_prefix_batch(), decode([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 30, "dur": 1}, raw])]
    # WHEN consumed with C and with Python THEN both raise the same ValueError and leave the same state
    py, _c = compare(batches, Knobs(), C_MODULE)
    assert py.raised is not None
    assert py.raised.startswith("ValueError: Exceeds the limit (4300 digits)")


@needs_c
@pytest.mark.parametrize("value", BEYOND_INT64, ids=["2**63", "-2**63-1", "2**70"])
@pytest.mark.parametrize("where", ["kernel correlation", "kernel bytes", "sync correlation", "runtime correlation"])
def test_an_int_beyond_int64_raises_the_same_in_c(where: str, value: int) -> None:
    # GIVEN a built Event whose correlation or bytes is beyond int64 (the decoder's I64 bound keeps these out of
    # decoded events; a caller building Events can still pass one)
    args = {
        "kernel correlation": A(stream=7, correlation=value, device=3),
        "kernel bytes": A(stream=7, bytes=value, device=3),
        "sync correlation": A(stream=7, correlation=value),
        "runtime correlation": A(correlation=value),
    }[where]
    cat = {"kernel": "kernel", "sync": "cuda_sync", "runtime": "cuda_runtime"}[where.split(maxsplit=1)[0]]
    batches = [_prefix_batch(), [E(ph="X", cat=cat, name="cudaLaunchKernel", ts=31.0, dur=1.0, args=args)]]
    # WHEN consumed with C and with Python THEN both raise the same OverflowError, leaving the same state
    py, _c = compare(batches, Knobs(), C_MODULE)
    assert py.raised is not None
    assert py.raised.startswith("OverflowError")


@needs_c
def test_a_float_bytes_of_2_to_the_63_raises_the_same_in_c() -> None:
    # GIVEN a built memcpy whose bytes is the float 2.0**63 (int() of it is beyond int64; the decoder bounds
    # float bytes to 2**62)
    batches = [
        _prefix_batch(),
        [E(ph="X", cat="gpu_memcpy", name="m", ts=31.0, dur=1.0, args=A(stream=7, bytes=2.0**63, device=4))],
    ]
    # WHEN consumed with C and with Python THEN the same OverflowError and the same state
    py, _c = compare(batches, Knobs(), C_MODULE)
    assert py.raised is not None
    assert py.raised.startswith("OverflowError")


@needs_c
@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_a_non_finite_float_bytes_raises_the_same_in_c(value: float) -> None:
    # GIVEN a built kernel whose bytes is NaN or infinite (int() refuses it before anything is appended)
    batches = [
        _prefix_batch(),
        [E(ph="X", cat="kernel", name="k", ts=31.0, dur=1.0, args=A(stream=7, bytes=value, device=4))],
    ]
    # WHEN consumed with C and with Python THEN the same exception and the same state
    py, _c = compare(batches, Knobs(), C_MODULE)
    assert py.raised is not None
    assert py.raised.split(":")[0] in ("ValueError", "OverflowError")


@needs_c
@pytest.mark.parametrize("dur", [NAN, -NAN], ids=["nan", "-nan"])
@pytest.mark.parametrize("call", ["cudaGraphLaunch", "cudaLaunchKernel", "cudaStreamSynchronize"])
def test_a_nan_launch_duration_gives_the_same_bits_in_c(call: str, dur: float) -> None:
    # GIVEN a built runtime call with a NaN duration (only a built Event has one: JSON has no NaN): a launch
    # outside HTA's set (stored as -dur - 1.0), one in it (dur), and a sync call (NaN)
    batches = [[E(ph="X", cat="cuda_runtime", name=call, ts=1.0, dur=dur, args=A(correlation=1))]]
    # WHEN consumed with C and with Python THEN the launch duration appended has the same bits (NaN's sign too)
    py, c = compare(batches, Knobs(), C_MODULE)
    assert c.calls == 1
    assert c.declines == 0
    assert py.raised is None


# ---------------------------------------------------------------------------------------------------------------
# d. End to end: the summary JSON, byte for byte
# ---------------------------------------------------------------------------------------------------------------


def summary_text(sources: Callable[[], list[Any]], opts: AnalysisOptions | None = None) -> str:
    """The CLI's serialisation (profstack/cli/analyze.py) of the summary, or the error analyze raises."""
    try:
        result = analyze(sources(), opts)
    except Exception as exc:
        return f"analyze raised {type(exc).__name__}: {exc}"
    try:
        return json.dumps(engine_neutral(result.summary), indent=2, allow_nan=False) + "\n"
    except ValueError as exc:
        return f"ValueError: {exc}"


@contextmanager
def accelerated(accel: Any) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "ACCEL", accel)
        yield


def both_texts(
    sources: Callable[[], list[Any]], opts: AnalysisOptions | None = None, *, buffered: bool = False
) -> tuple[str, str, Spy]:
    """(Python's summary, C's summary, the spy that watched C's consume_events: the whole module runs)."""
    assert C_MODULE is not None
    real_parse = engine.parse_source

    def buffered_parse(*a: Any, **kw: Any) -> Any:
        kw["stream_gpu"] = False
        return real_parse(*a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        if buffered:
            mp.setattr(engine, "parse_source", buffered_parse)
        with accelerated(None):
            py = summary_text(sources, opts)
        spy = Spy(C_MODULE, [], only_consume=False)
        with accelerated(spy):
            c = summary_text(sources, opts)
    return py, c, spy


def _bytes_source(data: bytes) -> Callable[[], list[Any]]:
    return lambda: [BytesTraceSource(data=data, name="rank0.pt.trace.json")]


def _kineto(events: list[dict[str, Any]]) -> Callable[[], list[Any]]:
    return _bytes_source(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode())


def _busy_mixed() -> Callable[[], list[Any]]:
    """Every path of the loop in one decodable trace: steps (CPU op and annotation), DataLoader, syncs, memory,
    GPU annotations, unknown categories, begin/end and ph-less rows, bad times, string streams."""
    b = TraceBuilder()
    for i in range(4):
        t0 = 1000.0 * i
        b.step(i, t0, 1000.0)
        b.cpu("aten::mm", t0 + 1, 50.0)
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 2, 30.0)
        b.cpu(f"ProfilerStep#{i}", t0, 999.0)
        b.gpu("volta_sgemm_128x64_nn", t0 + 5, t0 + 60, 300.0, occupancy=None)
        b.gpu("Memcpy HtoD (Pageable -> Device)", t0 + 6, t0 + 400, 10.0, cat="gpu_memcpy", bytes=4096, stream=8)
        b.runtime("cudaStreamSynchronize", t0 + 500, 20.0, corr=9000 + i)
        b.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Sync",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 505,
                "dur": 10.0,
                "args": {"stream": 7, "correlation": 9000 + i},
            }
        )
        b.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Context Sync",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 520,
                "dur": 5.0,
                "args": {"stream": -1},
            }
        )
        b.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Event Sync",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 530,
                "dur": 5.0,
                "args": {"stream": "0x7f"},
            }
        )
        b.events.append(
            {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": t0 + 60, "dur": 200.0}
        )
        b.events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "name": MEMORY_EVENT,
                "pid": 1,
                "tid": 1,
                "ts": t0 + 3,
                "args": {
                    "Bytes": 512,
                    "Total Allocated": 512 * (i + 1),
                    "Total Reserved": 4096,
                    "Device Type": 1,
                    "Device Id": 0,
                },
            }
        )
        b.events.append(
            {
                "ph": "X",
                "cat": "gpu_kernel_v2",
                "name": "u",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 9,
                "dur": 1.0,
                "args": {"device": 0},
            }
        )
        b.events.append({"ph": "B", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": t0 + 9})
        b.events.append({"cat": "cpu_op", "name": "no ph", "pid": 1, "tid": 1, "ts": t0 + 9, "dur": 1})
        b.events.append({"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": t0 + 9, "dur": -1})
        b.events.append(kernel_event(7000 + i, 2.0**53 + i, 1.0, name="late"))
        b.events.append(kernel_event(7100 + i, t0 + 700, 2.0, name="ünïcödé", stream="stream 3"))  # type: ignore[arg-type]
    return _bytes_source(b.to_bytes())


def _steps_after_ops() -> Callable[[], list[Any]]:
    events = [step_event(1, 0, 100), step_event(2, 100, 100)]
    for i in range(30):
        events += [launch_event(i, 10 * i), kernel_event(i, 10 * i + 3)]
    events.append(step_event(3, 200, 100))
    events.append(step_event(0, 5, 1))
    return _kineto(events)


SYNTHETIC: dict[str, Callable[[Path], Callable[[], list[Any]]]] = {
    "busy steps": lambda _t: _bytes_source(busy_steps(6).to_bytes()),
    "schedule cycles": lambda _t: _kineto(cycle_events(0, 40) + cycle_events(200, 40)),
    "every path of the loop": lambda _t: _busy_mixed(),
    "steps after and before the ops": lambda _t: _steps_after_ops(),
    "distinct kernel names": lambda t: lambda: discover_sources([distinct_kernel_names(t / "names.json.gz", 3000)]),
    "one huge name": lambda t: lambda: discover_sources([one_huge_name(t / "huge.json.gz", 200_000, after=300)]),
}


@needs_c
@pytest.mark.parametrize("mode", ["streaming", "buffered"])
@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_traces_give_the_same_summary_with_c(
    name: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a synthetic trace (hostile_traces / synth builders, and one with every path of the loop), with small
    # name bounds so folding and shortening happen
    sources = SYNTHETIC[name](tmp_path)
    monkeypatch.setattr(parse, "MAX_NAMES_PER_FILE", 1000)
    monkeypatch.setattr(parse, "MAX_NAME_CHARS", 64)
    for opts in (
        AnalysisOptions(),
        AnalysisOptions(count_sync=False, launch_calls="all", include_last_step=True, hta_compat=True),
    ):
        # WHEN analysed with the C module and with Python
        py, c, spy = both_texts(sources, opts, buffered=mode == "buffered")
        # THEN the summary JSON is the same byte for byte, and C's consume_events ran on every batch
        assert not spy.dirty_declines, spy.dirty_declines[0]
        if py != c:
            a, b = py.splitlines(), c.splitlines()
            i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            pytest.fail(f"summaries differ at line {i + 1}:\n python: {a[i : i + 3]}\n C:      {b[i : i + 3]}")
        assert py.startswith("{"), py[:300]
        assert spy.calls > 0, (spy.calls, spy.declines)
        assert spy.declines == 0, (spy.calls, spy.declines)
