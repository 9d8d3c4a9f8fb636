"""Decode trace events (msgspec typed Structs, only the fields we use) into compact per-file arrays.

Peak memory is bounded by: one decoded batch, the symbol table, per-name aggregates, and a few
bytes per GPU op / launch / step / annotation held in ``array.array`` columns.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, BinaryIO, NamedTuple

import msgspec

from profstack.analysis import classify, native, op_types, unrecorded
from profstack.analysis import memory as memory_columns
from profstack.analysis.completeness import at_stake
from profstack.analysis.errors import (
    EmptyTraceError,
    GpuActivityNotRecordedError,
    HostSpansCutError,
    InvalidEventError,
    MemoryEventsCutError,
    MultipleDevicesError,
    NegativeDurationError,
    NotKinetoError,
    StepWindowError,
    TraceError,
    TruncatedTraceError,
    UnknownDeviceCategoryError,
)
from profstack.analysis.gpu import (
    HTA_LAUNCH_CALLS,
    MAX_STREAMS,
    OP_KERNEL,
    OP_MEMCPY,
    OP_MEMSET,
    OP_SYNC,
    OTHER_STREAM,
    GpuAccumulator,
    GpuFeed,
    Selection,
    StepFrontier,
    StreamingAbort,
    dedupe_steps,
    select,
    start_ns,
)
from profstack.analysis.jsonstream import BATCH_BYTES, EventStream
from profstack.analysis.loose import DECIMAL as _DECIMAL
from profstack.analysis.loose import loose_int
from profstack.analysis.memory import MEMORY_EVENT, MemoryEvents, OpLog, attribute, attribute_log
from profstack.analysis.op_types import Collector as OpTypesCollector
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource, rank_from_name
from profstack.analysis.timebins import TimeBins

NAN = math.nan


NO_RAW = msgspec.Raw()  # Args.input_types when the event has no "Input type"

# integers we store in int64 columns; a larger value fails validation and the event keeps no args
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]


class Args(msgspec.Struct, gc=False):
    correlation: I64 | None = None
    stream: I64 | str | None = None  # Context Sync rows carry 4294967295; pointer-sized ids exist
    bytes: I64 | Annotated[float, msgspec.Meta(ge=0, le=2.0**62)] | None = None
    occupancy: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    device: int | None = None
    # profile_memory's [memory] instant events (profstack.analysis.memory)
    mem_bytes: I64 | None = msgspec.field(default=None, name="Bytes")
    mem_allocated: I64 | None = msgspec.field(default=None, name="Total Allocated")
    mem_reserved: I64 | None = msgspec.field(default=None, name="Total Reserved")
    mem_device_type: I32 | None = msgspec.field(default=None, name="Device Type")
    mem_device_id: I32 | None = msgspec.field(default=None, name="Device Id")
    # what the op types need (profstack.analysis.op_types), kept as JSON text (msgspec.Raw, which never fails the
    # event's validation: the other fields are read as before whatever these hold): an operator's and a kernel's
    # External id (read where used, by loose_int's rule: ROCm writes it as text) and an operator's input types
    # (classed once per distinct text)
    external_id: msgspec.Raw = msgspec.field(default=NO_RAW, name="External id")
    external_id_2021: msgspec.Raw = msgspec.field(default=NO_RAW, name="external id")  # 2021 GPU rows
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")


class Event(msgspec.Struct, gc=False):
    """Only what the analyzers use: pid/tid are not decoded (GPU rows carry args.stream/device)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = NAN
    dur: float = 0.0
    args: Args | None = None
    tid: int | float | str | None = None  # read for [memory] events only (the thread whose op allocated)


class BareEvent(msgspec.Struct, gc=False):
    """Fallback when ``args`` has ill-typed fields: keep the event, drop its args."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = NAN
    dur: float = 0.0
    # never decoded (the JSON key is renamed away) so the hot loop can read e.args on either type
    args: None = msgspec.field(default=None, name="profstack: args not decoded")
    tid: None = msgspec.field(default=None, name="profstack: tid not decoded")


MAX_TIME_US = float(2**53)  # ~285 years in µs: a GPU op beyond it is corrupt (and would overflow int64)
_LIST_DECODER = msgspec.json.Decoder(list[Event])
_ONE_DECODER = msgspec.json.Decoder(Event)
_BARE_DECODER = msgspec.json.Decoder(BareEvent)


class _LooseEvent(msgspec.Struct, gc=False):
    """An event whose args did not validate: the same fields, its args as plain JSON values, read field by field."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = NAN
    dur: float = 0.0
    args: dict[str, Any] | None = None
    tid: int | float | str | None = None


_LOOSE_DECODER = msgspec.json.Decoder(_LooseEvent)
#: Args field -> JSON key, for the fields read loosely (msgspec's renames included)
_ARG_KEYS = {f: (Args.__struct_encode_fields__[i]) for i, f in enumerate(Args.__struct_fields__)}
_INT_ARGS = frozenset({"correlation", "device", "mem_bytes", "mem_allocated", "mem_reserved"})
_I32_ARGS = frozenset({"mem_device_type", "mem_device_id"})
_RAW_ARGS = frozenset({"external_id", "external_id_2021", "input_types"})  # kept as JSON text (op_types)


def loose_args(raw: dict[str, Any]) -> tuple[Args, list[str]]:
    """Args from JSON values by `loose_int`'s rule (and numbers-as-strings for the float fields); the names of
    the fields that stayed unreadable."""
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for name, key in _ARG_KEYS.items():
        if key not in raw or raw[key] is None:
            continue
        value = raw[key]
        if name in _RAW_ARGS:  # the value as JSON text again (the C reader declines such an event)
            values[name] = msgspec.Raw(msgspec.json.encode(value))
            continue
        if name in _INT_ARGS or name in _I32_ARGS:
            got: Any = loose_int(value, 32 if name in _I32_ARGS else 64)
        elif name == "stream" and isinstance(value, str) and not _DECIMAL.fullmatch(value.strip()):
            got = value  # a named stream ("stream 7"), as Args keeps it
        elif name == "stream":
            got = loose_int(value)
        elif name == "bytes":
            got = loose_int(value)
            if got is None and isinstance(value, float) and math.isfinite(value) and 0 <= value <= 2.0**62:
                got = value
        else:  # occupancy: a float, or a number written as a string
            got = _loose_float(value)
        if got is None:
            unknown.append(key)
        else:
            values[name] = got
    return Args(**values), unknown


def event_from_loose(raw: bytes) -> Event:
    """The Event the loose rule reads from one event's bytes (``_Parser.decode_one``'s loose branch, without its
    counting): what the C reader hands a Python helper for an event it read by ``loose_int`` (it counts it)."""
    loose = _LOOSE_DECODER.decode(raw)
    args = loose_args(loose.args)[0] if loose.args is not None else None
    return Event(loose.ph, loose.cat, loose.name, loose.ts, loose.dur, args, loose.tid)


def _loose_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


_CTRL = bytes(range(32))
_CTRL_TABLE = bytes.maketrans(_CTRL, b" " * 32)

# event kinds (dispatch by category)
K_CPU = 1
K_RUNTIME = 2
K_KERNEL = 3
K_MEMCPY = 4
K_MEMSET = 5
K_ANNOT = 6
K_GPU_ANNOT = 7
K_GPU_SYNC = 8

# Categories are Kineto's ActivityType names (libkineto/include/ActivityType.h, written by output_json.cpp as
# ``cat``), plus the capitalised 2021 names. Device work of every backend Kineto supports arrives as
# ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` (CUDA, ROCm, XPU, PrivateUse1 plugins) or ``mtia_ccp_events``
# (MTIA, which HTA 0.6 analyses like kernels); host-side runtime/driver calls per backend below.
CAT_KIND: dict[str, int] = {
    "cpu_op": K_CPU,
    "Operator": K_CPU,
    "user_annotation": K_ANNOT,
    "cuda_runtime": K_RUNTIME,
    "Runtime": K_RUNTIME,
    "cuda_driver": K_RUNTIME,
    "mtia_runtime": K_RUNTIME,
    "xpu_runtime": K_RUNTIME,
    "xpu_driver": K_RUNTIME,
    "privateuse1_runtime": K_RUNTIME,
    "privateuse1_driver": K_RUNTIME,
    "hpu_op": K_RUNTIME,
    "glow_runtime": K_RUNTIME,
    "kernel": K_KERNEL,
    "Kernel": K_KERNEL,
    "mtia_ccp_events": K_KERNEL,
    "gpu_memcpy": K_MEMCPY,
    "Memcpy": K_MEMCPY,
    "gpu_memset": K_MEMSET,
    "Memset": K_MEMSET,
    "gpu_user_annotation": K_GPU_ANNOT,
    "cuda_sync": K_GPU_SYNC,
    "xpu_sync": K_GPU_SYNC,
}

