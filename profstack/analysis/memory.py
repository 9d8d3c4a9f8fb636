"""Memory from ``profile_memory=True`` traces: the ``[memory]`` instant events, per device.

Each event (``ph: i``, ``cat: cpu_instant_event``, ``name: [memory]``) is one allocation (``Bytes`` > 0) or free
(< 0) on a device (``Device Type``: c10::DeviceType, 0 = CPU, 1 = CUDA, 12 = XPU, ...; ``Device Id``), with the
allocator's totals after it (``Total Allocated``, ``Total Reserved``). The parse keeps them in compact columns
(``MemoryEvents``, at most ``MAX_EVENTS``; beyond, they are counted and the result says it is incomplete). The
operator that allocated is the innermost CPU op on the same thread around the event, allocation primitives
(``aten::empty``, ``aten::empty_strided``, ``aten::resize_``, ...) aside; Kineto writes the memory events after
the ops, so ``attribute`` reads the trace a second time for its CPU ops, only when it has memory events, and
keeps nothing per op.
"""

from __future__ import annotations

import bisect
import heapq
import math
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import IO, Any, cast

import msgspec

from profstack.analysis import native
from profstack.analysis.errors import TraceError
from profstack.analysis.jsonstream import BATCH_BYTES, EventStream
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource

MEMORY_EVENT = "[memory]"
#: The memory section's byte budget, which keeps a file's peak RSS within ~150 MB at any size (bench/README.md,
#: target 4): the event columns (``EVENT_BYTES``) and the attribution's per-thread spans and best durations
#: (``ATTRIBUTION_BYTES``) of every event kept. (The op log keeps at most ``SPILL_OPS`` ops in memory.)
MEMORY_BUDGET_BYTES = 64 << 20
EVENT_BYTES = 8 + 4 + 4 + 8 + 8 + 8 + 4  # MemoryEvents' columns: ts, tid, dev, nbytes, alloc, reserved, op
ATTRIBUTION_BYTES = 12 + 8  # memory.attribute*'s spans (time, index) and best duration of each event
OP_BYTES = 8 + 8 + 4 + 4  # OpLog's columns: ts, dur, name, tid
#: events kept in columns: beyond, they are counted and the result says it is incomplete (1,048,576)
MAX_EVENTS = MEMORY_BUDGET_BYTES // (EVENT_BYTES + ATTRIBUTION_BYTES)
#: c10::DeviceType (c10/core/DeviceType.h) of the backends whose allocators profile_memory reports
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 9: "xla", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia", 20: "privateuse1"}


def device_label(key: int) -> str:
    dtype, did = divmod(key, 1 << 16)
    name = DEVICE_TYPES.get(dtype, f"device-type-{dtype}")
    return name if did == 0xFFFF else f"{name}:{did}"


def is_accelerator(label: str) -> bool:
    """A ``device_label`` of device memory (every device type but the CPU's)."""
    return label.split(":", 1)[0] != "cpu"


def device_key(dtype: int | None, did: int | None) -> int:
    """One int per (device type, id); id -1 (the CPU's) -> 0xFFFF."""
    t = dtype if isinstance(dtype, int) and 0 <= dtype < 1 << 15 else 0x7FFF
    i = did if isinstance(did, int) and 0 <= did < 0xFFFF else 0xFFFF
    return t * (1 << 16) + i


class MemoryEvents:
    """``[memory]`` events of one file in columns, times on the file's clock (µs)."""

    __slots__ = ("alloc", "dev", "nbytes", "op", "reserved", "seen", "tid", "tids", "ts")

    def __init__(self) -> None:
        self.ts: array[float] = array("d")
        self.tid: array[int] = array("i")  # index into ``tids``
        self.dev: array[int] = array("i")  # device_key: < 2**31
        self.nbytes: array[int] = array("q")
        self.alloc: array[int] = array("q")  # total allocated after the event
        self.reserved: array[int] = array("q")  # total reserved after the event (-1 unknown)
        self.op: array[int] = array("i")  # interned name id of the allocating op (-1 unknown)
        self.tids: dict[Any, int] = {}
        self.seen = 0  # events seen (> len when beyond MAX_EVENTS)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def complete(self) -> bool:
        return self.seen == len(self.ts)

    def add(self, ts: float, tid: Any, *, dtype: Any, did: Any, nbytes: Any, alloc: Any, reserved: Any) -> None:
        self.seen += 1
        if len(self.ts) >= MAX_EVENTS or not isinstance(nbytes, int | float) or ts != ts:  # noqa: PLR0124
            return
        t = self.tids.get(tid)
        if t is None:
            t = self.tids[tid] = len(self.tids)
        self.ts.append(ts)
        self.tid.append(t)
        self.dev.append(device_key(dtype, did))
        self.nbytes.append(int(nbytes))
        self.alloc.append(int(alloc) if isinstance(alloc, int | float) else -1)
        self.reserved.append(int(reserved) if isinstance(reserved, int | float) else -1)
        self.op.append(-1)

    def extend(self, other: MemoryEvents, shift: float, tid_offset: int) -> None:
        """Append another file's events (clock moved by ``shift``, thread ids kept apart by ``tid_offset``)."""
        self.ts.extend(t + shift for t in other.ts)
        self.tid.extend(t + tid_offset for t in other.tid)
        for name in ("dev", "nbytes", "alloc", "reserved", "op"):
            getattr(self, name).extend(getattr(other, name))
        self.seen += other.seen


