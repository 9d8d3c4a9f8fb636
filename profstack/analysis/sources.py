"""Trace inputs: the TraceSource protocol, file/bytes sources, discovery and rank inference."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from profstack.analysis.errors import TraceSourceError
from profstack.analysis.xplane import XPLANE_SUFFIX, as_kineto


@runtime_checkable
class TraceSource(Protocol):
    """Something that yields the raw bytes of one trace file (gzip or plain JSON, detected by magic)."""

    name: str
    size_hint: int | None

    def open(self) -> BinaryIO: ...


@dataclass
class FileTraceSource:
    path: Path
    name: str = ""
    size_hint: int | None = None

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not self.name:
            self.name = self.path.name
        if self.size_hint is None:
            try:
                self.size_hint = self.path.stat().st_size
            except OSError:
                self.size_hint = None

    def open(self) -> BinaryIO:
        try:
            return self.path.open("rb")
        except OSError as exc:
            raise TraceSourceError(f"cannot open: {exc.strerror or exc}", source=self.name) from exc


@dataclass
class BytesTraceSource:
    data: bytes
    name: str = "<bytes>"
    size_hint: int | None = None

    def __post_init__(self) -> None:
        if self.size_hint is None:
            self.size_hint = len(self.data)

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)


_TRACE_SUFFIXES = (".json", ".json.gz", XPLANE_SUFFIX)


def _is_trace_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(_TRACE_SUFFIXES)


def discover_sources(paths: Sequence[str | Path]) -> list[TraceSource]:
    """Files as given; directories searched recursively for ``*.json`` / ``*.json.gz`` and TensorFlow's / JAX's
    ``*.xplane.pb`` (sorted); an XSpace is read as the Kineto events it holds (profstack/analysis/xplane.py)."""

    found: list[TraceSource] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if _is_trace_file(p))
        elif path.is_file():
            candidates = [path]
        elif path.exists():
            # a FIFO, socket or device: reading it could block or never end
            raise TraceSourceError(f"not a regular file (a FIFO, socket or device?): {path}")
        else:
            raise TraceSourceError(f"no such file or directory: {path}")
        for cand in candidates:
            key = cand.resolve()
            if key in seen:
                continue
            seen.add(key)
            name = str(cand.relative_to(path)) if path.is_dir() else cand.name
            found.append(as_kineto(FileTraceSource(cand, name=name)))
    return found


# rank-3, rank3, rank_3, _rank3, rank.3 ; SageMaker hosts algo-2 (1-based host index -> rank 1)
_RANK_RE = re.compile(r"(?:^|[^a-z])rank[-_.]?(\d+)", re.IGNORECASE)
_ALGO_RE = re.compile(r"(?:^|[^a-z])algo-(\d+)", re.IGNORECASE)


def rank_from_name(name: str) -> int | None:
    """Infer a rank from a file name. ``algo-N`` (SageMaker host N, 1-based) maps to N-1."""
    base = Path(name).name
    match = _RANK_RE.search(base)
    if match:
        return int(match.group(1))
    match = _ALGO_RE.search(base)
    if match:
        return max(int(match.group(1)) - 1, 0)
    return None
