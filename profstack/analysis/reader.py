"""Chunked byte reading with transparent gzip (detected by magic bytes) and a decompressed-size budget.

gzip is inflated by ISA-L (the ``isal`` package, 2-2.3x faster than zlib on the benchmark's cores) when it
imports, else by the standard library's zlib; both give the same bytes and the same errors. The environment
variable ``PROFSTACK_INFLATE=zlib`` forces zlib (the benchmark measures both).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, cast

from profstack.analysis.errors import (
    CorruptGzipError,
    DecompressionBombError,
    TraceSourceError,
    TruncatedTraceError,
)

GZIP_MAGIC = b"\x1f\x8b"
READ_SIZE = 1 << 20  # compressed bytes per read
OUT_SIZE = 1 << 20  # decompressed bytes per yielded chunk (bounds memory per step)


class _Decompressor(Protocol):
    """What ``zlib.decompressobj()`` and ``isal.isal_zlib.decompressobj()`` both return."""

    @property
    def unconsumed_tail(self) -> bytes: ...
    @property
    def unused_data(self) -> bytes: ...
    @property
    def eof(self) -> bool: ...
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...
    def flush(self, length: int = ..., /) -> bytes: ...


@dataclass(frozen=True)
class Inflater:
    """A gzip inflate backend: a zlib-compatible ``decompressobj`` and the exception it raises."""

    name: str
    decompressobj: Callable[[int], _Decompressor]
    error: type[Exception]


ZLIB = Inflater("zlib", zlib.decompressobj, zlib.error)


def _best_inflater() -> Inflater:
    if os.environ.get("PROFSTACK_INFLATE", "").lower() == "zlib":
        return ZLIB
    try:
        from isal import isal_zlib
    except ImportError:  # no isal wheel for this platform: zlib is correct, only slower
        return ZLIB
    error: type[Exception] = isal_zlib.IsalError  # type: ignore[assignment]  # the stub types the class as an instance
    return Inflater("isal", isal_zlib.decompressobj, error)


#: The backend ``iter_chunks`` inflates gzip with (looked up at each call, so tests can swap it).
INFLATER = _best_inflater()


def gzip_writer(out: BinaryIO) -> BinaryIO:
    """A gzip stream onto ``out`` for trimmed traces: ISA-L level 1 where isal imports (13x less CPU than zlib
    level 6 on the benchmark trace, output ~30 % larger), else zlib level 6. Any gzip reader reads both."""
    if INFLATER.name == "isal":
        from isal import igzip

        return cast(BinaryIO, igzip.GzipFile(fileobj=out, mode="wb", compresslevel=1))  # type: ignore[no-untyped-call]
    import gzip

    return cast(BinaryIO, gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6))


def iter_chunks(
    fh: BinaryIO,
    *,
    max_decompressed: int,
    progress: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """Yield the decompressed bytes of ``fh`` in chunks of at most ``OUT_SIZE`` bytes.

    ``progress`` receives the number of newly consumed *input* bytes after each read.
    """
    converted = getattr(fh, "converted_from_bytes", None)  # an XSpace, read whole when opened (xplane.py)
    if isinstance(converted, int) and progress is not None:
        progress(converted)
        progress = None
    try:
        head = fh.read(READ_SIZE)
    except OSError as exc:
        raise TraceSourceError(f"read failed: {exc}") from exc
    if progress is not None and head:
        progress(len(head))
    if not head.startswith(GZIP_MAGIC):
        total = 0
        data = head
        while data:
            total += len(data)
            if total > max_decompressed:
                raise DecompressionBombError(f"input exceeds the size budget of {max_decompressed} bytes")
            yield data
            try:
                data = fh.read(OUT_SIZE)
            except OSError as exc:
                raise TraceSourceError(f"read failed: {exc}") from exc
            if progress is not None and data:
                progress(len(data))
        return
    yield from _iter_gzip(fh, head, max_decompressed, progress)


def _iter_gzip(
    fh: BinaryIO, head: bytes, max_decompressed: int, progress: Callable[[int], None] | None
) -> Iterator[bytes]:
    produced = 0
    inflater = INFLATER
    dec: _Decompressor | None = None
    pending = head
    while True:
        if not pending:
            try:
                pending = fh.read(READ_SIZE)
            except OSError as exc:
                raise TraceSourceError(f"read failed: {exc}") from exc
            if not pending:
                break
            if progress is not None:
                progress(len(pending))
        data = pending
        pending = b""
        while data:
            if dec is None:
                data = data.lstrip(b"\x00")  # padding between concatenated members
                if not data:
                    break
                if not data.startswith(GZIP_MAGIC[: len(data)]):
                    return  # trailing garbage after a complete member: ignored, like gzip(1)
                dec = inflater.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out = dec.decompress(data, OUT_SIZE)
            except inflater.error as exc:
                raise CorruptGzipError(f"corrupt gzip stream after {produced} decompressed bytes: {exc}") from exc
            data = dec.unconsumed_tail
            if out:
                produced += len(out)
                if produced > max_decompressed:
                    raise DecompressionBombError(
                        f"decompressed size exceeds the budget of {max_decompressed} bytes (gzip bomb?)"
                    )
                yield out
            if dec.eof:
                # the input past this member's end; zlib also leaves it in unconsumed_tail when the call was
                # cut by max_length (isal does not), so that must not be added again
                data = dec.unused_data
                dec = None
    if dec is not None:
        try:
            tail = dec.flush()
        except inflater.error as exc:
            raise CorruptGzipError(f"corrupt gzip stream at end: {exc}") from exc
        if tail:
            produced += len(tail)
            if produced > max_decompressed:
                raise DecompressionBombError(f"decompressed size exceeds the budget of {max_decompressed} bytes")
            yield tail
        if not dec.eof:
            raise TruncatedTraceError(f"gzip stream truncated after {produced} decompressed bytes")