#: the op log's bounds: beyond them the file's attribution reads it again (``attribute``). 8M ops is 192 MB of
#: temporary file (a 4 GB trace of df_index_resolver has 4.1M ops); in memory it holds ``SPILL_OPS`` (1.6 MB)
MAX_LOGGED_OPS = 8_000_000
MAX_LOGGED_NAMES = 1 << 16
#: ops the log holds in memory: the parser moves them to its temporary file once it holds more, after a batch
SPILL_OPS = 1 << 16


class OpLog:
    """The timed CPU ops of one file (allocation primitives aside) as the main pass's C reader read them, so
    that ``attribute_log`` finds each ``[memory]`` event's op without reading the file again.

    Kept only for a file whose header says ``profile_memory`` (PyTorch writes it before ``traceEvents``), so
    other traces pay nothing. It holds exactly the ops ``attribute``'s read would find only while every batch
    went through the C reader, whose events are the ones msgspec decodes (a float tid, which ``_Op`` does not
    decode, is not logged); the parser drops it (``drop``) at the first batch read another way, at the first
    error, or beyond ``max_ops`` ops or ``MAX_LOGGED_NAMES`` names, and the file is then read again."""

    __slots__ = (
        "cap",
        "dur",
        "max_ops",
        "name",
        "name_ids",
        "names",
        "spill_file",
        "spilled",
        "tid",
        "tid_ids",
        "tids",
        "ts",
        "valid",
    )

    def __init__(self, max_ops: int = MAX_LOGGED_OPS) -> None:
        self.ts: array[float] = array("d")
        self.dur: array[float] = array("d")
        self.name: array[int] = array("i")  # index into ``names``
        self.tid: array[int] = array("i")  # index into ``tids``
        self.names: list[str] = []
        self.name_ids: dict[str, int] = {}  # -1: an allocation primitive (not logged)
        self.tids: list[int | str | None] = []
        self.tid_ids: dict[int | str | None, int] = {}
        self.cap = max_ops  # ops logged in all
        self.max_ops = max_ops  # ops the arrays in memory may hold (the C reader reads it): cap - spilled
        self.spill_file: IO[bytes] | None = None  # the ops moved out of memory (``spill``), in order
        self.spilled = 0
        self.valid = True

    def __len__(self) -> int:
        return self.spilled + len(self.ts)

    def spill(self) -> None:
        """Move the ops held in memory to the log's temporary file (an unnamed one, removed when closed), as one
        record: their count, then the four columns. Where it cannot be written (no space), the log is dropped
        and the file will be read again."""
        n = len(self.ts)
        try:
            if self.spill_file is None:
                self.spill_file = tempfile.TemporaryFile(prefix="profstack-oplog-")  # noqa: SIM115 - closed by close()
            f = self.spill_file
            f.write(n.to_bytes(8, "little"))
            for col in (self.ts, self.dur, self.name, self.tid):
                col.tofile(f)
        except OSError:
            self.drop()
            return
        self.spilled += n
        self.max_ops = self.cap - self.spilled
        self.ts, self.dur, self.name, self.tid = array("d"), array("d"), array("i"), array("i")

    def columns(self) -> Iterator[tuple[array[float], array[float], array[int], array[int]]]:
        """The ops logged, in order: each spilled record, then those in memory. Raises OSError or EOFError where
        the temporary file cannot be read back whole."""
        f = self.spill_file
        if f is not None:
            f.flush()
            f.seek(0)
            read = 0
            while read < self.spilled:
                n = int.from_bytes(f.read(8), "little")
                if not 0 < n <= self.spilled - read:
                    raise EOFError("op log: a spilled record does not fit the ops spilled")
                cols = array("d"), array("d"), array("i"), array("i")
                for col in cols:
                    col.fromfile(f, n)
                read += n
                yield cols
        yield self.ts, self.dur, self.name, self.tid

    def close(self) -> None:
        """Remove the temporary file (if any); the ops in it are gone."""
        if self.spill_file is not None:
            self.spill_file.close()
            self.spill_file = None

    def _new_name(self, name: str) -> int:
        """The index of a name met first: -1 for an allocation primitive, -2 beyond ``MAX_LOGGED_NAMES``."""
        if name.startswith(_PRIMITIVES):
            k = -1
        elif len(self.names) >= MAX_LOGGED_NAMES:
            return -2
        else:
            k = len(self.names)
            self.names.append(name)
        self.name_ids[name] = k
        return k

    def add(self, events: Iterable[Any]) -> None:
        """The ops of events msgspec decoded (``parse.Event``), as the C reader logs its own."""
        for e in events:
            if e.ph != "X" or e.cat not in _CPU_CATS or e.ts != e.ts or isinstance(e.tid, float):
                continue
            k = self.name_ids.get(e.name)
            if k is None:
                k = self._new_name(e.name)
            if k == -1:
                continue
            t = self.tid_ids.get(e.tid)
            if t is None:
                t = self.tid_ids[e.tid] = len(self.tids)
                self.tids.append(e.tid)
            if k < -1 or len(self.ts) >= self.max_ops:  # max_ops: the room left in memory (cap - spilled)
                self.drop()
                return
            self.ts.append(e.ts)
            self.dur.append(e.dur)
            self.name.append(k)
            self.tid.append(t)

    def drop(self) -> None:
        """Incomplete: forget the ops (the file is read again)."""
        self.valid = False
        self.close()
        self.spilled = 0
        self.ts, self.dur, self.name, self.tid = array("d"), array("d"), array("i"), array("i")
        self.names, self.name_ids, self.tids, self.tid_ids = [], {}, [], {}


