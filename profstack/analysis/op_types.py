"""The precision of kernels whose names carry no types, read from the operators that launched them (#34 item 3).

With ``record_shapes=True`` Kineto writes each operator's input dtypes (``cpu_op`` args ``"Input type": ["c10::
BFloat16", "c10::BFloat16", "", "Scalar"]``) and its ``"External id"``; every kernel it launches carries the same
``"External id"`` (Kineto's ``linkedActivity``: the kernel's op). A kernel whose demangled name holds its argument
types is read from them (``profstack.analysis.precision``), and so is one whose name carries a data-type word or
Tensile's code (the kernel's own statement: a fused op takes bf16 and quantises inside, so Blackwell's
``bmm_MxE4m3_MxE2m1...`` under a bf16 op is fp8 math). A Triton / cuBLAS-family / MTIA kernel whose name says
nothing, or only a family's default (``sgemm``, ``igemm``), is read from the op's input types.

The main pass collects what this needs as it reads each event (#44 item 1: no second read of the file): a
:class:`Collector` per file, filled by ``parse._Parser._consume_events`` and by its C twin (``csrc/consumer.c``) with
the same state, from the ``External id`` (or 2021's ``external id``) and ``Input type`` the parser decodes into
``parse.Args``. It remembers each operator's class by External id (``MAX_OPS``), and for the kernels the rank
analysis may ask about (computation kernels whose names say nothing or only a family default:
``classify.follows``) the kernels and time per class of their operator; a kernel written before its
operator waits (``MAX_PENDING``) until the end of the file. A file whose header says ``record_shapes`` was off
gets no collector; one whose header does not promise them stops collecting after ``GIVE_UP_EVENTS`` events
without an operator carrying input types. The rank analysis uses the result only where it can change an answer:
the rank's untyped computation kernels take at least ``MIN_UNTYPED_SHARE`` of computation time. It yields, per
kernel name, the kernels and time by the class of their operator's inputs; the rank applies those shares to the
kernel's time in the analysed window (a file's mix of dtypes per kernel name is taken as the window's).

Reading the op's types: the narrowest float type wins (an fp8 GEMM's scales are float); integer inputs (indices,
masks) say nothing, except that an op whose only typed inputs are ``signed char`` (int8, as ``torch._int_mm``) is
int8. TF32 cannot show in dtypes (it is how fp32 inputs are computed): a kernel whose naming scheme says TF32 and
whose op says fp32 stays TF32.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from profstack.analysis.loose import loose_int
from profstack.analysis.precision import ORDER, TYPE_CLASSES

#: of the rank's computation-kernel time: below it the op types could move the precision mix by less than this,
#: and are not used
MIN_UNTYPED_SHARE = 0.05
# measured (tracemalloc, python -m bench.op_types_cost --memory): Kineto numbers operators 1, 2, 3, ...: 1 M of them
# take 1 MB (a byte per External id below DENSE_IDS), 250,000 waiting kernels 5 MB (three array columns); 1 M
# operators with ids beyond DENSE_IDS ~75 MB (a dict). Beyond the bounds kernels keep their name's reading, counted.
MAX_OPS = 1_000_000  # operators remembered (External id -> class)
DENSE_IDS = 16 << 20  # External ids in [0, DENSE_IDS) are remembered in a byte each (Collector.dense)
MAX_PENDING = 250_000  # followed kernels seen before their operator (Kineto writes CPU events first)
MAX_TYPES_PER_OP = 64  # an op's input list is read this far
#: events read without one operator carrying input types, after which a file whose header does not say
#: record_shapes stops collecting (Kineto writes the CPU side first)
GIVE_UP_EVENTS = 200_000
MAX_TYPE_LISTS = 65_536  # distinct "Input type" texts whose class is remembered per file ...
MAX_TYPE_LIST_BYTES = 4 << 20  # ... and their bytes together

#: class codes: an index into precision.ORDER, or one of these
NO_CLASS = -1  # the operator's inputs say no class (integers, masks, scalars)
INVALID = -2  # "Input type" is not a list of strings: the operator is not remembered (as an event without args)
#: Collector.follow: a kernel name id's entry
FOLLOW_UNKNOWN, FOLLOW_NO, FOLLOW_YES = 0, 1, 2

_TYPE_LIST = msgspec.json.Decoder(list[str])
_ANY = msgspec.json.Decoder()


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


def types_code(text: bytes) -> int:
    """The class code of an ``"Input type"`` value's JSON text: its class's index in ``precision.ORDER``,
    ``NO_CLASS``, or ``INVALID`` where it is not a list of strings."""
    try:
        types = _TYPE_LIST.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return INVALID
    cls = op_class(types)
    return NO_CLASS if cls is None else ORDER.index(cls)


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


def ext_of_text(text: bytes) -> int | None:
    """An External id's JSON text read by the parser's rule for integers (``loose_int``: text of digits, an integral
    float); None for anything else, a number beyond double's range included."""
    try:
        value: Any = int(text)  # a JSON integer (JSON has no other text int() reads)
    except ValueError:
        try:
            value = _ANY.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
    return loose_int(value)