# Kineto categories that are not device work (or that no analysis here uses): never reported as unknown
KNOWN_OTHER_CATEGORIES = frozenset(
    {
        "external_correlation",
        "cpu_instant_event",
        "python_function",
        "overhead",
        "mtia_insight",
        "mtia_counters",
        "cuda_event",
        "cuda_profiler_range",
        "collective_comm",
        "xpu_scope_profiler",
        "Trace",
        "Python",
        "python",
        "Memory",
        "ac2g",
        "async_cpu_to_gpu",
        "fwdbwd",
        "async",
        "async_gpu",
        "forward_backward",
        "gpu_mem",
    }
)
MAX_UNKNOWN_CATEGORIES = 64  # distinct unknown device-like categories remembered per file
MAX_DEVICES = 64  # distinct device ids remembered per file (a hostile trace could name one per op)

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipStreamWaitEvent",
    }
)
# Runtime/driver calls that never enqueue a kernel, memcpy or memset (queries, event and stream
# bookkeeping, allocation, synchronisation): no GPU op carries their correlation id, so the join skips
# them. About half of all runtime calls in real traces (cudaEventQuery alone is a fifth). Anything not
# matched here, including launch APIs this list has never seen, is kept.
_NO_GPU_WORK = re.compile(
    r"Get|Query|IsCapturing|PeekAt|Occupancy|Attribute|Version|Synchronize|WaitEvent|EventRecord|ElapsedTime"
    r"|Create|Destroy|Malloc|Free|Register|SetDevice|^INVALID$"
)


def enqueues_gpu_work(call: str) -> bool:
    """False for runtime/driver calls that cannot be the launch of a GPU op (see ``_NO_GPU_WORK``)."""
    return _NO_GPU_WORK.search(call) is None


#: calls that always enqueue GPU work (a kernel, a graph, an MTIA function): one without a GPU row lost its row. Every
#: other launch call may enqueue nothing (a copy or memset of 0 bytes, a host function): CUPTI then writes no row
_KERNEL_LAUNCH = re.compile(r"(?i)launch\w*kernel|graphlaunch|^cuLaunch|^runFunction")
#: added to a join class of 0 or 1 for a launch call that may enqueue nothing (``_KERNEL_LAUNCH``): 3 and 4
JOIN_MAYBE_EMPTY = 3


def _join_class(call: str) -> int:
    """0: in HTA's launch-call set; 1: another call that may launch GPU work; 2: a sync call; -1: not joined. A launch
    call (0 or 1) that may enqueue nothing has ``JOIN_MAYBE_EMPTY`` added (3, 4): ``join_class % 3`` is the class."""
    if call in HTA_LAUNCH_CALLS:
        klass = 0
    elif enqueues_gpu_work(call):
        klass = 1
    elif call in SYNC_CALLS:
        return 2
    else:
        return -1
    return klass if _KERNEL_LAUNCH.search(call) else klass + JOIN_MAYBE_EMPTY


STEP_PREFIX = "ProfilerStep#"
_STEP_RE = re.compile(r"ProfilerStep#(\d+)")
_DIGITS = re.compile(r"-?\d+")

# per-name record flags for CPU-side events
F_PLAIN = 0
F_STEP = 1
F_DATALOADER = 2


def is_dataloader_name(name: str) -> bool:
    """torch's DataLoader iterator annotations, e.g. ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``,
    and TensorFlow's wait for its next tf.data batch (``IteratorGetNext`` in an XSpace: classify.is_input_wait_name)."""
    return (
        "DataLoader" in name and ("enumerate(" in name or "__next__" in name or "_next_data" in name)
    ) or classify.is_input_wait_name(name)


# ---- bounded names (issue 11): hostile traces must not grow memory, summary or report with their names ----
#: A name longer than this (characters) is cut, and a hash of the whole name appended, so distinct long
#: names stay distinct.
MAX_NAME_CHARS = 4096  # real kernel names reach ~2,000 (samples/traces/hta/trace_filter)
_NAME_HASH_CHARS = 12
#: Distinct names one file may add to each per-name table (symbols, CPU ops, runtime calls, annotations);
#: the rest are folded into one "other" row per table (per kernel class for GPU ops), counted and warned about.
MAX_NAMES_PER_FILE = 16_384
#: Distinct names in one analysis (all files): a second bound when many files each bring their own.
MAX_NAMES_TOTAL = 131_072
_FOLDED_DISTINCT_CAP = 100_000  # distinct folded names are counted exactly up to this many
#: A JSON string longer than this (bytes) is cut in the decompressed byte stream, before the JSON splitter
#: buffers it: one 200 MB name would otherwise be held several times over. Above any real Kineto name
#: seen (long C++ template kernel names reach a few KB); a cut string is then bounded like any long name.
MAX_STRING_BYTES = 16 << 10
OTHER_NAME = "[other: names beyond ProfStack's per-file limit]"
# folded GPU ops keep their kernel class (classify.kernel_type reads the name): comm / memory / compute
_OTHER_GPU_NAMES = {
    "comm": "ncclKernel [other communication kernels beyond ProfStack's per-file name limit]",
    "memcpy": "Memcpy [other copies beyond ProfStack's per-file name limit]",
    "memset": "Memset [other sets beyond ProfStack's per-file name limit]",
    "compute": "[other kernels beyond ProfStack's per-file name limit]",
}
_COMM_NAME = re.compile(r"^nccl.*Kernel|ncclKernel|^hccl|^rccl")  # classify.kernel_type's communication class


def name_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_NAME_HASH_CHARS // 2).hexdigest()


def bounded_name(name: str) -> str:
    """``name``, or its first characters plus ``…#<hash of the whole name>`` when it is too long."""
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = name_hash(name.encode("utf-8", "surrogatepass"))
    return f"{name[: MAX_NAME_CHARS - _NAME_HASH_CHARS - 2]}…#{digest}"


class NamesFoldedError(TraceError):
    """A file had more distinct names than ProfStack keeps: the rest are one "other" row (recorded, not fatal)."""

    partial_ok = True


class LongNamesError(TraceError):
    """Names longer than ProfStack keeps were shortened (distinct names stay distinct; recorded, not fatal)."""

    partial_ok = True