class _Op(msgspec.Struct, gc=False):
    cat: str = ""
    name: str = ""
    ph: str = ""
    ts: float | None = None
    dur: float = 0.0
    tid: int | str | None = None


_OP = msgspec.json.Decoder(_Op)
_OPS = msgspec.json.Decoder(list[_Op])
_CPU_CATS = frozenset(("cpu_op", "Operator"))  # parse.CAT_KIND's CPU-op categories
#: allocation primitives: the allocating operator is the innermost op around them that is not one
_PRIMITIVES = ("aten::empty", "aten::new_empty", "aten::resize_")


#: per thread of ``MemoryEvents.tids``: its events' times, in order, and their indices (None: no events)
Spans = list[tuple["array[float]", "array[int]"] | None]


def gather(column: array[Any], idx: array[int]) -> array[Any]:
    """``column[i] for i in idx`` as an array of the column's type: in C where it is built (``_gpuaccel.gather``,
    a copy per item; the Python map below costs ~130 ns an item, 40 ms of a 100 MB trace's 100 ms section)."""
    accel = getattr(native.ACCEL, "gather", None)
    if accel is not None:
        got = accel(column, idx)
        if got is not NotImplemented:
            return cast("array[Any]", got)
    return array(column.typecode, map(column.__getitem__, idx))


#: events a step of the memory section and the time sort hold at once: they work a chunk at a time, so that
#: their transient memory is a few MB, not tens of bytes an event (1M events: 73 MB for the section before)
CHUNK = 1 << 16


def chunks(idx: array[int]) -> Iterator[array[int]]:
    """``idx`` in slices of at most ``CHUNK`` items."""
    for a in range(0, len(idx), CHUNK):
        yield idx[a : a + CHUNK]


def in_time_order(ts: array[float], idx: array[int]) -> array[int]:
    """Increasing indices ``idx`` ordered by their times in ``ts``: a stable sort (equal times keep index order),
    ``idx`` itself where they already are in order. A chunk's times at a time: the check gathers one chunk, and
    the sort orders each chunk and merges them (``heapq.merge`` is stable: it takes equal keys from the earlier
    chunk first), so 4 bytes an event are made, not a Python int and a float key per event."""
    prev = -math.inf
    for part in chunks(idx):
        times = gather(ts, part)
        if times[0] < prev or any(map(float.__gt__, times, times[1:])):
            break
        prev = times[-1]
    else:
        return idx
    runs = [array("i", sorted(part, key=ts.__getitem__)) for part in chunks(idx)]
    return runs[0] if len(runs) == 1 else array("i", heapq.merge(*runs, key=ts.__getitem__))


