"""The façade: parse every source once, group by rank, run the stateless analyzers, build the summary."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from profstack import __version__
from profstack.analysis import rules
from profstack.analysis.errors import InternalAnalysisError, OverlappingRankFilesError, StepWindowError, TraceError
from profstack.analysis.jsonstream import EventStream
from profstack.analysis.metrics import RankData, analyze_rank, merge_files, release_columns
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.parse import FileData, SymbolTable, parse_source
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource, rank_from_name

SUMMARY_SCHEMA_VERSION = "1.1"


@cache
def _schema_text() -> str:
    return resources.files("profstack.analysis").joinpath("summary.schema.json").read_text(encoding="utf-8")


def summary_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every summary validates against."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


@dataclass(frozen=True)
class FileError:
    source: str
    error: TraceError
    fatal: bool  # True: the file contributed nothing

    @property
    def error_type(self) -> str:
        return type(self.error).__name__

    @property
    def message(self) -> str:
        return str(self.error)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "error_type": self.error_type, "message": self.message, "fatal": self.fatal}


@dataclass
class AnalysisResult:
    summary: dict[str, Any]
    complete: bool
    errors: list[FileError] = field(default_factory=list)

    @property
    def failed_all(self) -> bool:
        """No input produced any analysable data."""
        return not self.summary["ranks"]


def _file_errors(fd: FileData) -> list[FileError]:
    out = []
    if fd.error is not None:
        out.append(FileError(fd.name, fd.error, fatal=fd.failed))
    out.extend(FileError(fd.name, w, fatal=False) for w in fd.warnings)
    return out


_PEEK_BYTES = 8 << 20


def _limited(chunks: Iterator[bytes], limit: int) -> Iterator[bytes]:
    seen = 0
    for chunk in chunks:
        yield chunk
        seen += len(chunk)
        if seen >= limit:
            return


def _predict_rank(src: TraceSource, opts: AnalysisOptions) -> int | None:
    """The rank a file will get, from its header (distributedInfo before traceEvents) or its name."""
    meta: dict[str, Any] = {}
    try:
        with src.open() as fh:
            stream = EventStream(
                _limited(iter_chunks(fh, max_decompressed=opts.max_decompressed_bytes), _PEEK_BYTES),
                max_value_bytes=opts.max_event_bytes,
            )
            batches = stream.batches()
            try:
                next(batches, None)
            finally:
                batches.close()
            meta = stream.meta
    except Exception:  # noqa: S110 - a peek only; the real parse reports the problem
        pass
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and isinstance(dist.get("rank"), int):
        return int(dist["rank"])
    return rank_from_name(src.name)


def _span(fd: FileData) -> tuple[float, float] | None:
    """The file's time range on an absolute clock: its GPU ops, else its ProfilerSteps."""
    ops = fd.gpu_feed.ops if fd.gpu_feed is not None else None
    if ops is not None and len(ops):
        lo, hi = min(ops.ts), max(ops.ts)
    elif fd.st_ts:
        lo, hi = min(fd.st_ts), max(t + d for t, d in zip(fd.st_ts, fd.st_dur, strict=True))
    else:
        return None
    return fd.time_offset_us + lo, fd.time_offset_us + hi


def _overlapping(files: Sequence[FileData]) -> bool:
    spans = sorted(s for s in map(_span, files) if s is not None)
    reach = -float("inf")
    for lo, hi in spans:
        if lo < reach:
            return True
        reach = max(reach, hi)
    return False


def _time_key(rd: RankData) -> tuple[float, str]:
    f = rd.files[0]
    return (f.time_offset_us + (f.st_ts[0] if f.st_ts else (f.first_gpu_ts or 0.0)), f.name)


