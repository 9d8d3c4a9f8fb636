"""Perfetto-friendly export of a step window: streams events, keeps those overlapping the window."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import msgspec

from profstack.analysis.errors import StepWindowError, TraceError
from profstack.analysis.jsonstream import EventStream
from profstack.analysis.options import GIB
from profstack.analysis.parse import STEP_PREFIX
from profstack.analysis.reader import gzip_writer, iter_chunks
from profstack.analysis.sources import TraceSource


class _TrimEvent(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    ts: float | None = None
    dur: float = 0.0


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_TRIM = msgspec.json.Decoder(_TrimEvent)
_KEEP_META = ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName",
              "displayTimeUnit")  # fmt: skip


def _iter_raw(stream: EventStream) -> Iterator[bytes]:
    for batch in stream.batches():
        if isinstance(batch, memoryview):
            try:
                raws = [bytes(raw) for raw in _RAW_LIST.decode(batch)]
            except (msgspec.DecodeError, msgspec.ValidationError):
                stream.reject()
                continue
            yield from raws
        else:
            yield from batch


def _step_window(
    source: TraceSource, steps: tuple[int, int], max_decompressed: int, max_event: int
) -> tuple[float, float]:
    lo, hi = steps
    start = end = None
    with source.open() as fh:
        stream = EventStream(iter_chunks(fh, max_decompressed=max_decompressed), max_value_bytes=max_event)
        for raw in _iter_raw(stream):
            if STEP_PREFIX.encode() not in raw:
                continue
            try:
                ev = _TRIM.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if ev.ph != "X" or ev.ts is None or not ev.name.startswith(STEP_PREFIX):
                continue
            try:
                num = int(ev.name[len(STEP_PREFIX) :])
            except ValueError:
                continue
            if lo <= num <= hi:
                start = ev.ts if start is None else min(start, ev.ts)
                end = ev.ts + ev.dur if end is None else max(end, ev.ts + ev.dur)
    if start is None or end is None:
        raise StepWindowError(f"no ProfilerStep in {lo}:{hi}", source=source.name)
    return start, end


def trim_trace(
    source: TraceSource,
    out: BinaryIO,
    *,
    steps: tuple[int, int] | None,
    max_events: int | None,
    compress: bool = False,
    max_decompressed_bytes: int = 20 * GIB,
    max_event_bytes: int = 256 << 20,
) -> int:
    """Write the events of ``source`` that overlap ``steps`` (all when None) as Chrome-trace JSON.

    Metadata events (``ph: M``) are always kept. At most ``max_events`` non-metadata events are written
    (the earliest in file order). ``compress`` writes gzip. Returns the number of events written.
    Streams: memory does not grow with the trace. A truncated or corrupt tail ends the output early
    (still valid JSON) instead of failing; an unusable input or an unknown step window raises TraceError.
    """
    window = _step_window(source, steps, max_decompressed_bytes, max_event_bytes) if steps is not None else None
    sink: BinaryIO = gzip_writer(out) if compress else out
    written = 0
    kept = 0
    meta: dict[str, object] = {}
    try:
        sink.write(b'{\n  "traceEvents": [\n')
        first = True
        with source.open() as fh:
            stream = EventStream(
                iter_chunks(fh, max_decompressed=max_decompressed_bytes), max_value_bytes=max_event_bytes
            )
            try:
                for raw in _iter_raw(stream):
                    try:
                        ev = _TRIM.decode(raw)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        continue
                    if ev.ph != "M":
                        if window is not None:
                            if ev.ts is None:
                                continue
                            if ev.ts + max(ev.dur, 0.0) < window[0] or ev.ts > window[1]:
                                continue
                        if max_events is not None and kept >= max_events:
                            continue
                        kept += 1
                    if not first:
                        sink.write(b",\n")
                    sink.write(raw)
                    first = False
                    written += 1
            except TraceError as exc:
                # a truncated/corrupt tail still yields a valid, viewable file of what was read
                if not exc.partial_ok or written == 0:
                    raise
            meta = stream.meta
        sink.write(b"\n  ]")
        for key in _KEEP_META:
            if meta.get(key) is not None:
                sink.write(b',\n  "' + key.encode() + b'": ' + msgspec.json.encode(meta[key]))
        sink.write(b"\n}\n")
    except TraceError as exc:
        raise exc.with_source(source.name) from None
    finally:
        if compress:
            sink.close()
    return written
