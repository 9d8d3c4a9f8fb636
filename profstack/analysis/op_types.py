"""The precision of kernels whose names carry no types, read from the operators that launched them (#34 item 3).

With ``record_shapes=True`` Kineto writes each operator's input dtypes (``cpu_op`` args ``"Input type": ["c10::
BFloat16", "c10::BFloat16", "", "Scalar"]``) and its ``"External id"``; every kernel it launches carries the same
``"External id"`` (Kineto's ``linkedActivity``: the kernel's op). A kernel whose demangled name holds its argument
types is read from them (``profstack.analysis.precision``), and so is one whose name carries a data-type word or
Tensile's code (the kernel's own statement: a fused op takes bf16 and quantises inside, so Blackwell's
``bmm_MxE4m3_MxE2m1...`` under a bf16 op is fp8 math). A Triton / cuBLAS-family / MTIA kernel whose name says
nothing, or only a family's default (``sgemm``, ``igemm``), is read from the op's input types.

This is a second, narrow pass over a file, run by the rank analysis only when it can change an answer: the rank has
computation kernels whose names carry no types (at least ``MIN_UNTYPED_SHARE`` of computation time), and the
file's header does not say ``record_shapes`` was off. It decodes four fields per event with msgspec (both engines
share it, so the C and Python engines agree by construction), and is bounded like the main pass: the operators
remembered (``MAX_OPS``), the kernels waiting for an operator written after them (``MAX_PENDING``), the names
(only the rank's untyped kernel names are followed). It yields, per kernel name, the kernels and time by the class
of their operator's inputs; the rank applies those shares to the kernel's time in the analysed window (a file's
mix of dtypes per kernel name is taken as the window's).

Reading the op's types: the narrowest float type wins (an fp8 GEMM's scales are float); integer inputs (indices,
masks) say nothing, except that an op whose only typed inputs are ``signed char`` (int8, as ``torch._int_mm``) is
int8. TF32 cannot show in dtypes (it is how fp32 inputs are computed): a kernel whose naming scheme says TF32 and
whose op says fp32 stays TF32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from profstack.analysis.loose import loose_int
from profstack.analysis.precision import ORDER, TYPE_CLASSES

#: of the rank's computation-kernel time: below it the second pass (up to the main pass's own time again) could move
#: the precision mix by less than this, and is not run
MIN_UNTYPED_SHARE = 0.05
# measured (tracemalloc): 1 M remembered operators take ~74 MB, 1 M waiting kernels ~128 MB; together these
# bounds keep the read under ~110 MB whatever the trace (beyond them, kernels keep their name's reading, counted)
MAX_OPS = 1_000_000  # operators remembered (External id -> class)
MAX_PENDING = 250_000  # kernels seen before their operator (Kineto writes CPU events first)
MAX_TYPES_PER_OP = 64  # an op's input list is read this far
#: events read without one operator carrying input types, after which a file whose header does not say
#: record_shapes is taken not to have them (Kineto writes the CPU side first): a trace without them costs this much
GIVE_UP_EVENTS = 200_000

MAX_TYPE_LISTS = 65_536  # distinct input-type lists whose class is remembered
_UNSEEN = object()

_KERNEL_CATS = frozenset({"kernel", "Kernel", "mtia_ccp_events"})
_OP_CATS = frozenset({"cpu_op", "Operator"})


class _Args(msgspec.Struct, gc=False):
    # a number, or (roctracer, #34 item 1) the same number written as a string or an integral float
    external_id: int | str | float | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | str | float | None = msgspec.field(default=None, name="external id")  # 2021 GPU rows
    input_types: list[str] | None = msgspec.field(default=None, name="Input type")

    @property
    def ext(self) -> int | None:
        raw = self.external_id if self.external_id is not None else self.external_id_2021
        return raw if type(raw) is int else loose_int(raw)  # the parser's rule for text and floats


class _Event(msgspec.Struct, gc=False):
    cat: str = ""
    name: str = ""
    dur: float = 0.0
    args: _Args | None = None


class _Bare(msgspec.Struct, gc=False):
    cat: str = ""
    name: str = ""
    dur: float = 0.0


_LIST = msgspec.json.Decoder(list[_Event])
_ONE = msgspec.json.Decoder(_Event)
_ONE_BARE = msgspec.json.Decoder(_Bare)


def op_class(types: Iterable[str]) -> str | None:
    """The class an operator's input dtypes say it computes in (``precision.ORDER``), or None where they say none
    (no float input: indices, masks, scalars)."""
    found: set[str] = set()
    int8 = False
    for n, t in enumerate(types):
        if n >= MAX_TYPES_PER_OP:
            break
        if t == "signed char":
            int8 = True
            continue
        cls = TYPE_CLASSES.get(t.rsplit("::", 1)[-1].strip())
        if cls is not None and cls != "int8":
            found.add(cls)
        elif cls == "int8":
            int8 = True
    for cls in ORDER:
        if cls in found:
            return cls
    return "int8" if int8 else None


def combine(name_class: str, name_source: str, op: str | None) -> tuple[str, str]:
    """(class, source) of an untyped kernel: its operator's class where there is one (TF32 named by the kernel's
    scheme stays TF32 under fp32 inputs), else what the name said."""
    if op is None:
        return name_class, name_source
    if name_source == "name" and name_class == "tf32" and op == "fp32":
        return "tf32", "name"
    return op, "op_types"


@dataclass
class OpTypes:
    """Per untyped kernel name: class -> [kernels, µs] of the kernels whose operator was found, and what was not."""

    by_name: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    kernels_without_op: int = 0  # no External id, or an operator without input types / never written
    ops_dropped: int = 0  # operators beyond MAX_OPS (their kernels count as without op)
    files_read: int = 0
    gave_up: bool = False  # no operator with input types early in a file whose header did not promise them

    def merge(self, other: OpTypes) -> None:
        for name, classes in other.by_name.items():
            mine = self.by_name.setdefault(name, {})
            for cls, (n, us) in classes.items():
                cell = mine.setdefault(cls, [0, 0.0])
                cell[0] += n
                cell[1] += us
        self.kernels_without_op += other.kernels_without_op
        self.ops_dropped += other.ops_dropped
        self.files_read += other.files_read
        self.gave_up = self.gave_up or other.gave_up

    def shares(self, name: str) -> dict[str, tuple[float, float]]:
        """class -> (share of the name's kernels, share of its time) among the kernels whose operator said a class."""
        classes = self.by_name.get(name)
        if not classes:
            return {}
        n_all = sum(c[0] for c in classes.values())
        t_all = sum(c[1] for c in classes.values())
        if n_all <= 0:
            return {}
        return {cls: (c[0] / n_all, c[1] / t_all if t_all > 0 else c[0] / n_all) for cls, c in classes.items()}


def read(
    batches: Iterator[memoryview | list[bytes]],
    wanted: set[str],
    bound: Callable[[str], str],
    *,
    give_up_after: int | None = GIVE_UP_EVENTS,
) -> OpTypes:
    """One pass over a file's event batches (``jsonstream.EventStream.batches()``): the classes of the operators
    that launched the kernels named in ``wanted`` (names as the main pass keeps them: ``bound``). With
    ``give_up_after``, the pass stops after that many events if no operator carried input types by then."""
    reader = _Reader(wanted, bound)
    seen = 0
    for batch in batches:
        if give_up_after is not None and not reader.ops and seen >= give_up_after:
            reader.out.gave_up = True
            break
        events: list[_Event] | list[_Event | _Bare]
        if isinstance(batch, memoryview):
            try:
                events = _LIST.decode(batch)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                events = list(_decode_each(_split(batch)))
        else:
            events = list(_decode_each(batch))
        seen += len(events)
        reader.consume(events)
    return reader.finish()


class _Reader:
    """The state of one pass: operators by External id, kernels waiting for theirs, the result."""

    def __init__(self, wanted: set[str], bound: Callable[[str], str]) -> None:
        self.wanted, self.bound = wanted, bound
        self.out = OpTypes(files_read=1)
        self.ops: dict[int, str | None] = {}
        self.pending: list[tuple[int, str, float]] = []
        self.classes: dict[tuple[str, ...], str | None] = {}  # input-type lists repeat: each read once

    def _add(self, name: str, cls: str, dur: float) -> None:
        cell = self.out.by_name.setdefault(name, {}).setdefault(cls, [0, 0.0])
        cell[0] += 1
        cell[1] += max(dur, 0.0)

    def _op(self, args: _Args | None) -> None:
        ext = args.ext if args is not None else None
        if ext is None or args is None or args.input_types is None:
            return
        if len(self.ops) >= MAX_OPS:
            self.out.ops_dropped += 1
            return
        key = tuple(args.input_types[:MAX_TYPES_PER_OP])
        cls = self.classes.get(key, _UNSEEN)
        if cls is _UNSEEN:
            cls = op_class(key)
            if len(self.classes) < MAX_TYPE_LISTS:
                self.classes[key] = cls
        self.ops[ext] = cls  # type: ignore[assignment]

    def _kernel(self, name: str, args: _Args | None, dur: float) -> None:
        ext = args.ext if args is not None else None
        if ext is None:
            self.out.kernels_without_op += 1
        elif ext in self.ops:
            cls = self.ops[ext]
            if cls is None:
                self.out.kernels_without_op += 1
            else:
                self._add(name, cls, dur)
        elif len(self.pending) < MAX_PENDING:
            self.pending.append((ext, name, dur))
        else:
            self.out.kernels_without_op += 1

    def consume(self, events: Iterable[_Event | _Bare]) -> None:
        for e in events:
            cat = e.cat
            if cat in _OP_CATS:
                self._op(getattr(e, "args", None))
            elif cat in _KERNEL_CATS:
                name = self.bound(e.name)
                if name in self.wanted:
                    self._kernel(name, getattr(e, "args", None), e.dur)

    def finish(self) -> OpTypes:
        for ext, name, dur in self.pending:
            cls = self.ops.get(ext)
            if cls is None:
                self.out.kernels_without_op += 1
            else:
                self._add(name, cls, dur)
        self.pending = []
        return self.out


def _split(batch: memoryview) -> list[bytes]:
    """A batch msgspec refused as a whole, read event by event (the same bytes, one value each)."""
    try:
        values = msgspec.json.decode(batch, type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return []
    return [bytes(v) for v in values]


def _decode_each(raws: list[bytes]) -> Iterator[_Event | _Bare]:
    for raw in raws:
        try:
            yield _ONE.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:
                yield _ONE_BARE.decode(raw)  # ill-typed args: the event without them
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue
