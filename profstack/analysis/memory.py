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
from array import array
from collections.abc import Iterator
from typing import Any

import msgspec

from profstack.analysis.errors import TraceError
from profstack.analysis.jsonstream import BATCH_BYTES, EventStream
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource

MEMORY_EVENT = "[memory]"
MAX_EVENTS = 2_000_000
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
        self.dev: array[int] = array("q")
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


def _cpu_ops(source: TraceSource, max_decompressed: int, max_event: int) -> Iterator[_Op]:
    """The CPU ops of the trace (allocation primitives aside), streamed.

    Decoded a batch at a time, like the main pass: a batch that does not decode (an event whose fields do not
    fit ``_Op``) is re-split by the stream and its events are decoded one by one, the ones that do not fit
    skipped, so one odd event costs speed, never the ops around it."""
    with source.open() as fh:
        stream = EventStream(
            iter_chunks(fh, max_decompressed=max_decompressed), max_value_bytes=max_event, read_size_hint=BATCH_BYTES
        )
        for batch in stream.batches():
            if isinstance(batch, memoryview):
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
            yield from [
                ev
                for ev in events
                if ev.ph == "X" and ev.ts is not None and ev.cat in _CPU_CATS and not ev.name.startswith(_PRIMITIVES)
            ]


def attribute(source: TraceSource, mem: MemoryEvents, intern: Any, *, max_decompressed: int, max_event: int) -> bool:
    """Set ``mem.op`` to the innermost CPU op (same thread) around each event. Streams the trace once
    more; False when it could not be read to the end (the ops found so far are kept)."""
    if not len(mem):
        return True
    by_tid: dict[int, tuple[list[float], list[int]]] = {}
    order = sorted(range(len(mem)), key=lambda i: (mem.tid[i], mem.ts[i]))
    for i in order:
        lst = by_tid.setdefault(mem.tid[i], ([], []))
        lst[0].append(mem.ts[i])
        lst[1].append(i)
    best = [float("inf")] * len(mem)
    try:
        for ev in _cpu_ops(source, max_decompressed, max_event):
            t = mem.tids.get(ev.tid)
            if t is None or t not in by_tid:
                continue
            times, idx = by_tid[t]
            ts = ev.ts if ev.ts is not None else 0.0  # _cpu_ops yields only timed ops
            lo = bisect.bisect_left(times, ts)
            hi = bisect.bisect_right(times, ts + ev.dur)
            nid = -1
            for k in range(lo, hi):
                j = idx[k]
                if ev.dur < best[j]:
                    if nid < 0:
                        nid = intern(ev.name)
                    best[j] = ev.dur
                    mem.op[j] = nid
    except TraceError:
        return False
    return True