def external_id(args: Any) -> int | None:
    """An event's External id (``parse.Args``, JSON text): ``External id``, else (absent or null) 2021's
    ``external id``; None where neither is an integer."""
    text = bytes(args.external_id)
    if not text or text == b"null":
        text = bytes(args.external_id_2021)
        if not text:
            return None
    return ext_of_text(text)


class Collector:
    """One file's operators by External id and followed kernels by their operator's class, filled event by event
    by the main pass (``parse._Parser._consume_events``, and its C twin with the same state).

    ``by_key``: name id * 8 + class code -> [kernels, µs] (the order of first sight); ``finish`` settles the waiting
    kernels at the end of the file and ``result`` reads it for the rank's names."""

    __slots__ = (
        "by_key",
        "code_bytes",
        "codes",
        "dense",
        "done",
        "follow",
        "follows",
        "gave_up",
        "kernels_without_op",
        "max_ops",
        "max_pending",
        "n_ops",
        "names",
        "ops",
        "ops_dropped",
        "pending_dur",
        "pending_ext",
        "pending_nid",
        "promised",
    )

    def __init__(self, names: list[str], follows: Callable[[str], bool], *, promised: bool) -> None:
        self.names = names  # the analysis' symbol table (SymbolTable.names): a kernel's name id -> its name
        self.follows = follows  # whether the rank analysis may ask about a kernel of this name
        self.promised = promised  # the header says record_shapes: collected to the end whatever comes first
        self.max_ops, self.max_pending = MAX_OPS, MAX_PENDING
        self.dense = bytearray()  # External id in [0, DENSE_IDS) -> class code + 2 (0: no operator of that id)
        self.ops: dict[int, int] = {}  # other External ids -> class code
        self.n_ops = 0  # operators remembered, in both
        self.pending_ext: array[int] = array("q")  # followed kernels waiting for their operator
        self.pending_nid: array[int] = array("i")
        self.pending_dur: array[float] = array("d")
        self.by_key: dict[int, list[Any]] = {}
        self.follow = bytearray()  # name id -> FOLLOW_*
        self.codes: dict[bytes, int] = {}  # "Input type" JSON text -> class code (bounded)
        self.code_bytes = 0
        self.kernels_without_op = 0
        self.ops_dropped = 0
        self.gave_up = False
        self.done = False

    # ---- what the per-event loop calls (csrc/consumer.c calls types_code and new_name, and does the rest) ----

    def types_code(self, text: bytes) -> int:
        code = self.codes.get(text)
        if code is None:
            code = types_code(text)
            if len(self.codes) < MAX_TYPE_LISTS and self.code_bytes + len(text) <= MAX_TYPE_LIST_BYTES:
                self.codes[text] = code
                self.code_bytes += len(text)
        return code

    def new_name(self, nid: int) -> int:
        """A kernel name id met for the first time: whether its kernels are followed (FOLLOW_YES / FOLLOW_NO)."""
        follow = self.follow
        if len(follow) <= nid:
            follow.extend(bytes(nid + 1 - len(follow)))
        flag = FOLLOW_YES if self.follows(self.names[nid]) else FOLLOW_NO
        follow[nid] = flag
        return flag

    def op(self, args: Any) -> None:
        """An operator (a timed ``cpu_op`` with args): remembered by External id where it has input types."""
        text = args.input_types
        if not text:  # no "Input type" (msgspec.Raw's empty default)
            return
        ext = external_id(args)
        if ext is None:
            return
        code = self.types_code(bytes(text))
        if code == INVALID:
            return
        if self.n_ops >= self.max_ops:
            self.ops_dropped += 1
            return
        if 0 <= ext < DENSE_IDS:
            dense = self.dense
            if ext >= len(dense):
                dense.extend(bytes(ext + 1 - len(dense)))
            elif dense[ext]:
                dense[ext] = code + 2
                return
            dense[ext] = code + 2
        elif ext in self.ops:
            self.ops[ext] = code
            return
        else:
            self.ops[ext] = code
        self.n_ops += 1

    def _code(self, ext: int) -> int | None:
        """The class code of the operator of this External id, or None where none was remembered."""
        dense = self.dense
        if 0 <= ext < len(dense):
            got = dense[ext]
            return got - 2 if got else None
        return self.ops.get(ext)

    def kernel(self, args: Any, nid: int, dur: float) -> None:
        """A kernel: counted under its operator's class, waiting for its operator, or without one."""
        follow = self.follow
        flag = follow[nid] if nid < len(follow) else FOLLOW_UNKNOWN
        if flag == FOLLOW_UNKNOWN:
            flag = self.new_name(nid)
        if flag != FOLLOW_YES:
            return
        ext = external_id(args) if args is not None else None
        if ext is None:
            self.kernels_without_op += 1
            return
        code = self._code(ext)
        if code is None:
            if len(self.pending_ext) < self.max_pending:
                self.pending_ext.append(ext)
                self.pending_nid.append(nid)
                self.pending_dur.append(dur)
            else:
                self.kernels_without_op += 1
        elif code < 0:
            self.kernels_without_op += 1
        else:
            self._add(nid, code, dur)

    def _add(self, nid: int, code: int, dur: float) -> None:
        key = nid * 8 + code
        cell = self.by_key.get(key)
        if cell is None:
            cell = self.by_key[key] = [0, 0.0]
        cell[0] += 1
        cell[1] += max(dur, 0.0)

    # ---- the file's end, and the rank's read ----

    def give_up(self) -> None:
        """No operator carried input types early in a file whose header did not promise them: stop here (every
        waiting kernel is without one)."""
        self.gave_up = True
        if not self.n_ops:
            self.kernels_without_op += len(self.pending_ext)
            self.pending_ext, self.pending_nid, self.pending_dur = array("q"), array("i"), array("d")
        self.finish()

    def finish(self) -> None:
        """The kernels still waiting, settled now that the whole file is read; the operators are let go."""
        if self.done:
            return
        for ext, nid, dur in zip(self.pending_ext, self.pending_nid, self.pending_dur, strict=True):
            code = self._code(ext)
            if code is None or code < 0:
                self.kernels_without_op += 1
            else:
                self._add(nid, code, dur)
        self.pending_ext, self.pending_nid, self.pending_dur = array("q"), array("i"), array("d")
        self.ops, self.dense = {}, bytearray()
        self.codes = {}
        self.done = True

    def result(self, wanted: set[str]) -> OpTypes:
        """The file's :class:`OpTypes` for the kernels named in ``wanted`` (names as the symbol table holds them)."""
        self.finish()
        out = OpTypes(
            kernels_without_op=self.kernels_without_op,
            ops_dropped=self.ops_dropped,
            files_read=1,
            gave_up=self.gave_up,
        )
        names = self.names
        for key, (n, us) in self.by_key.items():
            name = names[key >> 3]
            if name in wanted:
                out.by_name.setdefault(name, {})[ORDER[key & 7]] = [n, us]
        return out