def _spans(mem: MemoryEvents) -> Spans:
    """Per thread, its events' indices ordered by (time, index) and their times, in arrays (12 bytes an event:
    a 1 GB trace has ~500k events, and a sort key per event as Python tuples took ~60 MB)."""
    by_thread: list[array[int] | None] = [None] * len(mem.tids)
    for i, t in enumerate(mem.tid):
        idx = by_thread[t]
        if idx is None:
            idx = by_thread[t] = array("i")
        idx.append(i)
    spans: Spans = [None] * len(mem.tids)
    for t, idx in enumerate(by_thread):
        if idx is not None:
            ordered = in_time_order(mem.ts, idx)
            spans[t] = (gather(mem.ts, ordered), ordered)
    return spans


def _apply_op(
    span: tuple[array[float], array[int]],
    ts: float,
    dur: float,
    name: Any,
    *,
    best: array[float],
    op: array[int],
    intern: Any,
) -> None:
    """One op on its thread: each event within [ts, ts + dur] that no shorter op holds gets it (the name
    interned once, when first needed). ``csrc/``'s ``apply_one``."""
    times, idx = span
    nid = -1
    for k in range(bisect.bisect_left(times, ts), bisect.bisect_right(times, ts + dur)):
        j = idx[k]
        if dur < best[j]:
            if nid < 0:
                nid = intern(name)
            best[j] = dur
            op[j] = nid


def _apply(events: list[_Op], mem: MemoryEvents, spans: Spans, best: array[float], intern: Any) -> None:
    """Each timed CPU op (allocation primitives aside) is the allocating op of the events on its thread within
    it that no shorter op holds. ``_gpuaccel.attribute_ops`` is this loop, read from a batch's JSON."""
    tids = mem.tids
    for ev in events:
        if ev.ph != "X" or ev.ts is None or ev.cat not in _CPU_CATS or ev.name.startswith(_PRIMITIVES):
            continue
        t = tids.get(ev.tid)
        if t is None:
            continue
        span = spans[t]
        if span is not None:
            _apply_op(span, ev.ts, ev.dur, ev.name, best=best, op=mem.op, intern=intern)


def attribute(source: TraceSource, mem: MemoryEvents, intern: Any, *, max_decompressed: int, max_event: int) -> bool:
    """Set ``mem.op`` to the innermost CPU op (same thread) around each event. Streams the trace once
    more, a batch at a time like the main pass: read by the C reader where it is built and takes the batch, else
    decoded by msgspec; a batch that does not decode (an event whose fields do not fit ``_Op``) is re-split by the
    stream and its events are decoded one by one, the ones that do not fit skipped, so one odd event costs speed,
    never the ops around it. False when the trace could not be read to the end (the ops found so far are kept)."""
    if not len(mem):
        return True
    spans = _spans(mem)
    best = array("d", [float("inf")]) * len(mem)
    accel = native.ACCEL
    read = getattr(accel, "attribute_ops", None)
    try:
        with source.open() as fh:
            stream = EventStream(
                iter_chunks(fh, max_decompressed=max_decompressed),
                max_value_bytes=max_event,
                read_size_hint=BATCH_BYTES,
            )
            for batch in stream.batches():
                if isinstance(batch, memoryview):
                    if read is not None and read(batch, mem.tids, spans, best, mem.op, intern) is None:
                        continue
                    try:
                        events = _OPS.decode(batch)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        stream.reject()
                        continue
                else:
                    events = []
                    for raw in batch:
                        try:
                            events.append(_OP.decode(raw))
                        except (msgspec.DecodeError, msgspec.ValidationError):
                            continue
                _apply(events, mem, spans, best, intern)
    except TraceError:
        return False
    return True


def attribute_log(log: OpLog, mem: MemoryEvents, intern: Any) -> bool:
    """``attribute`` from the ops the main pass logged: the same ops in the same order, so the same answers and
    the same names interned in the same order, without reading the file again. Each op stands alone, so the
    spilled records and the ops in memory are applied one after another. False where the log's temporary file
    could not be read back: the caller then reads the file again, which sets the op of every event these ops
    set (it finds them all, and the innermost op around an event among more)."""
    if not len(mem):
        return True
    spans = _spans(mem)
    best = array("d", [float("inf")]) * len(mem)
    threads = array("i", [mem.tids.get(tid, -1) for tid in log.tids])  # per logged thread: its index in mem.tids
    apply = getattr(native.ACCEL, "attribute_log", None)
    names = log.names
    try:
        for ts_col, dur_col, name_col, tid_col in log.columns():
            if (
                apply is not None
                and apply(ts_col, dur_col, name_col, tid_col, threads, spans, best, mem.op, names, intern) is None
            ):
                continue
            for ts, dur, name, tid in zip(ts_col, dur_col, name_col, tid_col, strict=True):
                t = threads[tid]
                span = spans[t] if t >= 0 else None
                if span is not None:
                    _apply_op(span, ts, dur, names[name], best=best, op=mem.op, intern=intern)
    except (OSError, EOFError):
        return False
    return True