def analyze(
    sources: Sequence[TraceSource],
    options: AnalysisOptions | None = None,
    progress: Callable[[int], None] | None = None,
) -> AnalysisResult:
    """Analyse Kineto traces. Per-file failures are recorded (``complete=False``), never raised.

    ``progress`` is called with the number of newly consumed input (compressed) bytes, repeatedly.
    Several inputs: each rank is analysed, and its columns released, as soon as its last file is parsed
    (ranks are predicted from a cheap header peek), so peak memory follows the largest rank.
    """
    opts = options if options is not None else AnalysisOptions()
    th = opts.thresholds()
    symbols = SymbolTable()
    n = len(sources)
    files: list[FileData | None] = [None] * n
    errors: list[FileError] = []
    warnings: list[FileError] = []  # nothing was lost, but the user should look
    predicted: list[int | None] = [_predict_rank(src, opts) for src in sources] if n > 1 else [None] * n
    # files with an unknown rank first: until they are parsed, no rank can be closed
    order = sorted(range(n), key=lambda i: (predicted[i] is not None, predicted[i] or 0, i))
    unparsed = Counter(p for p in predicted if p is not None)
    unknown_left = sum(1 for p in predicted if p is None)
    pending: dict[int, list[FileData]] = {}
    closed: set[int] = set()
    analysed: list[tuple[RankData, dict[str, Any], dict[str, Any]]] = []

    def run(rd: RankData) -> None:
        try:
            r = analyze_rank(rd, symbols, opts, th)
        except StepWindowError as exc:
            errors.append(FileError(rd.label, exc, fatal=True))
            return
        except Exception as exc:  # a bug in one rank's analysis must not lose the other ranks
            err = InternalAnalysisError(f"rank {rd.label}: {type(exc).__name__}: {exc}", source=rd.label)
            errors.append(FileError(rd.label, err, fatal=True))
            return
        finally:
            release_columns(rd.data)
        analysed.append((rd, r, r.pop("_internal")))

    def parse(idx: int, stream_gpu: bool) -> FileData:
        src = sources[idx]
        try:
            return parse_source(
                src,
                symbols,
                max_decompressed_bytes=opts.max_decompressed_bytes,
                max_event_bytes=opts.max_event_bytes,
                progress=progress,
                options=opts,
                stream_gpu=stream_gpu,
            )
        except Exception as exc:  # one broken input must not sink the others
            fd = FileData(name=src.name, size_bytes=src.size_hint)
            fd.error = InternalAnalysisError(f"{type(exc).__name__}: {exc}", source=src.name)
            return fd

    def close(rank: int) -> None:
        members = pending.pop(rank)
        closed.add(rank)
        if len(members) > 1 and any(f.gpu is not None for f in members):
            # a rank predicted to have one file got more: merging needs every member's GPU columns
            for k, f in enumerate(members):
                if f.gpu is not None:
                    idx = next(i for i, x in enumerate(files) if x is f)
                    members[k] = files[idx] = parse(idx, stream_gpu=False)
        members.sort(key=lambda f: _time_key(RankData(rank, "", [f], f)))
        if len(members) > 1 and _overlapping(members):
            # schedule cycles follow each other; files that overlap are different runs: never merge them
            names = ", ".join(f.name for f in members)
            warning = OverlappingRankFilesError(
                f"{len(members)} files overlap in time, so they were analysed apart "
                f"(labels {rank}.0 to {rank}.{len(members) - 1}); are they from different runs? {names}",
                source=f"rank {rank}",
            )
            warnings.append(FileError(f"rank {rank}", warning, fatal=False))
            for f in members:
                run(merge_files(rank, str(rank), [f]))
            return
        run(merge_files(rank, str(rank), members))

    # one file per rank streams its GPU side in bounded memory; files merged into one rank are buffered
    rank_files = Counter(predicted)
    for idx in order:
        guess = predicted[idx]
        alone = n == 1 or not opts.merge_rank_files or (guess is not None and rank_files[guess] == 1)
        fd = parse(idx, stream_gpu=alone)
        if not alone and fd.gpu_mode_reason is None:
            fd.gpu_mode_reason = "several input files may belong to this rank"
        files[idx] = fd
        errors.extend(_file_errors(fd))
        warnings.extend(FileError(fd.name, n, fatal=False) for n in fd.notices)  # bounded names (parse.py)
        if guess is None:
            unknown_left -= 1
        else:
            unparsed[guess] -= 1
        if not fd.failed:
            if not opts.merge_rank_files or fd.rank in closed:
                # kept apart on purpose, or a file whose rank was mispredicted after its rank closed
                run(merge_files(fd.rank, str(fd.rank), [fd]))
            else:
                pending.setdefault(fd.rank, []).append(fd)
        if unknown_left == 0:
            for rank in [r for r in pending if unparsed[r] <= 0]:
                close(rank)
    for rank in sorted(pending):
        close(rank)

    # labels: the rank, or "<rank>.<i>" in time order when a rank has several entries
    by_rank: dict[int, list[tuple[RankData, dict[str, Any], dict[str, Any]]]] = {}
    for entry in analysed:
        by_rank.setdefault(entry[0].rank, []).append(entry)
    ranks: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    for rank in sorted(by_rank):
        entries = sorted(by_rank[rank], key=lambda e: _time_key(e[0]))
        for i, (_, r, internal) in enumerate(entries):
            r["label"] = f"{rank}.{i}" if len(entries) > 1 else str(rank)
            findings.extend(rules.rank_findings(r, internal, th))
            ranks.append(r)

    table = [
        {
            "rank": r["rank"],
            "label": r["label"],
            "step_mean_us": r["steps"]["mean_us"],
            "gpu_busy_pct": (
                round(100.0 - r["temporal_breakdown"]["idle_pct"], 3)
                if r["temporal_breakdown"]["gpu_span_us"]
                else None
            ),
            "idle_pct": r["temporal_breakdown"]["idle_pct"] if r["temporal_breakdown"]["gpu_span_us"] else None,
            "compute_time_us": r["temporal_breakdown"]["compute_time_us"],
            "comm_time_us": r["communication"]["comm_time_us"],
            "gpu_span_us": r["temporal_breakdown"]["gpu_span_us"],
        }
        for r in ranks
    ]
    cross, cross_findings = rules.cross_rank(table, th)
    findings.extend(cross_findings)
    sev_order = {"critical": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (sev_order[f["severity"]], f["rule_id"], f["ranks"]))

    # folded names leave per-name tables incomplete (parse.MAX_NAMES_PER_FILE)
    folded = any(f is not None and f.names_folded_events for f in files)
    complete = bool(ranks) and not errors and not folded and all(r["complete"] for r in ranks)
    summary: dict[str, Any] = {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generator": {"name": "profstack", "version": __version__},
        "complete": complete,
        "options": {
            "top_k": opts.top_k,
            "steps": list(opts.steps) if opts.steps is not None else None,
            "include_last_step": opts.include_last_step,
            "merge_rank_files": opts.merge_rank_files,
            "rule_thresholds": th,
        },
        "inputs": [
            {
                "name": f.name,
                "rank": f.rank,
                "rank_source": f.rank_source,
                "size_bytes": f.size_bytes,
                "status": "failed" if f.failed else ("ok" if f.complete else "partial"),
                "events": f.events,
                "error": (
                    FileError(f.name, f.error, f.failed).as_dict()
                    if f.error is not None
                    else (FileError(f.name, f.warnings[0], False).as_dict() if f.warnings else None)
                ),
            }
            for f in files
            if f is not None
        ],
        "errors": [e.as_dict() for e in errors],
        "warnings": [w.as_dict() for w in warnings],
        "rank_files_merged": opts.merge_rank_files,
        "ranks": ranks,
        "cross_rank": {"rank_count": len({r["rank"] for r in ranks}), "table": table, **cross},
        "findings": findings,
    }
    return AnalysisResult(summary=summary, complete=complete, errors=errors)
