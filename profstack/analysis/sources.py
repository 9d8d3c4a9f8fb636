"""Trace inputs: the TraceSource protocol, file/bytes sources, discovery and rank inference."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from profstack.analysis.errors import TraceSourceError
from profstack.analysis.xplane import XPLANE_SUFFIX, as_kineto, expand


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
    ``*.xplane.pb`` (sorted); an XSpace is read as the Kineto events it holds (profstack/analysis/xplane.py).
    The JSON views XProf and JAX write beside an XSpace are left out (see :func:`discover`)."""
    return discover(paths)[0]


#: what JAX (``create_perfetto_trace=True``) and XProf / TensorFlow write beside ``<host>.xplane.pb``: the same
#: events converted to Chrome-trace JSON, in no category Kineto writes
_XSPACE_VIEWS = (".trace.json.gz", ".trace.json")
_PERFETTO_VIEW = "perfetto_trace.json.gz"


def _xspace_view(path: Path, xspace_dirs: set[Path]) -> bool:
    name = path.name
    if path.parent not in xspace_dirs or name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
        return False  # a Kineto trace keeps its place wherever it is
    return name == _PERFETTO_VIEW or name.endswith(_XSPACE_VIEWS)


def discover(paths: Sequence[str | Path]) -> tuple[list[TraceSource], list[tuple[str, str]]]:
    """(sources, [(name, why it was left out)]): as :func:`discover_sources`, saying what a directory walk left
    out. In a profile run folder holding ``*.xplane.pb``, JAX's ``perfetto_trace.json.gz`` and XProf's
    ``<host>.trace.json.gz`` are conversions of that XSpace: read, they would count one run three times."""

    found: list[TraceSource] = []
    left_out: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if _is_trace_file(p))
            xspace_dirs = {p.parent for p in candidates if p.name.endswith(XPLANE_SUFFIX)}
            views = [p for p in candidates if _xspace_view(p, xspace_dirs)]
            left_out.extend(
                (
                    str(p.relative_to(path)),
                    "a Chrome-trace view of the *.xplane.pb beside it (written by JAX / XProf): the XSpace is "
                    "analysed instead",
                )
                for p in views
            )
            candidates = [p for p in candidates if p not in views]
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
    return expand(found), left_out


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
