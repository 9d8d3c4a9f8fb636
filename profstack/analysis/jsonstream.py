"""Streaming split of a Kineto JSON object into top-level metadata and batches of raw event bytes.

Fast path: libkineto writes one event per item separated by ``"\\n  },\\n  {"`` (minified writers use
``"},{"``). The buffer is cut at the *last* separator and the whole region is handed to the caller as
one JSON array. A cut at a wrong place (inside a string, inside a nested object, past the end of the
array) can never decode as a list of events, so the caller's decode validates the cut: on failure it
calls :meth:`EventStream.reject` and the region is re-split by an exact scanner that tracks strings,
escapes and bracket depth. Memory is bounded by the chunk size plus the largest single event.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

import msgspec

from profstack.analysis.errors import (
    EmptyTraceError,
    GiantEventError,
    MalformedJsonError,
    NotKinetoError,
    TraceError,
    TruncatedTraceError,
)

KINETO_SEP = b"\n  },\n  {"
_MIN_SEPS = (b"},{", b"}, {", b"},\n{")
_SEP_RE = re.compile(rb"\}\s*,\s*\{")
_STRUCT = re.compile(rb'["{}\[\]]')
_STR_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STR_PREFIX = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_WS = re.compile(rb"[ \t\r\n]*")
_SCALAR = re.compile(rb"[^ \t\r\n,}\]]+")
_EXACT_GROUP = 2048  # events per exact-mode batch

# top-level keys whose (small) values are decoded; all others are skipped without decoding
META_KEYS = frozenset(
    {
        "schemaVersion",
        "deviceProperties",
        "distributedInfo",
        "baseTimeNanoseconds",
        "traceName",
        "displayTimeUnit",
        "profile_memory",  # PyTorch's profiler options (2.x): the memory attribution keeps an op log for these
        "record_shapes",  # ... and op input types are there to read (profstack.analysis.op_types)
    }
)

# a fast batch is a memoryview of one JSON array, valid only until the next iteration step
Batch = memoryview | list[bytes]


MAX_KEYS_SEEN = 32


class ScanState:
    """Where an incomplete scan stopped, relative to the value's start, so a retry after more input
    resumes instead of rescanning (keeps giant values linear)."""

    __slots__ = ("depth", "off", "str_off")

    def __init__(self) -> None:
        self.off = 0  # resume searching here
        self.depth = 0  # bracket depth reached at ``off``
        self.str_off = -1  # >= 0: inside a string whose content starts here


def _string_end(buf: bytes | bytearray, i: int) -> tuple[int, int]:
    """Inside a string at ``i`` (not within an escape): (end after the closing quote, _) or (-1, resume)."""
    j = _STR_PREFIX.match(buf, i).end()  # type: ignore[union-attr]  # always matches (maybe empty)
    if j < len(buf) and buf[j] == 0x22:
        return j + 1, j + 1
    return -1, j


def scan_value_end(buf: bytes | bytearray, start: int, st: ScanState | None = None) -> int:
    """End (exclusive) of the JSON value starting at ``buf[start]``; -1 if incomplete in ``buf``.

    Pass the same ``st`` again after appending input to resume where the scan stopped.
    """
    if st is None:
        st = ScanState()
    first = buf[start]
    if first == 0x22:  # string
        if st.off == 0:
            m = _STR_BODY.match(buf, start + 1)
            if m is not None:
                return m.end()
        end, resume = _string_end(buf, start + max(st.off, 1))
        if end < 0:
            st.off = resume - start
        return end
    if first not in (0x7B, 0x5B):  # scalar
        m = _SCALAR.match(buf, start)
        if m is None or m.end() >= len(buf):
            return -1
        return m.end()
    depth = st.depth
    i = start + st.off
    if st.str_off >= 0:
        end, resume = _string_end(buf, i)
        if end < 0:
            st.off = resume - start
            return -1
        st.str_off = -1
        i = end
    search = _STRUCT.search
    match_str = _STR_BODY.match
    while True:
        m = search(buf, i)
        if m is None:
            st.off, st.depth = len(buf) - start, depth
            return -1
        c = buf[m.start()]
        if c == 0x22:
            ms = match_str(buf, m.end())
            if ms is None:
                _, resume = _string_end(buf, m.end())
                st.str_off = m.end() - start
                st.off, st.depth = resume - start, depth
                return -1
            i = ms.end()
            continue
        i = m.end()
        if c in (0x7B, 0x5B):
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i


class EventStream:
    """Iterate batches of trace events from decompressed chunks; collects top-level metadata."""

    def __init__(self, chunks: Iterator[bytes], *, max_value_bytes: int, read_size_hint: int = 4 << 20) -> None:
        self._chunks = chunks
        self._max_value = max_value_bytes
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        self._rejected = False
        self._read_hint = read_size_hint
        self.meta: dict[str, Any] = {}
        self.saw_trace_events = False
        self.keys_seen: list[str] = []  # the top-level keys, in order (the first MAX_KEYS_SEEN): what a non-trace is
        self.had_bom = False
        self.finished = False  # the closing brace of the top-level object was reached
        self._header_only = False  # header(): stop at the traceEvents key
        self.consumed_bytes = 0  # decompressed bytes dropped from the buffer so far
        self.total_bytes = 0  # decompressed bytes received so far
        # an input error after which the bytes already buffered are still parsed (truncated/corrupt gzip)
        self._pending: TraceError | None = None

    def unparsed(self) -> tuple[int, bytes]:
        """(offset, the input from ``offset`` to the end of what was received), where ``offset`` is the
        position up to which the input is parsed, so it lies outside any JSON string.

        The position only moves past bytes scanned exactly or decoded as a whole batch by the consumer (a
        batch that does not decode is rejected, then scanned exactly), and both end outside strings. Valid
        while the next chunk is being produced (``_LongStrings`` calls it from inside ``_fill``)."""
        return self.consumed_bytes + self._pos, bytes(self._buf[self._pos :])

    # -- buffer helpers -------------------------------------------------------------------------
    def _fill(self) -> bool:
        """Append the next chunk; False at end of input."""
        if self._eof:
            return False
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._eof = True
            return False
        except TraceError as exc:
            if not exc.partial_ok:
                raise
            self._pending = exc
            self._eof = True
            return False
        self.total_bytes += len(chunk)
        if self._pos > 1:
            # keep one byte before the position: a fast batch borrows it for its opening '['
            drop = self._pos - 1
            del self._buf[:drop]
            self.consumed_bytes += drop
            self._pos = 1
        self._buf += chunk
        return True

    def _skip_ws(self) -> int:
        """Skip whitespace (reading more as needed); returns the next byte or -1 at end of input."""
        while True:
            m = _WS.match(self._buf, self._pos)
            self._pos = m.end() if m else self._pos
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return -1

    def _value_end(self) -> int:
        """End of the value at the current position, reading more input as needed."""
        st = ScanState()
        while True:
            end = scan_value_end(self._buf, self._pos, st)
            if end >= 0:
                if end - self._pos > self._max_value:
                    raise GiantEventError(f"a single JSON value exceeds {self._max_value} bytes")
                return end
            if len(self._buf) - self._pos > self._max_value:
                raise GiantEventError(f"a single JSON value exceeds {self._max_value} bytes")
            if not self._fill():
                if self._buf[self._pos] not in (0x7B, 0x5B, 0x22):
                    return len(self._buf)  # scalar at the very end of input
                raise TruncatedTraceError(f"JSON ends inside a value at byte {self.consumed_bytes + self._pos}")

    def reject(self) -> None:
        """The caller could not decode the last fast batch: re-split that region exactly."""
        self._rejected = True

    # -- main iteration -------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        """The top-level metadata written before ``traceEvents`` (Kineto writes ``distributedInfo`` and
        ``deviceProperties`` there), reading no further than that key: the rank peek of a multi-file job.
        A header that is cut or malformed raises as in :meth:`batches`; an input error held back for after
        the bytes already received (a truncated gzip, ``_pending``) does not, since the header before it
        parsed whole."""
        self._header_only = True
        for _ in self._batches():  # yields nothing: _batches returns at the traceEvents key
            pass
        return self.meta

    def batches(self) -> Generator[Batch, None, None]:
        """Batches of events; an input error is raised only after everything before it was yielded."""
        try:
            yield from self._batches()
        except TraceError:
            if self._pending is not None:
                raise self._pending from None
            raise
        if self._pending is not None:
            raise self._pending

    def _batches(self) -> Iterator[Batch]:
        c = self._skip_ws()
        if c == 0xEF:  # a UTF-8 byte-order mark (editors on Windows write one): JSON ignores it, so do we
            while len(self._buf) - self._pos < 3 and self._fill():
                pass
            if bytes(self._buf[self._pos : self._pos + 3]) == b"\xef\xbb\xbf":
                self._pos += 3
                self.had_bom = True
                c = self._skip_ws()
        if c == -1:
            if self.total_bytes == 0:
                raise EmptyTraceError("file is empty")
            return
        if c != 0x7B:
            raise _bad_start(c)
        self._pos += 1
        while True:
            c = self._skip_ws()
            if c == 0x2C:  # ','
                self._pos += 1
                continue
            if c == 0x7D:  # '}'
                self._pos += 1
                self.finished = True
                return
            if c == -1:
                raise TruncatedTraceError("JSON ends inside the top-level object")
            if c != 0x22:
                raise MalformedJsonError(f"expected a key at byte {self.consumed_bytes + self._pos}, found {chr(c)!r}")
            end = self._value_end()
            key = bytes(self._buf[self._pos + 1 : end - 1]).decode("utf-8", "replace")
            self._pos = end
            if len(self.keys_seen) < MAX_KEYS_SEEN:
                self.keys_seen.append(key[:64])
            if self._skip_ws() != 0x3A:
                raise MalformedJsonError(f"expected ':' after key {key[:60]!r}")
            self._pos += 1
            c = self._skip_ws()
            if c == -1:
                raise TruncatedTraceError(f"JSON ends after key {key[:60]!r}")
            if key == "traceEvents":
                if c != 0x5B:
                    raise NotKinetoError("traceEvents is not an array")
                self.saw_trace_events = True
                self._pos += 1
                if self._header_only:
                    return
                yield from self._events()
                continue
            end = self._value_end()
            if key in META_KEYS:
                try:
                    self.meta[key] = msgspec.json.decode(bytes(self._buf[self._pos : end]))
                except msgspec.DecodeError:
                    self.meta[key] = None
            self._pos = end

    def _events(self) -> Iterator[Batch]:
        while True:
            # make the buffer reasonably full before cutting a fast batch
            while len(self._buf) - self._pos < self._read_hint and not self._eof:
                if not self._fill():
                    break
            buf = self._buf
            pos = self._pos
            cut = self._find_cut(buf, pos)
            if cut is not None and pos >= 1:
                end, nxt = cut
                # zero-copy: turn the byte before the batch and the separator's comma into '[' ... ']'
                before, after = buf[pos - 1], buf[end]
                buf[pos - 1] = 0x5B
                buf[end] = 0x5D
                view = memoryview(buf)[pos - 1 : end + 1]
                try:
                    yield view
                finally:
                    view.release()
                    buf[pos - 1] = before
                    buf[end] = after
                if not self._rejected:
                    self._pos = nxt
                    continue
                self._rejected = False
                done = yield from self._exact(limit=end)
            else:
                done = yield from self._exact(limit=None)
            if done:
                return

    def _find_cut(self, buf: bytearray, pos: int) -> tuple[int, int] | None:
        i = buf.rfind(KINETO_SEP, pos)
        if i >= 0:
            return i + 4, i + 5
        for sep in _MIN_SEPS:
            i = buf.rfind(sep, pos)
            if i >= 0:
                return i + 1, i + 2
        tail_start = max(pos, len(buf) - (1 << 20))
        found = None
        for m in _SEP_RE.finditer(buf, tail_start):
            found = m.start()
        if found is not None:
            return found + 1, found + 2
        return None

    def _exact(self, limit: int | None) -> Generator[Batch, None, bool]:
        """Split events one by one until ``limit`` (or one group); returns True at the array's end."""
        group: list[bytes] = []
        start_consumed = self.consumed_bytes
        while True:
            c = self._skip_ws()
            if c == 0x2C:
                self._pos += 1
                continue
            if c == 0x5D:  # ']'
                self._pos += 1
                if group:
                    yield group
                return True
            if c == -1:
                if group:
                    yield group
                raise TruncatedTraceError("JSON ends inside traceEvents")
            end = self._value_end()
            group.append(bytes(self._buf[self._pos : end]))
            self._pos = end
            # limit is relative to the buffer at the time of the cut; _fill may have shifted it
            shifted = self.consumed_bytes - start_consumed
            if (limit is not None and self._pos >= limit - shifted) or len(group) >= _EXACT_GROUP:
                yield group
                return False


def _bad_start(c: int) -> Exception:
    if c == 0x5B:
        return NotKinetoError("top-level JSON is an array, not a Kineto trace object")
    return MalformedJsonError(f"not JSON: first byte {chr(c)!r}")


#: JSON decoded at a time by the analysis passes (parse, memory): bounds the decoded events held, amortises the
#: per-batch work
BATCH_BYTES = 1 << 20

_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])


def raw_events(stream: EventStream) -> Iterator[bytes]:
    """Every event of ``stream`` as its raw JSON bytes; a batch that does not decode is rejected (the
    stream then splits it event by event)."""
    for batch in stream.batches():
        if isinstance(batch, memoryview):
            try:
                raws = [bytes(raw) for raw in _RAW_EVENTS.decode(batch)]
            except (msgspec.DecodeError, msgspec.ValidationError):
                stream.reject()
                continue
            yield from raws
        else:
            yield from batch
