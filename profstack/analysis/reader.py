"""Chunked byte reading with transparent gzip (detected by magic bytes) and a decompressed-size budget."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from profstack.analysis.errors import (
    CorruptGzipError,
    DecompressionBombError,
    TraceSourceError,
    TruncatedTraceError,
)

GZIP_MAGIC = b"\x1f\x8b"
READ_SIZE = 1 << 20  # compressed bytes per read
OUT_SIZE = 4 << 20  # decompressed bytes per yielded chunk (bounds memory per step)


def iter_chunks(
    fh: BinaryIO,
    *,
    max_decompressed: int,
    progress: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """Yield the decompressed bytes of ``fh`` in chunks of at most ``OUT_SIZE`` bytes.

    ``progress`` receives the number of newly consumed *input* bytes after each read.
    """
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
    dec: zlib._Decompress | None = None
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
                dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out = dec.decompress(data, OUT_SIZE)
            except zlib.error as exc:
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
                data = dec.unused_data + data
                dec = None
    if dec is not None:
        try:
            tail = dec.flush()
        except zlib.error as exc:
            raise CorruptGzipError(f"corrupt gzip stream at end: {exc}") from exc
        if tail:
            produced += len(tail)
            if produced > max_decompressed:
                raise DecompressionBombError(f"decompressed size exceeds the budget of {max_decompressed} bytes")
            yield tail
        if not dec.eof:
            raise TruncatedTraceError(f"gzip stream truncated after {produced} decompressed bytes")
