"""TensorFlow and JAX profiles (``*.xplane.pb``) read as the engine's events.

TensorFlow's and JAX's profilers write one XSpace per host under ``<logdir>/plugins/profile/<run>/`` of the
TensorBoard log folder. The XSpace is a protobuf (``tensorflow.profiler.XSpace``, defined in TSL's
``tsl/profiler/protobuf/xplane.proto``, Apache-2.0); it is read here by the protobuf library from those
definitions (``_descriptor``: the same fields and numbers as the .proto, nothing hand-parsed), and each event
becomes a Kineto event, so the whole engine (steps, GPU busy/idle, top ops and kernels, transfers, rules) runs on
it unchanged:

* host planes (``/host:CPU``): each line (a thread) gives CPU spans, ``cat: cpu_op``; an event with a
  ``step_num`` stat (``jax.profiler.StepTraceAnnotation``, ``tf.profiler.experimental.Trace(..., step_num=)``)
  is the step ``ProfilerStep#<step_num>``; a host event with a ``correlation_id`` stat whose name is a CUDA/HIP
  launch is a launch: ``cuda_driver`` for the driver API XLA calls (``cuLaunchKernel``), ``cuda_runtime`` for
  ``cudaLaunchKernel`` / ``hipLaunchKernel``. HTA's launch-delay set holds runtime calls only, so XLA's launch
  delays need ``--launch-calls all`` (as ROCm's do);
* device planes (``/device:GPU:<n>``): each ``Stream #<id>`` line gives kernels (``cat: kernel``), memory copies
  (``Memcpy*``, ``memcpy_details``: ``gpu_memcpy``) and sets (``Memset*``: ``gpu_memset``), with the device, the
  stream and the correlation id as args. XProf's derived lines on the same plane (``XLA Ops``, ``XLA Modules``,
  ``Steps``, ...) repeat the streams' time and are not counted, except on a device plane without stream lines
  (TPU), where ``XLA Ops`` is the device's activity;
* other planes (``/host:metadata``, task environment, ...) carry no timed work and are skipped.

Launches by correlation id (#43 item 5). A saved XSpace has its CUPTI / roctracer API plane (``/host:CUPTI``,
``/host:ROCTRACER``) merged into ``/host:CPU`` (TSL's ``MergeHostPlanesAndSortLines``), and TensorFlow names each
kernel launch there after the kernel it launches, linked by its ``correlation_id`` stat. So a host event is a launch
when its correlation id is that of a device op (whatever its name), and a host event named as a launch API with a
correlation id is one too. Both become ``cuda_driver`` rows (their delays need ``--launch-calls all``).

One rank per device (#43 item 5). A host's XSpace holds one plane per device (``/device:GPU:0``, ``:1``...; TPU cores
``/device:TPU:<n>``), each its own timeline: ``expand`` makes one source per GPU/TPU/XPU plane, each with the
host's events and that device's ops (launches only for its own ops). A job's XSpaces (one per host, the files of one
profile run folder) are one job: ranks count on across them in file-name order (``distributedInfo`` rank and world
size in each converted header), so two hosts of 8 GPUs are ranks 0-15 of one run. The plane names are read without
parsing the file (a scan of XSpace's top-level protobuf fields).

Times: an event starts at its line's ``timestamp_ns`` plus its ``offset_ps`` and lasts ``duration_ps``; both
become microseconds, as Kineto writes them. An aggregated event (``num_occurrences`` instead of an offset) has
no time and is skipped (counted in the header as ``xplaneSkippedAggregated``).

Bounded: the protobuf is parsed whole (the format has no streaming reader), so a file larger than
``MAX_XPLANE_BYTES`` is refused with a clear error, and at most ``MAX_XPLANE_EVENTS`` events are converted
(beyond, the file is cut and the header says so; the engine marks the result incomplete).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any, BinaryIO, TypeVar, cast

from profstack.analysis import classify
from profstack.analysis.errors import TraceSourceError

XPLANE_SUFFIX = ".xplane.pb"
MAX_XPLANE_BYTES = 256 << 20
MAX_XPLANE_EVENTS = 20_000_000

_DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU|XPU|CPU):(\d+)")
_HOST_PLANE = "/host:CPU"
_STREAM_LINE = re.compile(r"^Stream #(\d+)")
#: host calls that put work on a GPU stream (the runtime call of every GPU op, joined by correlation id)
_LAUNCH = re.compile(
    r"^(cu|cuda|hip)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ModuleLaunchKernel|ExtLaunchKernel|Memcpy|Memset)"
)
#: XLA's CUPTI collector names copies MemcpyH2D / D2H / D2D / P2P; Kineto (and the engine's direction split) HtoD...
_XLA_MEMCPY = {
    "MemcpyH2D": "Memcpy HtoD",
    "MemcpyD2H": "Memcpy DtoH",
    "MemcpyD2D": "Memcpy DtoD",
    "MemcpyP2P": "Memcpy PtoP",
}
_MEMCPY = re.compile(r"^(Memcpy|cuMemcpy|hipMemcpy)", re.IGNORECASE)
_MEMSET = re.compile(r"^(Memset|cuMemset|hipMemset)", re.IGNORECASE)
_PS_PER_US = 1_000_000


def is_xplane_name(name: str) -> bool:
    return name.endswith(XPLANE_SUFFIX)


@cache
def _classes() -> dict[str, Any]:
    """The XSpace message classes, from a FileDescriptorProto with xplane.proto's messages and field numbers."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="profstack/xplane.proto", package="tensorflow.profiler", syntax="proto3"
    )

    def message(
        name: str, fields: list[tuple[str, int, int, int, str]], oneofs: dict[str, list[str]] | None = None
    ) -> Any:
        m = fdp.message_type.add(name=name)
        index = {}
        for k, (oneof, _) in enumerate((oneofs or {}).items()):
            m.oneof_decl.add(name=oneof)
            index.update(dict.fromkeys(_, k))
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if fname in index:
                f.oneof_index = index[fname]
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    i64, u64, dbl, s, b, msg = F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_DOUBLE, F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE
    p = ".tensorflow.profiler."
    message(
        "XStat",
        [
            ("metadata_id", 1, i64, opt, ""),
            ("double_value", 2, dbl, opt, ""),
            ("uint64_value", 3, u64, opt, ""),
            ("int64_value", 4, i64, opt, ""),
            ("str_value", 5, s, opt, ""),
            ("bytes_value", 6, b, opt, ""),
            ("ref_value", 7, u64, opt, ""),
        ],
        {"value": ["double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value"]},
    )
    message(
        "XEvent",
        [
            ("metadata_id", 1, i64, opt, ""),
            ("offset_ps", 2, i64, opt, ""),
            ("num_occurrences", 5, i64, opt, ""),
            ("duration_ps", 3, i64, opt, ""),
            ("stats", 4, msg, rep, p + "XStat"),
        ],
        {"data": ["offset_ps", "num_occurrences"]},
    )
    message(
        "XLine",
        [
            ("id", 1, i64, opt, ""),
            ("display_id", 10, i64, opt, ""),
            ("name", 2, s, opt, ""),
            ("display_name", 11, s, opt, ""),
            ("timestamp_ns", 3, i64, opt, ""),
            ("duration_ps", 9, i64, opt, ""),
            ("events", 4, msg, rep, p + "XEvent"),
        ],
    )
    message(
        "XEventMetadata",
        [
            ("id", 1, i64, opt, ""),
            ("name", 2, s, opt, ""),
            ("display_name", 4, s, opt, ""),
            ("metadata", 3, b, opt, ""),
            ("stats", 5, msg, rep, p + "XStat"),
            ("child_id", 6, i64, rep, ""),
        ],
    )
    message("XStatMetadata", [("id", 1, i64, opt, ""), ("name", 2, s, opt, ""), ("description", 3, s, opt, "")])
    plane = message(
        "XPlane",
        [
            ("id", 1, i64, opt, ""),
            ("name", 2, s, opt, ""),
            ("lines", 3, msg, rep, p + "XLine"),
            ("event_metadata", 4, msg, rep, p + "XPlane.EventMetadataEntry"),
            ("stat_metadata", 5, msg, rep, p + "XPlane.StatMetadataEntry"),
            ("stats", 6, msg, rep, p + "XStat"),
        ],
    )
    for entry, value in (("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata")):
        nested = plane.nested_type.add(name=entry)
        nested.options.map_entry = True
        nested.field.add(name="key", number=1, type=i64, label=opt)
        nested.field.add(name="value", number=2, type=msg, label=opt, type_name=p + value)
    message(
        "XSpace",
        [
            ("planes", 1, msg, rep, p + "XPlane"),
            ("errors", 2, s, rep, ""),
            ("warnings", 3, s, rep, ""),
            ("hostnames", 4, s, rep, ""),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {"XSpace": message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.profiler.XSpace"))}


def parse_xspace(data: bytes) -> Any:
    """The XSpace message of ``data``; TraceSourceError when it is not one."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    space = _classes()["XSpace"]()
    try:
        space.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise TraceSourceError(f"not a readable XSpace profile (.xplane.pb): {exc}") from exc
    return space


def _stat_value(stat: Any) -> Any:
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "bytes_value":
        return value.hex()
    return value


def _stats(event_stats: Any, stat_names: dict[int, str]) -> dict[str, Any]:
    """An event's stats by name; a ``ref_value`` (an id into the plane's stat metadata) as the name it refers to."""
    out: dict[str, Any] = {}
    for stat in event_stats:
        name = stat_names.get(stat.metadata_id)
        if name is None:
            continue
        if stat.WhichOneof("value") == "ref_value":
            out[name] = stat_names.get(stat.ref_value, "")
        else:
            out[name] = _stat_value(stat)
    return out


_ACCEL_PLANE = ("GPU", "TPU", "XPU")


def _accelerator(plane_name: str) -> bool:
    m = _DEVICE_PLANE.match(plane_name)
    return m is not None and m.group(1) in _ACCEL_PLANE


def _varint(buf: BinaryIO) -> int | None:
    """One protobuf varint from ``buf`` (None at a clean end of input)."""
    shift = result = 0
    while True:
        b = buf.read(1)
        if not b:
            if shift:
                raise TraceSourceError("not a readable XSpace profile (.xplane.pb): truncated varint")
            return None
        result |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise TraceSourceError("not a readable XSpace profile (.xplane.pb): varint too long")


def _skip(buf: BinaryIO, n: int) -> None:
    if n < 0:
        raise TraceSourceError("not a readable XSpace profile (.xplane.pb): negative length")
    if buf.seekable():
        pos = buf.tell()
        end = buf.seek(0, io.SEEK_END)
        if pos + n > end:
            raise TraceSourceError("not a readable XSpace profile (.xplane.pb): truncated")
        buf.seek(pos + n)
        return
    while n > 0:
        chunk = buf.read(min(n, 1 << 20))
        if not chunk:
            raise TraceSourceError("not a readable XSpace profile (.xplane.pb): truncated")
        n -= len(chunk)


_NAME_PEEK = 4096  # a plane's id and name come first (fields 1, 2): read this far into a plane for its name
#: planes scanned at most, and device planes made ranks at most (a host has a few dozen devices): beyond, the file is
#: read whole as one rank, as before (a hostile file cannot make thousands of conversions of itself)
MAX_PLANES_SCANNED = 65_536
MAX_DEVICE_RANKS = 64


def plane_names(buf: BinaryIO) -> list[str]:
    """The names of an XSpace's planes, in order, without parsing it: XSpace field 1 (planes) is a repeated message,
    XPlane field 2 its name. Reads only the first bytes of each plane (seeks past the rest where it can)."""
    return [name for name, _ in plane_heads(buf)]


def plane_heads(buf: BinaryIO) -> list[tuple[str, bool]]:
    """(name, whether it has a line) of each plane, in order (``plane_names``): a plane's fields are written in
    field order, so its lines (field 3) follow its id and name in the bytes read."""
    names: list[tuple[str, bool]] = []
    while (key := _varint(buf)) is not None:
        if len(names) >= MAX_PLANES_SCANNED:
            raise TraceSourceError(f"an XSpace with more than {MAX_PLANES_SCANNED} planes: not expanded")
        field, wire = key >> 3, key & 7
        if wire == 0:
            _varint(buf)
        elif wire == 1:
            _skip(buf, 8)
        elif wire == 5:
            _skip(buf, 4)
        elif wire == 2:
            length = _varint(buf) or 0
            if field != 1:
                _skip(buf, length)
                continue
            head = buf.read(min(length, _NAME_PEEK))
            if len(head) < min(length, _NAME_PEEK):
                raise TraceSourceError("not a readable XSpace profile (.xplane.pb): truncated")
            names.append(_name_in(head))
            _skip(buf, length - len(head))
        else:
            raise TraceSourceError(f"not a readable XSpace profile (.xplane.pb): wire type {wire}")
    return names


def _name_in(head: bytes) -> tuple[str, bool]:
    """XPlane's field 2 (name) among the first fields of ``head`` ("" where it is not there), and whether a line
    (field 3) comes right after it."""
    b = io.BytesIO(head)
    name = ""
    try:
        while (key := _varint(b)) is not None:
            field, wire = key >> 3, key & 7
            if field == 3:
                return name, True
            if field > 3:
                return name, False
            if wire == 0:
                _varint(b)
            elif wire == 2:
                length = _varint(b) or 0
                data = b.read(length)
                if field == 2:
                    name = data.decode("utf-8")  # strict, as the parser: invalid UTF-8 is no XSpace
            else:
                return name, False
    except TraceSourceError:
        return name, False
    except UnicodeDecodeError as exc:
        raise TraceSourceError(f"not a readable XSpace profile (.xplane.pb): a plane name is not UTF-8: {exc}") from exc
    return name, False


def _event_json(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":"), allow_nan=False, default=str).encode()


def _device_event(out: dict[str, Any], args: dict[str, Any], dev_id: int | None, stream: int) -> None:
    name = out["name"]
    if _MEMCPY.match(name) or "memcpy_details" in args:
        out["cat"] = "gpu_memcpy"
        out["name"] = _XLA_MEMCPY.get(name, name)
    elif _MEMSET.match(name):
        out["cat"] = "gpu_memset"
    else:
        out["cat"] = "kernel"
    kargs: dict[str, Any] = {"device": dev_id, "stream": stream}
    if isinstance(args.get("correlation_id"), int):
        kargs["correlation"] = args["correlation_id"]
    if isinstance(args.get("bytes_transferred"), int):
        kargs["bytes"] = args["bytes_transferred"]
    out["args"] = kargs


def _host_event(out: dict[str, Any], args: dict[str, Any], scope: _Scope) -> bool:
    """Make ``out`` the Kineto form of a host event; False where it is left out (a launch of another device's op)."""
    corr = args.get("correlation_id")
    if isinstance(args.get("step_num"), int):
        out["cat"] = "user_annotation"
        out["name"] = f"ProfilerStep#{args['step_num']}"
    elif isinstance(corr, int) and (corr in scope.all_corr or _LAUNCH.match(out["name"])):
        if scope.mine is not None and corr not in scope.mine and (corr in scope.all_corr or not scope.first):
            return False  # another device's launch (or, unmatched, kept once: by the first device's source)
        name = out["name"]
        # TensorFlow names a launch after its kernel; XLA / the CUPTI driver plane call the driver API
        out["cat"] = "cuda_runtime" if name.startswith(("cuda", "hip")) else "cuda_driver"
        out["args"] = {"correlation": corr}
    elif scope.cpu_only and XLA_CPU_COLLECTIVE.match(out["name"]):
        out["cat"] = "user_annotation"  # a span, like gloo's `gloo:all_reduce`: the host's collective time
    elif classify.is_input_wait_name(out["name"]):
        out["cat"] = "user_annotation"  # the step waiting on tf.data, like torch's DataLoader annotation
    else:
        out["cat"] = "cpu_op"
    return True


def _timed_lines(plane: Any, device: re.Match[str] | None) -> list[Any]:
    """The lines whose events are the plane's work: a device's stream lines (else its XLA Ops), a host's all."""
    if device is None:
        return list(plane.lines)
    streams = [line for line in plane.lines if _STREAM_LINE.match(line.name)]
    return streams or [line for line in plane.lines if line.name == "XLA Ops"]


#: XLA's collective HLO ops (``all-reduce.3``, ``all-gather-start``...): on a host without accelerator planes they run
#: on the CPU (JAX's CPU collectives over gloo or MPI), the host's communication
XLA_CPU_COLLECTIVE = re.compile(
    r"^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast)(-start|-done)?(\.\d+)?$"
)


class _Scope:
    """Which device a conversion is for: ``all_corr``, the correlation ids of every device op; ``mine``, those of
    the selected device's (None: every device); ``first``, whether it is the first device's source; ``cpu_only``,
    whether the XSpace has no accelerator plane (XLA's collectives then run on the host)."""

    def __init__(self, all_corr: set[int], mine: set[int] | None, first: bool, cpu_only: bool = False) -> None:
        self.all_corr, self.mine, self.first, self.cpu_only = all_corr, mine, first, cpu_only


def _device_correlations(plane: Any) -> set[int]:
    stat_ids = {k for k, v in plane.stat_metadata.items() if v.name == "correlation_id"}
    out: set[int] = set()
    if not stat_ids:
        return out
    for line in plane.lines:
        for event in line.events:
            for stat in event.stats:
                if stat.metadata_id in stat_ids:
                    kind = stat.WhichOneof("value")
                    if kind in ("int64_value", "uint64_value"):
                        out.add(int(getattr(stat, kind)))
    return out


def _plane_events(
    plane: Any, pid: int, budget: list[int], skipped: list[int], scope: _Scope
) -> Iterator[dict[str, Any]]:
    device = _DEVICE_PLANE.match(plane.name)
    if device is None and not plane.name.startswith(_HOST_PLANE):
        return
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    event_names = {k: (v.display_name or v.name) for k, v in plane.event_metadata.items()}
    event_stats = {k: v.stats for k, v in plane.event_metadata.items() if len(v.stats)}
    dev_id = int(device.group(2)) if device else None
    for line in _timed_lines(plane, device):
        stream = _STREAM_LINE.match(line.name)
        tid = int(stream.group(1)) if stream else line.id
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            if event.WhichOneof("data") == "num_occurrences":
                skipped[0] += 1
                continue
            if budget[0] <= 0:
                return
            budget[0] -= 1
            args = _stats(event.stats, stat_names)
            if event.metadata_id in event_stats:
                args = {**_stats(event_stats[event.metadata_id], stat_names), **args}
            out: dict[str, Any] = {
                "ph": "X",
                "name": event_names.get(event.metadata_id, ""),
                "pid": pid,
                "tid": tid,
                "ts": (base_ps + event.offset_ps) / _PS_PER_US,
                "dur": event.duration_ps / _PS_PER_US,
            }
            if device:
                _device_event(out, args, dev_id, tid)
            elif not _host_event(out, args, scope):
                budget[0] += 1
                continue
            yield out


_LAST: dict[str, Any] = {}  # the last XSpace parsed: its digest, the message, its devices' correlation ids


def _parsed(data: bytes) -> tuple[Any, dict[int, set[int]]]:
    """The XSpace of ``data`` and each device plane's correlation ids, parsed once for the sources of its devices
    (opened one after the other): the last one is kept, keyed by the bytes' digest."""
    digest = hashlib.blake2b(data, digest_size=16).digest()
    if _LAST.get("digest") == digest:
        return _LAST["space"], _LAST["corr"]
    space = parse_xspace(data)
    corr = {k: _device_correlations(p) for k, p in enumerate(space.planes) if _DEVICE_PLANE.match(p.name)}
    _LAST.clear()
    _LAST.update(digest=digest, space=space, corr=corr)
    return space, corr


def xspace_to_kineto(
    data: bytes, *, max_events: int = MAX_XPLANE_EVENTS, plane: str | None = None, rank: Rank | None = None
) -> Iterator[bytes]:
    """The Kineto JSON of the XSpace ``data``, in pieces (header, events, footer). With ``plane`` (a GPU/TPU/XPU
    plane's name), only that device's ops and the host events (its own launches among them); with ``rank`` (rank,
    world size), the header's ``distributedInfo``."""
    space, corr_by_plane = _parsed(data)
    budget, skipped = [max_events], [0]
    planes = [(k, p) for k, p in enumerate(space.planes)]
    accel = [k for k, p in planes if _accelerator(p.name)]
    chosen = next((k for k in accel if space.planes[k].name == plane), None) if plane is not None else None
    all_corr = set().union(*corr_by_plane.values()) if corr_by_plane else set()
    first = chosen is None or chosen == min((k for k in accel if len(space.planes[k].lines)), default=chosen)
    scope = _Scope(all_corr, corr_by_plane.get(chosen) if chosen is not None else None, first, cpu_only=not accel)
    if chosen is not None:  # the other devices' planes are other ranks'
        planes = [(k, p) for k, p in planes if k == chosen or not _DEVICE_PLANE.match(p.name)]
    device_props = [
        {"id": int(m.group(2)), "name": plane.name}
        for _, plane in planes
        if (m := _DEVICE_PLANE.match(plane.name)) and m.group(1) in _ACCEL_PLANE
    ]
    head: dict[str, Any] = {
        "schemaVersion": 1,
        "traceName": "xplane",
        "xplane": {"planes": [p.name for _, p in planes], "hostnames": list(space.hostnames)},
    }
    if chosen is not None:
        head["xplane"]["device_plane"] = space.planes[chosen].name
    if rank is not None:
        head["distributedInfo"] = {"rank": rank[0], "world_size": rank[1]}
    if device_props:
        head["deviceProperties"] = device_props
    yield _event_json(head)[:-1] + b',"traceEvents":['
    first = True
    for pid, xplane in planes:
        for ev in _plane_events(xplane, pid, budget, skipped, scope):
            yield (b"" if first else b",\n") + _event_json(ev)
            first = False
    tail: dict[str, Any] = {"xplaneSkippedAggregated": skipped[0]}
    if budget[0] <= 0:
        tail["xplaneCutAtEvents"] = max_events
    yield b"]," + _event_json(tail)[1:]


class _ChunkReader(io.RawIOBase):
    """A read-only binary file over an iterator of byte pieces (only one piece held at a time)."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._pieces)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class _Converted(io.BufferedReader):
    """The Kineto JSON of an XSpace; ``converted_from_bytes``: the XSpace's size, read whole at open() (what a
    progress bar counts: input bytes, not the JSON made of them; profstack/analysis/reader.py)."""

    converted_from_bytes: int = 0


Rank = tuple[int, int]  # (rank, world size)


class XPlaneSource:
    """A TraceSource over another one that holds an ``.xplane.pb``: opened, it reads the Kineto JSON of it (with
    ``device``, of one of its GPU/TPU/XPU planes: ``name`` then ends ``#<plane name>``; with ``rank``, the rank and
    world size its header states)."""

    def __init__(self, inner: Any, *, plane: str | None = None, rank: Rank | None = None) -> None:
        self.inner = inner
        self.plane, self.rank = plane, rank
        self.name: str = inner.name if plane is None else f"{inner.name}#{plane}"
        self.size_hint: int | None = inner.size_hint

    def __getattr__(self, attr: str) -> Any:  # path, obj, failure: what callers read off the wrapped source
        if attr.startswith("__") or attr in ("inner", "plane", "rank"):  # pickling looks these up before __init__
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def open(self) -> BinaryIO:
        if self.size_hint is not None and self.size_hint > MAX_XPLANE_BYTES:
            raise TraceSourceError(
                f"XSpace profile of {self.size_hint} bytes, more than the {MAX_XPLANE_BYTES} this reader parses "
                "whole; open it in XProf (tensorboard-plugin-profile) instead"
            )
        with self.inner.open() as fh:
            data = fh.read(MAX_XPLANE_BYTES + 1)
        if len(data) > MAX_XPLANE_BYTES:
            raise TraceSourceError(f"XSpace profile larger than {MAX_XPLANE_BYTES} bytes; open it in XProf instead")
        pieces = xspace_to_kineto(data, plane=self.plane, rank=self.rank)
        reader = _Converted(_ChunkReader(pieces), buffer_size=1 << 20)
        reader.converted_from_bytes = len(data)
        return cast(BinaryIO, reader)


S = TypeVar("S")


def as_kineto(source: S) -> S:
    """``source`` itself, or, when its name ends ``.xplane.pb``, an XPlaneSource over it (which answers for the
    wrapped source's other attributes: ``path``, ``obj``, ``failure``)."""
    name = str(getattr(source, "name", ""))
    return cast(S, XPlaneSource(source)) if is_xplane_name(name) else source


def device_planes(source: Any) -> list[str] | None:
    """The GPU/TPU/XPU planes of the XSpace ``source`` holds that recorded anything (a line: TensorFlow lists every
    visible GPU, used or not), by name (``plane_heads``); None where it cannot be read (its analysis says why)."""
    try:
        with source.open() as fh:
            return [n for n, has_lines in plane_heads(fh) if has_lines and _accelerator(n)]
    except (TraceSourceError, OSError):
        return None


def expand(sources: list[Any]) -> list[Any]:
    """One source per device of each XSpace among ``sources``, the XSpaces of one folder (a profile run: one file
    per host) ranked as one job: ranks count on across them in name order, each header saying its rank and the
    job's world size. Other sources pass unchanged, in place."""
    groups: dict[str, list[int]] = {}
    for i, src in enumerate(sources):
        if is_xplane_name(str(getattr(src, "name", ""))):
            folder = str(getattr(src, "name", "")).rsplit("/", 1)[0] if "/" in str(src.name) else ""
            groups.setdefault(folder, []).append(i)
    if not groups:
        return sources
    replace: dict[int, list[Any]] = {}
    for members in groups.values():
        members.sort(key=lambda i: str(sources[i].name))
        planes = {i: device_planes(_inner(sources[i])) for i in members}
        world = sum(max(len(p or []), 1) for p in planes.values())
        rank = 0
        for i in members:
            inner, devices = _inner(sources[i]), planes[i] or []
            if len(devices) <= 1 or len(devices) > MAX_DEVICE_RANKS:  # one timeline (or too many): read whole
                replace[i] = [XPlaneSource(inner, rank=(rank, world) if world > 1 else None)]
                rank += 1
                continue
            replace[i] = [XPlaneSource(inner, plane=name, rank=(rank + d, world)) for d, name in enumerate(devices)]
            rank += len(devices)
    out: list[Any] = []
    for i, src in enumerate(sources):
        out.extend(replace.get(i, [src]))
    return out


def _inner(source: Any) -> Any:
    return source.inner if isinstance(source, XPlaneSource) else source