class SymbolTable:
    """Interned names shared by every file of one analysis, so per-file arrays merge by id.

    Names are bounded (``bounded_name``); at most ``MAX_NAMES_TOTAL`` are kept, then ``intern_new``
    refuses (the caller folds the name into an "other" row)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ids: dict[str, int] = {}

    def intern(self, name: str) -> int:
        name = bounded_name(name)
        nid = self.ids.get(name)
        if nid is None:
            nid = len(self.names)
            self.ids[name] = nid
            self.names.append(name)
        return nid

    def full(self) -> bool:
        return len(self.names) >= MAX_NAMES_TOTAL


class _NameBudget:
    """How many distinct names one file has added to one table, and what was folded beyond the limit."""

    __slots__ = ("events", "hashes", "limit", "used")

    def __init__(self) -> None:
        self.limit = MAX_NAMES_PER_FILE
        self.used = 0
        self.events = 0  # events whose name was folded
        self.hashes: set[int] = set()  # distinct folded names (up to _FOLDED_DISTINCT_CAP)

    def take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def fold(self, name: str) -> None:
        self.events += 1
        if len(self.hashes) < _FOLDED_DISTINCT_CAP:
            self.hashes.add(hash(name))


class _LongStrings:
    """Cut JSON strings longer than ``MAX_STRING_BYTES`` out of the decompressed bytes, before the JSON
    splitter buffers them. A cut string keeps its first ``MAX_STRING_BYTES`` and ends in
    `` [cut: +N bytes #<hash of the cut part>]``, so distinct long strings stay distinct.

    Exact about JSON strings (quotes and backslash escapes, across chunk boundaries). Chunks without a
    backslash whose strings are all provably short (every ``MAX_STRING_BYTES / 2`` window holds a quote, and
    the quote-free run across the chunk boundary is short) pass unchanged after a few memchr passes; only
    other chunks are scanned byte-exactly.

    Whether a chunk boundary lies inside a string is only needed before a chunk that is scanned exactly.
    Without ``resolve`` the filter counts the quotes of every fast chunk to know it (a byte loop, ~10 % of the
    whole analysis' instructions). With ``resolve`` (``EventStream.unparsed``, the splitter the output goes
    to) a fast chunk leaves the state unknown, and before an exact chunk the state is recovered from the
    bytes the splitter has not parsed yet, which begin outside any string: only those few bytes are scanned
    (at most once each)."""

    _WINDOW = MAX_STRING_BYTES // 2
    _QUOTE_OR_BACKSLASH = re.compile(rb'["\\]')

    def __init__(self, resolve: Callable[[], tuple[int, bytes]] | None = None) -> None:
        self.in_string = False
        self.open_len = 0  # content bytes of the open string so far
        self.escaped = False  # the next byte is escaped (a chunk ended inside an escape)
        self.cutting: Any = None  # the hasher of the string being cut
        self.dropped = 0  # bytes cut from the current string
        self.strings_cut = 0
        #: (offset of a position outside any string, the output from there on): see the class docstring
        self.resolve = resolve
        self.known = True  # the state above holds at ``known_at`` (the end of the output when True)
        self.known_at = 0
        self.emitted = 0  # bytes output so far
        self.gap = 0  # bytes output since the last quote byte: bounds the open string, if any

    def filter(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if self._fast(chunk):
                out = chunk
            else:
                if not self.known:
                    self._recover()
                out = self._exact(chunk)
            if not out:
                continue
            n = len(out)
            last = out.rfind(b'"')
            self.gap = n - last - 1 if last >= 0 else self.gap + n
            self.emitted += n
            if self.known:
                self.known_at = self.emitted
            yield out

    def _fast(self, chunk: bytes) -> bool:
        """True (state updated) when ``chunk`` needs no cut; False leaves the state for ``_exact``."""
        if self.cutting is not None or self.escaped or b"\\" in chunk:
            return False
        n = len(chunk)
        first = chunk.find(b'"')
        run = first if first >= 0 else n  # leading quote-free bytes: continue an open string, if any
        if self.known:
            if self.in_string and self.open_len + run >= MAX_STRING_BYTES:
                return False
        elif self.gap + run >= MAX_STRING_BYTES:
            return False  # state unknown: the run since the last quote could be one string
        w = self._WINDOW
        find = chunk.find
        for start in range(0, n - w + 1, w):
            if find(b'"', start, start + w) < 0:
                return False  # a long quote-free run: maybe a long string
        if self.resolve is not None:
            # no string in or across this chunk reaches MAX_STRING_BYTES (each is a quote-free run, and every
            # run is shorter): pass it without learning whether its end is inside a string
            self.known = False
            return True
        quotes = chunk.count(b'"')
        in_string = self.in_string != bool(quotes & 1)
        if in_string:
            last = chunk.rfind(b'"')
            open_len = (self.open_len + n) if last < 0 else n - last - 1
            if open_len >= MAX_STRING_BYTES:
                return False
            self.open_len = open_len
        self.in_string = in_string
        return True

    def _recover(self) -> None:
        """Learn the state at the end of the output so far (``resolve``: bytes that start outside a string)."""
        if self.resolve is None:  # the state is unknown only in resolve mode
            raise RuntimeError("_LongStrings: state unknown without a resolver")
        offset, tail = self.resolve()
        if offset + len(tail) != self.emitted:
            raise RuntimeError(
                f"_LongStrings: the splitter holds bytes {offset}..{offset + len(tail)}, not up to {self.emitted}"
            )
        if self.known_at >= offset:
            data = tail[self.known_at - offset :]  # the state fields still hold the state at known_at
        else:
            data = tail
            self.in_string, self.open_len, self.escaped = False, 0, False
        self._track(data)
        self.known = True

    def _track(self, data: bytes) -> None:
        """Advance the state over output bytes (nothing is cut: they already passed the filter)."""
        n = len(data)
        if b"\\" not in data and not self.escaped:
            quotes = data.count(b'"')
            if quotes & 1:
                self.in_string = not self.in_string
            if self.in_string:
                self.open_len = self.open_len + n if not quotes else n - data.rfind(b'"') - 1
            return
        in_string, open_len, escaped = self.in_string, self.open_len, self.escaped
        search = self._QUOTE_OR_BACKSLASH.search
        i = 0
        while i < n:
            if escaped:
                escaped = False
                open_len += 1
                i += 1
                continue
            if not in_string:
                q = data.find(b'"', i)
                if q < 0:
                    break
                in_string, open_len, i = True, 0, q + 1
                continue
            m = search(data, i)
            if m is None:
                open_len += n - i
                break
            e = m.start()
            open_len += e - i
            if data[e] == 0x5C:  # backslash: content, and so is the byte it escapes
                open_len += 1
                escaped = True
            else:
                in_string = False
            i = e + 1
        self.in_string, self.open_len, self.escaped = in_string, open_len, escaped

    def _content(self, chunk: bytes, a: int, b: int, out: list[bytes], start: int) -> int:
        """Account string content ``chunk[a:b]``; returns where the emitted region now starts (-1: cutting)."""
        if self.cutting is not None:
            self.cutting.update(chunk[a:b])
            self.dropped += b - a
            return -1
        if self.open_len + (b - a) < MAX_STRING_BYTES:
            self.open_len += b - a
            return start
        c = max(a + (MAX_STRING_BYTES - self.open_len), start)
        # never split an escape sequence or a UTF-8 character at the cut
        tail = chunk.find(b"\\", max(start, c - 6), c)
        if tail >= 0:
            c = tail
            run = 0
            while c - run - 1 >= start and chunk[c - run - 1] == 0x5C:
                run += 1
            if run & 1:
                c -= 1
        while c > start and chunk[c - 1] & 0xC0 == 0x80:
            c -= 1
        if c > start and chunk[c - 1] >= 0xC0:
            c -= 1
        out.append(chunk[start:c])
        self.cutting = hashlib.blake2b(chunk[c:b], digest_size=_NAME_HASH_CHARS // 2)
        self.dropped = b - c
        self.open_len = MAX_STRING_BYTES
        return -1

    def _exact(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        n = len(chunk)
        start = -1 if self.cutting is not None else 0  # where the region still to emit begins
        i = 0
        while i < n:
            if not self.in_string:
                q = chunk.find(b'"', i)
                if q < 0:
                    break
                self.in_string = True
                self.open_len = 0
                i = q + 1
                continue
            if self.escaped:
                self.escaped = False
                start = self._content(chunk, i, i + 1, out, start)
                i += 1
                continue
            m = self._QUOTE_OR_BACKSLASH.search(chunk, i)
            end = m.start() if m is not None else n
            if end > i:
                start = self._content(chunk, i, end, out, start)
            if m is None:
                break
            if chunk[end] == 0x5C:  # backslash: it and the byte it escapes are content
                start = self._content(chunk, end, end + 1, out, start)
                if end + 1 < n:
                    start = self._content(chunk, end + 1, end + 2, out, start)
                    i = end + 2
                else:
                    self.escaped = True
                    i = n
                continue
            # the closing quote
            if self.cutting is not None:
                out.append(f" [cut: +{self.dropped} bytes #{self.cutting.hexdigest()}]".encode())
                self.cutting = None
                self.strings_cut += 1
                start = end
            self.in_string = False
            i = end + 1
        if start >= 0:
            out.append(chunk[start:])
        return b"".join(out)


@dataclass
class FileData:
    """Everything one trace file contributes, in compact columns. Times in µs, file-local clock."""

    name: str
    size_bytes: int | None
    rank: int = 0
    rank_source: str = "default"
    time_offset_us: float = 0.0  # add to file-local ts for an absolute clock
    meta: dict[str, Any] = field(default_factory=dict)
    error: TraceError | None = None
    warnings: list[TraceError] = field(default_factory=list)
    events: int = 0
    x_events: int = 0
    invalid_events: int = 0
    negative_durations: int = 0
    first_invalid: str = ""
    cpu_ops: int = 0
    runtime_calls: int = 0
    n_kernels: int = 0
    n_memcpy: int = 0
    n_memset: int = 0
    gpu_fractional: int = 0  # GPU rows whose ts or dur has a fraction of a µs (none: a whole-µs writer)
    n_launch_records: int = 0  # runtime/driver calls that may launch GPU work and carry a correlation id
    first_gpu_ts: float | None = None
    launch_span: tuple[float, float] | None = None  # first launch start, last launch end (file clock)
    # GPU ops and launches: streaming, analysed during the parse (``gpu``); buffered, held in ``gpu_feed``
    # until the rank is analysed (``metrics.analyze_rank`` finishes it)
    gpu_feed: GpuFeed | None = None
    gpu: GpuAccumulator | None = None
    gpu_mode: str = "buffered"
    gpu_mode_reason: str | None = None
    # host synchronisation calls
    s_name: array[int] = field(default_factory=lambda: array("i"))
    s_ts: array[float] = field(default_factory=lambda: array("d"))
    s_dur: array[float] = field(default_factory=lambda: array("d"))
    # GPU-side cuda_sync events
    gs_ts: array[float] = field(default_factory=lambda: array("d"))
    gs_dur: array[float] = field(default_factory=lambda: array("d"))
    # annotations (record_function) on CPU (gpu=0) and GPU (gpu=1)
    a_name: array[int] = field(default_factory=lambda: array("i"))
    a_gpu: array[int] = field(default_factory=lambda: array("b"))
    a_ts: array[float] = field(default_factory=lambda: array("d"))
    a_dur: array[float] = field(default_factory=lambda: array("d"))
    # DataLoader intervals
    dl_ts: array[float] = field(default_factory=lambda: array("d"))
    dl_dur: array[float] = field(default_factory=lambda: array("d"))
    # ProfilerStep#N
    st_num: array[int] = field(default_factory=lambda: array("q"))
    st_ts: array[float] = field(default_factory=lambda: array("d"))
    st_dur: array[float] = field(default_factory=lambda: array("d"))
    # per-name aggregates: name -> [flag, count, total_us]
    cpu_agg: dict[str, list[Any]] = field(default_factory=dict)
    # runtime/driver call names: name -> (is_sync, name_id, join class: 0 HTA launch set, 1 other launch,
    # 2 sync call, -1 not joined); see gpu.launch_code
    rt_agg: dict[str, tuple[bool, int, int]] = field(default_factory=dict)
    devices: set[int] = field(default_factory=set)
    # X rows in a category the parser does not know that carry a stream or device (category -> count)
    unknown_device_cats: dict[str, int] = field(default_factory=dict)
    no_ph: int = 0  # events with a known category and a duration but no "ph" (skipped)
    streams_folded: int = 0  # ops whose stream string was beyond MAX_STREAMS distinct ones (row OTHER_STREAM)
    begin_end: int = 0  # "B"/"E" events (a duration written as a begin/end pair) in an analysed category (skipped)
    flow_starts: int = 0  # "ac2g" flow starts (at a launch) and finishes (at its GPU row)
    flow_finishes: int = 0
    args_dropped: int = 0  # events kept without their args (an ill-typed field, e.g. an integer beyond int64)
    args_loose: int = 0  # events whose args needed the loose rule (numbers as strings) and were read whole
    args_unknown: dict[str, int] = field(default_factory=dict)  # arg key -> events where it stayed unreadable
    repaired: int = 0  # events whose invalid UTF-8 / raw control characters were replaced (U+FFFD / space)
    # things worth knowing that lost no number (a byte-order mark, repaired names): never make a file partial
    notices: list[TraceError] = field(default_factory=list)
    # a file of another known format found among the traces (a PyTorch execution trace): why it was left out
    skipped: str | None = None
    # the op types of followed kernels, collected by the main pass (op_types.Collector; None: not collected)
    op_types: OpTypesCollector | None = None
    # profile_memory events, and CPU ops started over time (profstack.analysis.memory / timebins)
    memory: MemoryEvents = field(default_factory=MemoryEvents)
    memory_attributed: bool = True
    cpu_timeline: TimeBins = field(default_factory=lambda: TimeBins(("cpu_ops",)))
    # bounded names: what was folded or shortened (engine puts these notices in the summary's warnings)
    names_folded_events: int = 0
    names_folded_distinct: int = 0
    names_folded_distinct_exact: bool = True
    long_names: int = 0

    @property
    def complete(self) -> bool:
        """Read whole, and no gap that can move a reported number beyond the tolerances (completeness.at_stake):
        a gap that leaves only a section incomplete (memory peaks unknown, say) is a warning, not a partial file."""
        return self.error is None and not any(at_stake(w) for w in self.warnings)

    @property
    def failed(self) -> bool:
        return self.error is not None and (not self.error.partial_ok or self.x_events == 0)


def other_format(keys: Sequence[str]) -> str | None:
    """Why a JSON object without ``traceEvents`` is a known other file that sits beside traces (and is left out
    without making the run partial), or None when it is not recognised (then it is an error).

    PyTorch's ExecutionTraceObserver writes ``{"schema": "1.0.1", "pid", "time", "start_ts", "nodes": [...],
    "finish_ts"}`` (torch/csrc/profiler/standalone/execution_trace_observer.cpp); HTA reads it beside the Kineto
    trace for its critical path. It holds the op graph, not a timeline: nothing ProfStack measures."""
    if "nodes" in keys and "schema" in keys:
        return (
            "a PyTorch execution trace (ExecutionTraceObserver: an op graph without a timeline), not a Kineto "
            "trace: left out of the analysis"
        )
    return None


READER_GIVE_UP = 8  # declined batches after which the C reader is tried only while it takes 1 batch in 5


class _BatchArrays(NamedTuple):
    """A batch's launches (correlation, start, duration, 1 for a call that may enqueue nothing) and CPU op starts,
    filled by the per-event loop."""

    l_corr: array[int]
    l_ts: array[float]
    l_dur: array[float]
    cpu_starts: array[float]
    l_maybe_empty: array[int]

    @classmethod
    def new(cls) -> _BatchArrays:
        return cls(array("q"), array("d"), array("d"), array("d"), array("b"))


#: the host-side span columns that grow with the file: host synchronisation calls, GPU-side syncs, annotations and
#: DataLoader spans (what each is: FileData). Beyond ``HOST_SPAN_BUDGET_BYTES`` together (~400k rows), the rows of
#: later batches are left out, counted and warned of (``HostSpansCutError``): a file's memory stays bounded at any
#: size. The steps are not among them: the GPU side's step selection reads them as the parse goes.
HOST_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sync calls", ("s_name", "s_ts", "s_dur")),
    ("GPU-side syncs", ("gs_ts", "gs_dur")),
    ("annotations", ("a_name", "a_gpu", "a_ts", "a_dur")),
    ("DataLoader spans", ("dl_ts", "dl_dur")),
)
HOST_SPAN_BUDGET_BYTES = 8 << 20


class _HostBound:
    """``HOST_COLUMNS`` within their budget: after each batch, measured until they outgrow it, then cut back to
    the rows they held then (one batch beyond the budget at most)."""

    __slots__ = ("at_event", "cut", "kept")

    def __init__(self) -> None:
        self.kept: list[int] | None = None  # rows of each group kept, once the budget is reached
        self.cut = [0] * len(HOST_COLUMNS)  # rows of each group left out
        self.at_event = 0  # the file's events read when the budget was reached

    def after_batch(self, fd: FileData) -> None:
        if self.kept is None:
            used = 0
            for _, cols in HOST_COLUMNS:
                for c in cols:
                    col: array[Any] = getattr(fd, c)
                    used += len(col) * col.itemsize
            if used > HOST_SPAN_BUDGET_BYTES:
                self.kept = [len(getattr(fd, cols[0])) for _, cols in HOST_COLUMNS]
                self.at_event = fd.events
            return
        for g, (_, cols) in enumerate(HOST_COLUMNS):
            keep = self.kept[g]
            extra = len(getattr(fd, cols[0])) - keep
            if extra > 0:
                for c in cols:
                    del getattr(fd, c)[keep:]
                self.cut[g] += extra

    def warning(self, source: str) -> HostSpansCutError | None:
        if not any(self.cut):
            return None
        what = ", ".join(f"{n:,} {label}" for (label, _), n in zip(HOST_COLUMNS, self.cut, strict=True) if n)
        return HostSpansCutError(
            f"{what} left out, those after the file's first {self.at_event:,} events (the host-span columns' bound, "
            f"{HOST_SPAN_BUDGET_BYTES >> 20} MB, which bounds the memory a file takes): synchronisation, annotation "
            "and DataLoader results cover the file up to there",
            source=source,
        )


class _Parser:
    def __init__(
        self,
        fd: FileData,
        symbols: SymbolTable,
        feed: GpuFeed,
        selection_now: Callable[[int], Selection],
        count_sync: bool = True,
    ) -> None:
        self.count_sync = count_sync
        self.hta_compat = feed.hta_compat  # the time model of the start column (gpu.start_ns)
        self.fd = fd
        self.symbols = symbols
        self.feed = feed
        self.selection_now = selection_now
        self.stream_ids: dict[str, int] = {}
        self.annot_class: dict[str, tuple[int, int]] = {}
        # one budget per per-name table this file fills; beyond it, names fold into an "other" row
        self.symbol_budget = _NameBudget()
        self.cpu_budget = _NameBudget()
        self.runtime_budget = _NameBudget()
        self.annot_budget = _NameBudget()
        self.long_names = 0
        #: this file's CPU ops for the memory attribution, kept by the C reader (memory.OpLog; None: not kept)
        self.op_log: OpLog | None = None
        self.host_bound = _HostBound()
        #: this file's op types while they are collected (FileData.op_types; None: not, or no longer)
        self.op_types: OpTypesCollector | None = None

    def _bounded(self, name: str) -> str:
        self.long_names += 1
        return bounded_name(name)

    def _new_symbol(self, name: str, other: str) -> int:
        """Intern a name this file has not seen; beyond the budget, fold it into ``other``."""
        if name in self.symbols.ids or (not self.symbols.full() and self.symbol_budget.take()):
            return self.symbols.intern(name)
        self.symbol_budget.fold(name)
        return self.symbols.intern(other)

    def _gpu_name_id(self, name: str, kind: int) -> int:
        if kind == K_MEMCPY:
            other = _OTHER_GPU_NAMES["memcpy"]
        elif kind == K_MEMSET:
            other = _OTHER_GPU_NAMES["memset"]
        else:
            ktype = classify.kernel_type(name)
            other = _OTHER_GPU_NAMES[
                "comm" if ktype == classify.COMMUNICATION else "memcpy" if ktype == classify.MEMORY else "compute"
            ]
        nid = self._new_symbol(name, other)
        return nid

    def _new_runtime(self, name: str) -> tuple[bool, int, int]:
        rrec = (name in SYNC_CALLS, 0, _join_class(name))
        if self.runtime_budget.take():
            rrec = (rrec[0], self._new_symbol(name, OTHER_NAME), rrec[2])
            self.fd.rt_agg[name] = rrec
            return rrec
        # folded: not cached (its sync/launch class still counts), named "other"
        self.runtime_budget.fold(name)
        return (rrec[0], self.symbols.intern(OTHER_NAME), rrec[2])

    def _unknown(self, cat: str) -> None:
        cats = self.fd.unknown_device_cats
        if cat in cats:
            cats[cat] += 1
        elif cat not in KNOWN_OTHER_CATEGORIES and len(cats) < MAX_UNKNOWN_CATEGORIES:
            cats[cat] = 1

    def _stream_of(self, raw: int | str | None) -> int:
        if isinstance(raw, int) and -(2**31) <= raw < 2**31:
            return raw
        key = str(raw)
        sid = self.stream_ids.get(key)
        if sid is None:
            sid = None
            if key.startswith(("0x", "0X")):
                try:
                    sid = int(key, 16)
                except ValueError:
                    sid = None
            else:
                m = _DIGITS.search(key)
                sid = int(m.group()) if m else None
            if sid is None or not -(2**31) <= sid < 2**31:
                sid = -(len(self.stream_ids) + 2)  # unparseable or pointer-sized: a stable small id
            if len(self.stream_ids) >= MAX_STREAMS:
                self.fd.streams_folded += 1  # bounded (hostile traces): not remembered, one shared row
                return OTHER_STREAM
            self.stream_ids[key] = sid
        return sid

    def _new_cpu_rec(self, name: str) -> list[Any]:
        flag = F_PLAIN
        if name.startswith(STEP_PREFIX):
            flag = F_STEP
        elif is_dataloader_name(name):
            flag = F_DATALOADER
        rec = [flag, 0, 0.0]
        if flag == F_STEP or self.cpu_budget.take():
            # steps are per-step names that never reach the CPU-op table: not counted against the budget
            self.fd.cpu_agg[name] = rec
            return rec
        self.cpu_budget.fold(name)
        if flag != F_PLAIN:
            return rec  # a folded DataLoader name still marks its interval (not kept in the table)
        other = self.fd.cpu_agg.get(OTHER_NAME)
        if other is None:
            other = self.fd.cpu_agg[OTHER_NAME] = [F_PLAIN, 0, 0.0]
        return other

    def _step(self, name: str, ts: float, dur: float) -> None:
        m = _STEP_RE.match(name)
        if m and len(m.group(1)) < 18:
            fd = self.fd
            num = int(m.group(1))
            fd.st_num.append(num)
            fd.st_ts.append(ts)
            fd.st_dur.append(dur)
            self.feed.step(num, ts, dur)

    def _annot_class(self, name: str) -> tuple[int, int]:
        cls = self.annot_class.get(name)
        if cls is None:
            if name.startswith(STEP_PREFIX):
                return (F_STEP, -1)  # one name per step, never a table row: not interned, not cached
            flag = F_DATALOADER if is_dataloader_name(name) else F_PLAIN
            if not self.annot_budget.take():
                self.annot_budget.fold(name)
                return (flag, self.symbols.intern(OTHER_NAME))
            cls = (flag, self._new_symbol(name, OTHER_NAME))
            self.annot_class[name] = cls
        return cls

    def name_notices(self) -> None:
        """Record what the name bounds changed on the file (summary warnings; folding marks it incomplete)."""
        fd = self.fd
        budgets = (self.symbol_budget, self.cpu_budget, self.runtime_budget, self.annot_budget)
        fd.names_folded_events = sum(b.events for b in budgets)
        distinct = set().union(*(b.hashes for b in budgets))
        fd.names_folded_distinct = len(distinct)
        fd.names_folded_distinct_exact = len(distinct) < _FOLDED_DISTINCT_CAP
        if fd.names_folded_events:
            more = "" if fd.names_folded_distinct_exact else " or more"
            fd.notices.append(
                NamesFoldedError(
                    f"{fd.names_folded_distinct}{more} distinct names beyond the first {MAX_NAMES_PER_FILE} per "
                    f"table were folded into one 'other' row ({fd.names_folded_events} events); per-name tables "
                    "(kernels, CPU ops, annotations) are incomplete, totals are not",
                    source=fd.name,
                )
            )
        fd.long_names = self.long_names
        if fd.long_names:
            fd.notices.append(
                LongNamesError(
                    f"{fd.long_names} events had names longer than {MAX_NAME_CHARS} characters (or strings longer "
                    f"than {MAX_STRING_BYTES} bytes): shown shortened, with a hash that keeps distinct names apart",
                    source=fd.name,
                )
            )

    def invalid(self, message: str, negative: bool = False) -> None:
        fd = self.fd
        fd.invalid_events += 1
        if negative:
            fd.negative_durations += 1
        if not fd.first_invalid:
            fd.first_invalid = message

    def invalid_event(self, e: Event | BareEvent, negative: bool) -> None:
        """An X event whose time cannot be analysed (counted, and the first one's message kept)."""
        self.invalid(f"event {e.name[:80]!r}: {_bad_time(e.ts, e.dur)}", negative=negative)

    def consume(self, events: Sequence[Event | BareEvent]) -> None:
        """One decoded batch: the per-event loop (in C where ``native.ACCEL`` is built: ``csrc/``'s
        ``consume_events``, a transliteration of ``_consume_events``), then the batch's column work."""
        # this batch's launches, handed to the join before its ops are looked at
        arrays = _BatchArrays.new()
        self.fd.events += len(events)
        log = self.op_log
        if log is not None and log.valid:  # msgspec's events, as the C reader's: their ops go to the log too
            log.add(events)  # (_parse drops the log before decode_one's events, BareEvents and repairs, come here)
        accel = native.ACCEL
        r: Any = NotImplemented
        if accel is not None:
            r = accel.consume_events(self, events, *arrays)
        if r is NotImplemented:  # no C module, or it declined (e.g. BareEvents) and changed nothing
            r = self._consume_events(events, *arrays)
        self._after_batch(r, arrays)

    def consume_json(self, batch: memoryview) -> bool:
        """One batch (a JSON array of events) read by the C reader straight into the loop of ``consume``, with
        no ``Event`` per event (``csrc/``'s ``decode_consume``). False, with nothing changed, where there
        is no C module or the reader declines (anything outside the subset of JSON it converts exactly, or a
        batch msgspec would reject): the caller then decodes the batch with msgspec and calls ``consume``."""
        accel = native.ACCEL
        reader = getattr(accel, "decode_consume", None)
        if reader is None:
            return False
        arrays = _BatchArrays.new()
        r = reader(self, batch, *arrays)
        if r is NotImplemented:
            return False
        self._after_batch(r, arrays)
        return True

    def before_batch(self) -> None:
        """Before each batch (``_parse``): a file whose header does not promise op input types stops collecting
        them once ``op_types.GIVE_UP_EVENTS`` events passed without an operator carrying them (Kineto writes CPU
        events first)."""
        ot = self.op_types
        if ot is not None and not ot.promised and not ot.n_ops and self.fd.events >= op_types.GIVE_UP_EVENTS:
            ot.give_up()
            self.op_types = None

    def _after_batch(self, r: tuple[int, int, int], arrays: _BatchArrays) -> None:
        fd = self.fd
        feed = self.feed
        n_launch, n_x, n_rt = r
        l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty = arrays
        feed.join.add(l_corr, l_ts, l_dur, l_maybe_empty)
        if cpu_starts:
            fd.cpu_timeline.add_points(0, cpu_starts)
        feed.after_batch(self.selection_now)
        fd.x_events += n_x
        fd.n_launch_records += n_launch
        fd.cpu_ops += len(cpu_starts)
        fd.runtime_calls += n_rt
        self.host_bound.after_batch(fd)
        log = self.op_log
        if log is not None and log.valid and len(log.ts) > memory_columns.SPILL_OPS:
            log.spill()  # the ops held so far to the log's temporary file (or, where it cannot be written, dropped)

    def _consume_events(  # noqa: PLR0917 - the C module's positional signature (consume_events)
        self,
        events: Sequence[Event | BareEvent],
        l_corr: array[int],
        l_ts: array[float],
        l_dur: array[float],
        cpu_starts: array[float],
        l_maybe_empty: array[int],
    ) -> tuple[int, int, int]:
        """The per-event loop of ``consume``: returns (launch records, X events, runtime calls)."""
        fd = self.fd
        cat_kind = CAT_KIND.get
        cpu_get = fd.cpu_agg.get
        rt_get = fd.rt_agg.get
        ids_get = self.symbols.ids.get
        max_name = MAX_NAME_CHARS
        feed = self.feed
        ops = feed.ops
        g_s = ops.s.append
        g_name = ops.name.append
        g_kind = ops.kind.append
        g_ts = ops.ts.append
        g_dur = ops.dur.append
        g_stream = ops.stream.append
        g_corr = ops.corr.append
        g_bytes = ops.nbytes.append
        g_occ = ops.occ.append
        r_corr, r_ts, r_dur, r_empty = l_corr.append, l_ts.append, l_dur.append, l_maybe_empty.append
        ceil, floor = math.ceil, math.floor
        whole_us = self.hta_compat
        time_limit = MAX_TIME_US
        cpu_start = cpu_starts.append
        ot = self.op_types
        n_launch = 0
        n_x = 0
        n_rt = 0
        for e in events:
            kind = cat_kind(e.cat)
            ph = e.ph
            if kind is None:
                if ph == "X":
                    n_x += 1
                    a = e.args
                    if a is not None and (a.stream is not None or a.device is not None):
                        self._unknown(e.cat)
                elif ph == "i" and e.name == MEMORY_EVENT:
                    self.memory_event(e)
                elif e.cat == "ac2g":  # a launch's flow: starts at the launch, ends at its GPU row
                    if ph == "s":
                        fd.flow_starts += 1
                    elif ph == "f":
                        fd.flow_finishes += 1
                continue
            ts = e.ts
            dur = e.dur
            if ph != "X" or ts != ts or dur < 0:  # noqa: PLR0124 - NaN test, cheapest form
                if ph != "X":
                    if not ph and ts == ts:  # noqa: PLR0124
                        fd.no_ph += 1  # not a flow or instant: a writer that left "ph" out
                    elif ph in ("B", "E"):
                        fd.begin_end += 1  # Kineto writes "X"; another writer's begin/end pairs are not analysed
                    continue  # flows/instants in a known category carry nothing we use
                self.invalid_event(e, dur < 0)
                continue
            n_x += 1
            if kind == K_CPU:
                cpu_start(ts)  # one start per CPU op: len(cpu_starts) counts them
                name = e.name
                rec = cpu_get(name)
                if rec is None:  # a new name, or a long one: this file's table keys only bounded names
                    if len(name) > max_name:
                        name = self._bounded(name)
                        rec = cpu_get(name)
                    if rec is None:
                        rec = self._new_cpu_rec(name)
                rec[1] += 1
                rec[2] += dur
                flag = rec[0]
                if flag:
                    if flag == F_STEP:
                        self._step(name, ts, dur)
                    else:
                        fd.dl_ts.append(ts)
                        fd.dl_dur.append(dur)
                if ot is not None and e.args is not None:
                    ot.op(e.args)
            elif kind == K_RUNTIME:
                n_rt += 1
                name = e.name
                rrec = rt_get(name)
                if rrec is None:  # as for CPU ops: the table keys only bounded names
                    if len(name) > max_name:
                        name = self._bounded(name)
                        rrec = rt_get(name)
                    if rrec is None:
                        rrec = self._new_runtime(name)
                a = e.args
                klass = rrec[2]
                if klass >= 0 and a is not None and a.correlation is not None:
                    r_corr(a.correlation)
                    r_ts(ts)
                    maybe_empty = klass >= JOIN_MAYBE_EMPTY  # a copy, memset, ...: may enqueue nothing
                    if maybe_empty:
                        klass -= JOIN_MAYBE_EMPTY
                    if klass == 0:
                        n_launch += 1
                        r_dur(dur)
                    elif klass == 1:
                        n_launch += 1
                        r_dur(-dur - 1.0)
                    else:
                        r_dur(NAN)  # a sync call: joins its cuda_sync row, never a launch delay
                    r_empty(maybe_empty)
                if rrec[0]:
                    fd.s_name.append(rrec[1])
                    fd.s_ts.append(ts)
                    fd.s_dur.append(dur)
            elif kind <= K_MEMSET:
                if not -time_limit < ts < time_limit or dur >= time_limit:  # the int64 start column's range
                    n_x -= 1
                    self.invalid_event(e, False)
                    continue
                name = e.name
                if len(name) > max_name:
                    name = self._bounded(name)
                nid = ids_get(name)
                if nid is None:
                    nid = self._gpu_name_id(name, kind)
                a = e.args
                if a is not None:
                    st = a.stream
                    stream = st if type(st) is int and -2147483648 <= st <= 2147483647 else self._stream_of(st)
                    c = a.correlation
                    corr = c if c is not None else -1
                    b = a.bytes
                    nbytes = int(b) if b is not None else 0
                    o = a.occupancy
                    occ = o if o is not None and 0.0 <= o <= 100.0 else -1.0  # a percentage, or unknown
                    dev = a.device
                    if dev is not None and dev not in fd.devices and len(fd.devices) < MAX_DEVICES:
                        fd.devices.add(dev)
                else:
                    stream = 0
                    corr = -1
                    nbytes = 0
                    occ = -1.0
                if kind == K_KERNEL:
                    op_kind = OP_KERNEL
                    fd.n_kernels += 1
                elif kind == K_MEMCPY:
                    op_kind = OP_MEMCPY
                    fd.n_memcpy += 1
                else:
                    op_kind = OP_MEMSET
                    fd.n_memset += 1
                if fd.first_gpu_ts is None:
                    fd.first_gpu_ts = ts
                fl = floor(ts)
                if ts != fl or dur % 1.0 != 0.0:  # (a NaN dur counts, as in C; it raises in the GPU loop)
                    fd.gpu_fractional += 1
                if whole_us:  # gpu.start_ns, inlined
                    g_s(ceil(ts) * 1000)
                else:
                    g_s(fl * 1000 + round((ts - fl) * 1000.0))
                g_ts(ts)
                g_dur(dur)
                g_name(nid)
                g_kind(op_kind)
                g_stream(stream)
                g_corr(corr)
                g_bytes(nbytes)
                g_occ(occ)
                if ot is not None and op_kind == OP_KERNEL:
                    ot.kernel(a, nid, dur)
            elif kind in (K_ANNOT, K_GPU_ANNOT):
                name = e.name
                if len(name) > max_name:
                    name = self._bounded(name)
                flag, nid = self._annot_class(name)
                if flag == F_STEP:
                    if kind == K_ANNOT:
                        self._step(e.name, ts, dur)
                    continue
                if flag == F_DATALOADER and kind == K_ANNOT:
                    fd.dl_ts.append(ts)
                    fd.dl_dur.append(dur)
                fd.a_name.append(nid)
                fd.a_gpu.append(1 if kind == K_GPU_ANNOT else 0)
                fd.a_ts.append(ts)
                fd.a_dur.append(dur)
            else:  # K_GPU_SYNC
                fd.gs_ts.append(ts)
                fd.gs_dur.append(dur)
                a = e.args
                # HTA counts a sync row as GPU time when it carries a stream other than -1
                if self.count_sync and a is not None and a.stream is not None and a.stream != -1:
                    if not -time_limit < ts < time_limit or dur >= time_limit:
                        continue
                    st = a.stream
                    c = a.correlation
                    nid = ids_get(e.name)
                    if nid is None:
                        nid = self._new_symbol(e.name, OTHER_NAME)
                    g_s(ceil(ts) * 1000 if whole_us else start_ns(ts, False))
                    g_ts(ts)
                    g_dur(dur)
                    g_name(nid)
                    g_kind(OP_SYNC)
                    g_stream(st if type(st) is int and -2147483648 <= st <= 2147483647 else self._stream_of(st))
                    g_corr(c if c is not None else -1)
                    g_bytes(0)
                    g_occ(-1.0)
        return n_launch, n_x, n_rt

    def memory_event(self, e: Event | BareEvent) -> None:
        a = e.args
        if a is not None and a.mem_bytes is not None:
            self.fd.memory.add(
                e.ts,
                e.tid,
                dtype=a.mem_device_type,
                did=a.mem_device_id,
                nbytes=a.mem_bytes,
                alloc=a.mem_allocated,
                reserved=a.mem_reserved,
            )

    def decode_one(self, raw: bytes) -> Event | BareEvent | None:
        try:
            return self._decode_one(raw)
        except RecursionError:
            # msgspec recurses into every nested value, the unknown fields it skips included: one event nested
            # deeper than Python's recursion limit is left out, with a warning; the file is still read
            self.invalid(f"an event nested deeper than {sys.getrecursionlimit():,} levels (left out)")
            return None

    def _decode_one(self, raw: bytes) -> Event | BareEvent | None:
        try:
            return _ONE_DECODER.decode(raw)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError:
            # raw control characters / invalid UTF-8 inside strings (pytorch#130622): repair and retry
            fixed = raw.translate(_CTRL_TABLE).decode("utf-8", "replace").encode("utf-8")
            try:
                ev = _ONE_DECODER.decode(fixed)
                self.fd.repaired += 1
                return ev
            except msgspec.ValidationError:
                self.fd.repaired += 1
                raw = fixed
            except msgspec.DecodeError as exc:
                self.invalid(f"undecodable event: {exc}")
                return None
        try:
            loose = _LOOSE_DECODER.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            loose = None
        if loose is not None:
            # numbers written as strings, integral floats: read as numbers; a field still unreadable is that
            # field unknown (named in a warning), never the event's other args
            args, unknown = loose_args(loose.args) if loose.args is not None else (None, [])
            for key in unknown:
                self.fd.args_unknown[key] = self.fd.args_unknown.get(key, 0) + 1
            if not unknown:
                self.fd.args_loose += 1
            tid = loose.tid
            return Event(loose.ph, loose.cat, loose.name, loose.ts, loose.dur, args, tid)
        try:
            bare = _BARE_DECODER.decode(raw)
            self.fd.args_dropped += 1
            return bare
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            self.invalid(f"ill-typed event: {exc}")
            return None


def _bad_time(ts: float, dur: float) -> str:
    if math.isnan(ts):
        return "missing ts"
    if dur < 0:
        return "negative dur"
    if math.isnan(dur):
        return "dur is not a number"
    return f"ts {ts:g} / dur {dur:g} out of range"


def _apply_meta(fd: FileData, meta: dict[str, Any]) -> None:
    fd.meta = meta
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and isinstance(dist.get("rank"), int):
        fd.rank = int(dist["rank"])
        fd.rank_source = "distributed_info"
    base = meta.get("baseTimeNanoseconds")
    if isinstance(base, int | float) and base > 0:
        fd.time_offset_us = float(base) / 1000.0


def _event_stream(
    fh: BinaryIO, *, max_decompressed: int, max_event: int, progress: Callable[[int], None] | None = None
) -> tuple[EventStream, _LongStrings]:
    """A file's events in batches (decompressed within ``max_decompressed``, each value within ``max_event``), with
    strings too long for an event cut before the JSON splitter sees them (the filter's output goes to this stream
    only)."""
    long_strings = _LongStrings()
    stream = EventStream(
        long_strings.filter(iter_chunks(fh, max_decompressed=max_decompressed, progress=progress)),
        max_value_bytes=max_event,
        read_size_hint=BATCH_BYTES,
    )
    long_strings.resolve = stream.unparsed
    return stream, long_strings


def parse_source(
    src: TraceSource,
    symbols: SymbolTable,
    *,
    max_decompressed_bytes: int,
    max_event_bytes: int,
    progress: Callable[[int], None] | None = None,
    options: AnalysisOptions | None = None,
    stream_gpu: bool = True,
) -> FileData:
    """Parse one trace. Never raises TraceError: errors are recorded on the returned FileData.

    With ``stream_gpu``, the GPU side is analysed while parsing, in bounded memory (``FileData.gpu``);
    when the trace breaks the streaming pass's assumptions, the file is parsed again buffered and
    ``gpu_mode_reason`` says why. Buffered, the GPU ops wait in ``FileData.gpu_feed`` for the rank.
    """
    opts = options if options is not None else AnalysisOptions()
    limits = {"max_decompressed_bytes": max_decompressed_bytes, "max_event_bytes": max_event_bytes}
    if not stream_gpu:
        return _parse(src, symbols, **limits, progress=progress, opts=opts, bounded=False)
    reported = 0

    def first_pass(nbytes: int) -> None:
        nonlocal reported
        reported += nbytes
        if progress is not None:
            progress(nbytes)

    try:
        return _parse(src, symbols, **limits, progress=first_pass, opts=opts, bounded=True)
    except StreamingAbort as exc:
        seen = 0

        def second_pass(nbytes: int) -> None:
            # report only the bytes the aborted pass had not reached, so a progress bar never overshoots
            nonlocal seen
            new = max(0, seen + nbytes - max(seen, reported))
            seen += nbytes
            if progress is not None and new:
                progress(new)

        fd = _parse(src, symbols, **limits, progress=second_pass, opts=opts, bounded=False)
        fd.gpu_mode_reason = str(exc)
        return fd


def new_parser(fd: FileData, symbols: SymbolTable, opts: AnalysisOptions, *, bounded: bool) -> _Parser:
    """The parser of one file, with its GPU feed (``fd.gpu_feed``) and step selection (also for ``bench``)."""

    def selection_now(n_launches: int) -> Selection:
        steps = dedupe_steps(fd.st_num, fd.st_ts, fd.st_dur)
        try:
            return select(steps, opts, has_launches=n_launches > 0, label=fd.name)
        except StepWindowError:
            return Selection("none")  # the analysis reports it; nothing to select meanwhile

    feed = GpuFeed(
        symbols.names,
        opts.thresholds(),
        StepFrontier(opts),
        bounded=bounded,
        all_launch_calls=opts.launch_calls == "all",
        clip_delays=opts.clip_launch_delay,
        hta_compat=opts.hta_compat,
    )
    fd.gpu_feed = feed
    return _Parser(fd, symbols, feed, selection_now, count_sync=opts.count_sync)


def _op_log(meta: dict[str, Any]) -> OpLog | None:
    """An op log for a file whose header says ``profile_memory`` (its ``[memory]`` events are attributed from
    it), where the C reader is built (only it logs); else None."""
    wanted = meta.get("profile_memory") in (1, True) and hasattr(native.ACCEL, "attribute_log")
    return OpLog() if wanted and hasattr(native.ACCEL, "decode_consume") else None


def _op_types(meta: dict[str, Any], symbols: SymbolTable, opts: AnalysisOptions) -> OpTypesCollector | None:
    """The op-types collector of a file (profstack.analysis.op_types), unless the option is off or the header says
    record_shapes was."""
    if not opts.op_types or meta.get("record_shapes") in (0, False):
        return None
    return OpTypesCollector(symbols.names, classify.follows, promised=meta.get("record_shapes") in (1, True))


def _cut_off(exc: TruncatedTraceError, src: TraceSource, stream: EventStream | None, fd: FileData) -> TraceError:
    """A file cut off mid-way (a job stopped while the profiler wrote it, an upload cut short): where it ends, why,
    and what that leaves unknown. Kineto writes the GPU rows after the CPU events, so a file cut before its first
    GPU row says nothing of the GPU: never a CPU-only run (item 6 of issue #43)."""
    read = stream.total_bytes if stream is not None else 0
    size = src.size_hint
    gpu_rows = fd.n_kernels + fd.n_memcpy + fd.n_memset
    where = f"{read:,} bytes of JSON read" + (f" from {size:,} bytes on disk" if size else "")
    gpu = (
        f"GPU time covers the {gpu_rows:,} GPU rows before the cut"
        if gpu_rows
        else "no GPU row before the cut: the GPU side is unknown (not a CPU-only run)"
    )
    err = TruncatedTraceError(f"file cut off ({exc.detail}; {where}): {gpu}; events after the cut are missing")
    return err.with_source(src.name)


def _parse(
    src: TraceSource,
    symbols: SymbolTable,
    *,
    max_decompressed_bytes: int,
    max_event_bytes: int,
    progress: Callable[[int], None] | None,
    opts: AnalysisOptions,
    bounded: bool,
) -> FileData:
    fd = FileData(name=src.name, size_bytes=src.size_hint)
    guessed = rank_from_name(src.name)
    if guessed is not None:
        fd.rank = guessed
        fd.rank_source = "file_name"

    parser = new_parser(fd, symbols, opts, bounded=bounded)
    feed, selection_now = parser.feed, parser.selection_now
    long_strings = _LongStrings()
    stream: EventStream | None = None
    try:
        with src.open() as fh:
            stream, long_strings = _event_stream(
                fh, max_decompressed=max_decompressed_bytes, max_event=max_event_bytes, progress=progress
            )
            taken = declined = 0  # the C reader's batches in this file
            header_read = False
            for batch in stream.batches():
                if not header_read:  # the keys before traceEvents are in stream.meta: log the ops? op types?
                    header_read = True
                    parser.op_log = _op_log(stream.meta)
                    fd.op_types = parser.op_types = _op_types(stream.meta, symbols, opts)
                parser.before_batch()
                if isinstance(batch, memoryview):
                    # a file the reader keeps declining (escaped names, say) goes to msgspec without a try first
                    if declined <= READER_GIVE_UP + 4 * taken:
                        if parser.consume_json(batch):
                            taken += 1
                            continue
                        declined += 1
                    try:
                        # from a copy: the op types' msgspec.Raw fields hold the bytes they were decoded from, and
                        # would hold the stream's buffer (an exception unwinding with them could not release it)
                        events = _LIST_DECODER.decode(bytes(batch))
                    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                        stream.reject()  # read again event by event (decode_one), which names what is wrong
                        continue
                    parser.consume(events)
                    del events
                else:
                    try:
                        events = _LIST_DECODER.decode(b"[" + b",".join(batch) + b"]")
                    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                        if parser.op_log is not None:  # repaired names, and BareEvents' undecoded tids: not what
                            parser.op_log.drop()  # attribute's read sees
                        fallback = [ev for ev in (parser.decode_one(raw) for raw in batch) if ev is not None]
                        parser.consume(fallback)
                        continue
                    parser.consume(events)
                    del events
        if not stream.saw_trace_events:
            fd.skipped = other_format(stream.keys_seen)
            if fd.skipped is None:
                raise NotKinetoError("JSON object has no traceEvents array")
    except TruncatedTraceError as exc:
        fd.error = _cut_off(exc, src, stream, fd)
    except TraceError as exc:
        fd.error = exc.with_source(src.name)
    except (OSError, MemoryError) as exc:  # pragma: no cover - environment failures
        fd.error = TraceError(f"read failed: {exc}", source=src.name)
    finally:
        reset = getattr(native.ACCEL, "reader_reset", None)
        if reset is not None:
            reset()  # the C reader's strings of this file
        if stream is not None:
            _apply_meta(fd, stream.meta)
            firsts = (
                fd.first_gpu_ts,
                feed.join.first_ts,
                fd.st_ts[0] if fd.st_ts else None,
                fd.a_ts[0] if fd.a_ts else None,
            )
            first_ts = next((t for t in firsts if t is not None), None)
            if feed.join.first_ts is not None:
                fd.launch_span = (feed.join.first_ts, feed.join.last_end)
            if fd.time_offset_us and first_ts is not None and first_ts > fd.time_offset_us / 2:
                fd.time_offset_us = 0.0  # timestamps are already absolute despite baseTimeNanoseconds
    if fd.skipped is not None:
        return fd
    analysed = fd.cpu_ops + fd.runtime_calls + fd.n_kernels + fd.n_memcpy + fd.n_memset
    analysed += len(fd.a_ts) + len(fd.gs_ts) + len(fd.st_ts) + len(fd.dl_ts) + len(fd.s_ts)
    if fd.error is None and fd.x_events and not analysed and not fd.invalid_events:
        # Chrome-trace JSON from another writer (XProf's / JAX's trace.json.gz, a browser trace): its events are
        # in no category Kineto writes, so nothing would be measured; a summary of it would be an empty success
        fd.error = NotKinetoError(
            f"{fd.x_events:,} duration event(s), none in a category ProfStack analyses (cpu_op, user_annotation, "
            "kernel, cuda_runtime, gpu_memcpy, ...): is this a PyTorch profiler (Kineto) trace? Nothing analysed "
            "(for TensorFlow / JAX, analyse the *.xplane.pb the profiler wrote beside it)",
            source=src.name,
        )
    if fd.error is None and fd.x_events == 0:
        if fd.no_ph:
            why = f'trace has no duration events: {fd.no_ph:,} event(s) have no "ph" field (X, i, ...)'
        elif fd.begin_end:
            why = (
                f'trace has no "X" duration events: {fd.begin_end:,} begin/end ("B"/"E") event(s), which Kineto '
                "does not write, are not analysed"
            )
        elif fd.invalid_events:
            why = (
                f"trace has no valid duration event: {fd.invalid_events:,} invalid event(s); first: {fd.first_invalid}"
            )
        elif fd.events == 0:
            why = "trace has no duration events: traceEvents is empty (the profiler recorded nothing)"
        else:
            why = f"trace has no duration events: only {fd.events:,} metadata/instant event(s) (no X event)"
        fd.error = EmptyTraceError(why, source=src.name)
    elif fd.no_ph:
        fd.warnings.append(InvalidEventError(f'{fd.no_ph:,} event(s) without a "ph" field skipped', source=src.name))
    if fd.begin_end and fd.x_events:
        fd.warnings.append(
            InvalidEventError(
                f'{fd.begin_end:,} begin/end ("B"/"E") event(s) in analysed categories skipped: Kineto writes complete '
                '("X") events; steps, ops or kernels written as begin/end pairs are missing from the results',
                source=src.name,
            )
        )
    if fd.n_launch_records and not (fd.n_kernels or fd.n_memcpy or fd.n_memset):
        devices = fd.meta.get("deviceProperties")
        listed = f"; {len(devices)} device(s) are listed in deviceProperties" if isinstance(devices, list) else ""
        fd.warnings.append(
            GpuActivityNotRecordedError(
                f"{fd.n_launch_records:,} GPU launch call(s) but no GPU rows{listed}: the GPU was used but its "
                "activity was not recorded, so GPU time, kernels and idle are unknown (not a CPU-only run); record "
                "it with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) (on ROCm "
                "too), without experimental_config's profiler_metrics (CUPTI's range profiler then records counters "
                "per kernel in cuda_profiler_range rows instead of kernel timings)",
                source=src.name,
            )
        )
    if fd.error is None:
        fd.warnings.extend(unrecorded.file_warnings(fd, src.name))
        fd.notices.extend(unrecorded.file_notices(fd, src.name))
    if fd.args_unknown:
        named = ", ".join(f"{k} ({n:,})" for k, n in sorted(fd.args_unknown.items()))
        fd.warnings.append(
            InvalidEventError(
                f"args fields that could not be read as numbers (beyond int64, booleans, text), left unknown for "
                f"those events: {named}",
                source=src.name,
            )
        )
    if fd.args_loose:
        fd.notices.append(
            TraceError(
                f"{fd.args_loose:,} event(s) wrote numbers in their args as strings or integral floats (ROCm's "
                'roctracer writes "bytes": "32768"); read as numbers, as HTA reads them',
                source=src.name,
            )
        )
    if fd.args_dropped:
        fd.warnings.append(
            InvalidEventError(
                f"{fd.args_dropped:,} event(s) kept without their args: an ill-typed field (e.g. an integer "
                "beyond int64 in correlation/stream/bytes); their correlation, stream and bytes are unknown",
                source=src.name,
            )
        )
    if fd.repaired:
        fd.notices.append(
            TraceError(
                f"{fd.repaired:,} event(s) had invalid UTF-8 or raw control characters in a string; replaced "
                "(U+FFFD / space) and analysed",
                source=src.name,
            )
        )
    if stream is not None and stream.had_bom:
        fd.notices.append(TraceError("file starts with a UTF-8 byte-order mark; ignored", source=src.name))
    log, parser.op_log = parser.op_log, None
    parser.op_types = None
    if fd.op_types is not None:
        fd.op_types.finish()  # the kernels still waiting for their operator, settled
    if bounded:  # the GPU side first: its join's pending launches are freed before the memory attribution
        try:
            fd.gpu = feed.finish(selection_now(feed.join.count))
        except StreamingAbort:
            if log is not None:
                log.close()
            raise
        feed.release_join()
        fd.gpu_feed = None
        fd.gpu_mode = "streaming"
    if len(fd.memory):  # the allocating op of each [memory] event
        from_log = (  # from the ops the C reader logged
            log is not None
            and log.valid
            and fd.error is None
            and not long_strings.strings_cut
            and attribute_log(log, fd.memory, symbols.intern)
        )
        if not from_log:  # one more read, only for these traces
            fd.memory_attributed = attribute(
                src, fd.memory, symbols.intern, max_decompressed=max_decompressed_bytes, max_event=max_event_bytes
            )
    if log is not None:
        log.close()
    del log
    mem = fd.memory
    if not mem.complete:
        cut = mem.seen - len(mem)
        why = (
            f"beyond the first {len(mem):,} (the memory section's bound, which bounds its memory use): its peaks, "
            f"timeline and top operators are those of the first {len(mem):,} only"
            if len(mem) >= memory_columns.MAX_EVENTS
            else "without a time or a byte count"
        )
        fd.warnings.append(
            MemoryEventsCutError(f"{cut:,} of the file's {mem.seen:,} [memory] events left out, {why}", source=src.name)
        )
    host_cut = parser.host_bound.warning(src.name)
    if host_cut is not None:
        fd.warnings.append(host_cut)
    if fd.unknown_device_cats:
        cats = ", ".join(f"{c!r} ({n:,})" for c, n in sorted(fd.unknown_device_cats.items(), key=lambda kv: -kv[1]))
        fd.warnings.append(
            UnknownDeviceCategoryError(
                f"rows that look like device activity (they carry a stream or device) are in categories the parser "
                f"does not know: {cats}; they are not analysed as GPU ops, so GPU results may be missing",
                source=src.name,
            )
        )
    if len(fd.devices) > 1:
        fd.warnings.append(
            MultipleDevicesError(
                f"GPU ops of {len(fd.devices)} devices ({', '.join(map(str, sorted(fd.devices)[:8]))}) in one file: "
                "the GPU span, busy and idle time are their union (HTA's per-rank definition), no one device's, and "
                "streams with the same id on different devices are one stream in the idle breakdown",
                source=fd.name,
            )
        )
    parser.long_names += long_strings.strings_cut
    parser.name_notices()
    if fd.invalid_events:
        cls = NegativeDurationError if fd.negative_durations == fd.invalid_events else InvalidEventError
        fd.warnings.append(
            cls(f"{fd.invalid_events} invalid event(s) skipped; first: {fd.first_invalid}", source=src.name)
        )
    return fd
