"""The façade: parse every source once, group by rank, run the stateless analyzers, build the summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from profstack import __version__
from profstack.analysis import completeness, native, plausibility, rules, runs, unrecorded
from profstack.analysis.errors import (
    DuplicateEventsError,
    ImplausibleResultError,
    InternalAnalysisError,
    OverlappingRankFilesError,
    RoundingLossError,
    SeparateRunsError,
    StepWindowError,
    StreamsFoldedError,
    TraceError,
)
from profstack.analysis.gpu import MAX_STREAMS, OTHER_STREAM
from profstack.analysis.jsonstream import EventStream
from profstack.analysis.metrics import RankAnalysis, RankData, analyze_rank, merge_files, release_columns
from profstack.analysis.options import DEFAULT_INCLUDE_LAST_STEP, AnalysisOptions
from profstack.analysis.parse import FileData, SymbolTable, parse_source
from profstack.analysis.reader import iter_chunks
from profstack.analysis.sources import TraceSource, rank_from_name
from profstack.analysis.summary import (
    SUMMARY_SCHEMA_VERSION,
    CrossRankResult,
    CrossRankRow,
    ErrorEntry,
    Finding,
    Generator,
    InputEntry,
    RankSummary,
    Run,
    Summary,
    cross_rank_row,
    cross_rank_section,
    severity_rank,
    summary_schema,
    unreadable_finding,
)

__all__ = [
    "SUMMARY_SCHEMA_VERSION",
    "Analysed",
    "AnalysisResult",
    "FileError",
    "analyse_files",
    "analyze",
    "assemble",
    "for_assembly",
    "predict_ranks",
    "summary_schema",
]


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

    def as_dict(self) -> ErrorEntry:
        return {"source": self.source, "error_type": self.error_type, "message": self.message, "fatal": self.fatal}


@dataclass
class AnalysisResult:
    summary: Summary
    complete: bool
    errors: list[FileError] = field(default_factory=list)

    @property
    def failed_all(self) -> bool:
        """No input produced any analysable data."""
        return not self.summary["ranks"]


def _file_errors(fd: FileData) -> tuple[list[FileError], list[FileError]]:
    """(what makes the file partial: its error, and the gaps at stake; the gaps that leave only a section
    incomplete, for ``warnings[]``: profstack.analysis.completeness)."""
    out = []
    if fd.error is not None:
        out.append(FileError(fd.name, fd.error, fatal=fd.failed))
    out.extend(FileError(fd.name, w, fatal=False) for w in fd.warnings if completeness.at_stake(w))
    return out, [FileError(fd.name, w, fatal=False) for w in fd.warnings if not completeness.at_stake(w)]


def _launch_gaps(rd: RankData, r: RankAnalysis) -> TraceError | None:
    """The rank's kernel launches without a GPU row, sized against its GPU span and kernel time."""
    g = r.internal.launch_gaps
    summary = r.summary
    return unrecorded.launch_gaps(
        g.kernels,
        g.at_stop,
        g.maybe_empty,
        source=", ".join(f.name for f in rd.files),
        span_us=float(summary["temporal_breakdown"]["gpu_span_us"] or 0.0),
        kernel_us=float(summary["gpu_activity"]["kernel_time_us"] or 0.0),
        n_kernels=r.internal.kernels_selected,
    )


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
            meta = stream.header()  # reads up to the traceEvents key (one 1 MB read for Kineto's layout)
    except Exception:  # noqa: S110 - a peek only; the real parse reports the problem
        pass
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and isinstance(dist.get("rank"), int):
        return int(dist["rank"])
    return rank_from_name(src.name)


def _time_key(rd: RankData) -> tuple[float, str]:
    f = rd.files[0]
    return (f.time_offset_us + (f.st_ts[0] if f.st_ts else (f.first_gpu_ts or 0.0)), f.name)


Entry = tuple[RankData, RankAnalysis, tuple[float, float] | None]


@dataclass
class Analysed:
    """What the per-file and per-rank phase hands the one assembler (:func:`assemble`).

    ``files`` has one entry per input, in input order; ``errors``, ``warnings`` and ``entries`` are in the
    order the phase produced them (ranks in predicted-rank order), which the summary keeps."""

    files: list[FileData | None]
    errors: list[FileError]
    warnings: list[FileError]
    entries: list[Entry]


def predict_ranks(sources: Sequence[TraceSource], opts: AnalysisOptions) -> list[int | None]:
    """The rank each input will get, from a header peek or its name (None: known only once parsed)."""
    return [_predict_rank(src, opts) for src in sources] if len(sources) > 1 else [None] * len(sources)


def analyze(
    sources: Sequence[TraceSource],
    options: AnalysisOptions | None = None,
    progress: Callable[[int], None] | None = None,
) -> AnalysisResult:
    """Analyse Kineto traces. Per-file failures are recorded (``complete=False``), never raised.

    ``progress`` is called with the number of newly consumed input (compressed) bytes, repeatedly.
    Several inputs: each rank is analysed, and its columns released, as soon as its last file is parsed
    (ranks are predicted from a cheap header peek), so peak memory follows the largest rank.
    ``profstack.analysis.parallel`` runs the same two phases with the ranks spread over processes.
    """
    opts = options if options is not None else AnalysisOptions()
    parts = analyse_files(sources, opts, predict_ranks(sources, opts), progress, n_inputs=len(sources))
    return assemble(parts, opts)


def analyse_files(
    sources: Sequence[TraceSource],
    opts: AnalysisOptions,
    predicted: Sequence[int | None],
    progress: Callable[[int], None] | None,
    *,
    n_inputs: int,
) -> Analysed:
    """Parse ``sources`` and analyse their ranks: the first phase of :func:`analyze`.

    ``n_inputs`` is the size of the whole job: a process given some of its ranks decides, as the whole job
    would, whether a file is alone in its rank (streamed) or may be merged (buffered)."""
    th = opts.limits
    symbols = SymbolTable()
    n = len(sources)
    files: list[FileData | None] = [None] * n
    errors: list[FileError] = []
    warnings: list[FileError] = []  # nothing was lost, but the user should look
    # files with an unknown rank first: until they are parsed, no rank can be closed
    order = sorted(range(n), key=lambda i: (predicted[i] is not None, predicted[i] or 0, i))
    unparsed = Counter(p for p in predicted if p is not None)
    unknown_left = sum(1 for p in predicted if p is None)
    pending: dict[int, list[FileData]] = {}
    closed: set[int] = set()
    analysed: list[Entry] = []

    def run(rd: RankData, file_spans: Sequence[tuple[float, float] | None] | None = None) -> None:
        d = rd.data
        ends = [t + u for t, u in zip(d.st_ts, d.st_dur, strict=True)]
        host = plausibility.host_range(d.launch_span, list(d.st_ts), ends)
        spans = [sp for sp in (file_spans if file_spans is not None else map(runs.file_span, rd.files)) if sp]
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
        span = (min(sp[0] for sp in spans), max(sp[1] for sp in spans)) if spans else None
        implausible = [
            ImplausibleResultError(problem, source=rd.label)
            for problem in plausibility.check_rank(r.summary, host, d.launch_span)
        ]
        for problem_err in implausible:
            r.summary["complete"] = False
            warnings.append(FileError(rd.label, problem_err, fatal=False))
        # (warning, whether it marks the entry incomplete as a plausibility failure does)
        noted: list[tuple[TraceError, bool]] = []
        raw_us, rounded_us = r.internal.gpu_op_raw_us, r.internal.gpu_op_rounded_us
        # only HTA's time model rounds (the exact one keeps every ns the trace wrote)
        lost = plausibility.rounding_loss(raw_us, rounded_us) if opts.hta_compat else None
        if lost is not None:  # below the severe share: HTA's definition, understated and said so
            noted.append(
                (RoundingLossError(lost, source=rd.label), plausibility.rounding_loss_severe(raw_us, rounded_us))
            )
        dup = plausibility.duplicates(r.internal.duplicate_gpu_ops)
        if dup is not None:
            noted.append((DuplicateEventsError(dup, source=rd.label), True))
        folded = plausibility.streams_folded(r.internal.streams_folded_ops, MAX_STREAMS, OTHER_STREAM)
        if folded is not None:
            noted.append((StreamsFoldedError(folded, source=rd.label), True))
        gaps: list[TraceError] = [e for f in rd.files for e in ([f.error] if f.error is not None else [])]
        gaps += [w for f in rd.files for w in f.warnings]
        gaps += implausible
        for note, incomplete in noted:
            completeness.mark(note, at_stake=incomplete)
            if incomplete:
                r.summary["complete"] = False
            warnings.append(FileError(rd.label, note, fatal=False))
            gaps.append(note)
        lost_rows = _launch_gaps(rd, r)
        if lost_rows is not None:  # the file's gap (its input reads partial where it is at stake)
            gaps.append(lost_rows)
            rd.files[0].warnings.append(lost_rows)
            if completeness.at_stake(lost_rows):
                r.summary["complete"] = False
                errors.append(FileError(rd.files[0].name, lost_rows, fatal=False))
            else:
                warnings.append(FileError(rd.files[0].name, lost_rows, fatal=False))
        r.summary["completeness"] = completeness.section_state(gaps)
        analysed.append((rd, r, span))

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
        split = runs.split_cycles(members, opts.max_cycle_gap_s * 1e6)
        if split.overlaps:
            # schedule cycles follow each other; files that overlap are different runs: never merge them
            names = ", ".join(dict.fromkeys(n for pair in split.overlaps for n in pair))
            warning = OverlappingRankFilesError(
                f"{len(members)} files of rank {rank} overlap in time, so they were analysed apart "
                f"({len(split.chains)} runs); are they from different runs? {names}",
                source=f"rank {rank}",
            )
            warnings.append(FileError(f"rank {rank}", warning, fatal=False))
        for a, b, why in split.separated:
            apart = SeparateRunsError(
                f"files {a} and {b} of rank {rank} are not successive cycles of one run ({why}): analysed apart",
                source=f"rank {rank}",
            )
            warnings.append(FileError(f"rank {rank}", apart, fatal=False))
        for chain in split.chains:
            spans = [runs.file_span(f) for f in chain]
            run(merge_files(rank, str(rank), chain, runs.gaps_removed(chain)), spans)

    # one file per rank streams its GPU side in bounded memory; files merged into one rank are buffered
    rank_files = Counter(predicted)
    for idx in order:
        guess = predicted[idx]
        alone = n_inputs == 1 or not opts.merge_rank_files or (guess is not None and rank_files[guess] == 1)
        fd = parse(idx, stream_gpu=alone)
        if guess is None:
            unknown_left -= 1
        else:
            unparsed[guess] -= 1
        if fd.skipped is not None:  # another known format beside the traces: said, and not an input
            warnings.append(FileError(fd.name, TraceError(fd.skipped, source=fd.name), fatal=False))
            continue
        if not alone and fd.gpu_mode_reason is None:
            fd.gpu_mode_reason = "several input files may belong to this rank"
        files[idx] = fd
        partial, noted_gaps = _file_errors(fd)
        errors.extend(partial)
        warnings.extend(noted_gaps)
        warnings.extend(FileError(fd.name, n, fatal=False) for n in fd.notices)
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
    return Analysed(files, errors, warnings, analysed)


def for_assembly(parts: Analysed) -> Analysed:
    """``parts`` with only what :func:`assemble` reads (no columns, accumulators or per-name tables): small to
    send between processes."""
    slim: dict[int, FileData] = {}

    def keep(fd: FileData) -> FileData:
        out = slim.get(id(fd))
        if out is None:
            out = FileData(name=fd.name, size_bytes=fd.size_bytes, rank=fd.rank, rank_source=fd.rank_source)
            out.time_offset_us, out.meta, out.error, out.warnings = fd.time_offset_us, fd.meta, fd.error, fd.warnings
            out.events, out.x_events, out.first_gpu_ts = fd.events, fd.x_events, fd.first_gpu_ts
            out.st_ts.extend(fd.st_ts[:1])  # _time_key reads the first step only
            slim[id(fd)] = out
        return out

    files = [keep(f) if f is not None else None for f in parts.files]
    entries: list[Entry] = []
    for rd, ra, span in parts.entries:
        kept = [keep(f) for f in rd.files]
        entries.append((RankData(rd.rank, rd.label, kept, kept[0]), ra, span))
    return Analysed(files, parts.errors, parts.warnings, entries)


def assemble(parts: Analysed, opts: AnalysisOptions) -> AnalysisResult:
    """The one summary assembler: labels, rank and cross-rank rules, runs, inputs, completeness."""
    th = opts.limits
    files, errors, warnings, analysed = parts.files, parts.errors, parts.warnings, parts.entries
    # labels: the rank, or "<rank>.<i>" in time order when a rank has several entries
    by_rank: dict[int, list[Entry]] = {}
    for entry in analysed:
        by_rank.setdefault(entry[0].rank, []).append(entry)
    ranks: list[RankSummary] = []
    findings: list[Finding] = []
    entries: list[runs.Entry] = []
    for rank in sorted(by_rank):
        of_rank = sorted(by_rank[rank], key=lambda e: _time_key(e[0]))
        for i, (rd, ra, span) in enumerate(of_rank):
            r = ra.summary
            r["label"] = f"{rank}.{i}" if len(of_rank) > 1 else str(rank)
            findings.extend(rules.rank_findings(r, ra.internal, th))
            ranks.append(r)
            entries.append(runs.Entry(rank, r["label"], list(r["sources"]), span, runs.identity_of(rd.files[0])))

    # runs: entries of different ranks that overlap in time; cross-rank rules compare ranks of one run only
    groups = runs.group_runs(entries)
    run_records: list[Run] = []
    best: tuple[int, str, CrossRankResult] | None = None  # the run with most ranks: shown as cross_rank
    table: list[CrossRankRow] = []
    for n, members in enumerate(groups, 1):
        run_id = f"run-{n}"
        base = runs.run_record(run_id, [entries[i] for i in members], [entries[i].span for i in members])
        run_table = [cross_rank_row(ranks[i], run_id) for i in members]
        for i in members:
            ranks[i]["run"] = run_id
        run_cross, run_findings = rules.cross_rank(run_table, th)
        findings.extend(run_findings)
        count = len({ranks[i]["rank"] for i in members})
        rec: Run = {
            "id": base["id"],
            "label": base["label"],
            "files": base["files"],
            "ranks": base["ranks"],
            "start_us": base["start_us"],
            "duration_us": base["duration_us"],
            "cross_rank": {"rank_count": count, **run_cross},
        }
        if best is None or count > best[0]:
            best = (count, run_id, run_cross)
        table.extend(run_table)
        run_records.append(rec)
    findings.sort(key=lambda f: (severity_rank(f["severity"]), f["rule_id"], f["ranks"]))

    inputs: list[InputEntry] = [
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
                else next((FileError(f.name, w, False).as_dict() for w in f.warnings if completeness.at_stake(w)), None)
            ),
        }
        for f in files
        if f is not None
    ]
    unreadable = unreadable_finding(inputs)
    if unreadable is not None:
        findings.insert(0, unreadable)  # up front: the report covers only what could be read

    implausible = any(w.error_type == "ImplausibleResultError" for w in warnings)
    # folded names leave per-name tables incomplete (parse.MAX_NAMES_PER_FILE)
    folded = any(f is not None and f.names_folded_events for f in files)
    complete = bool(ranks) and not errors and not implausible and not folded and all(r["complete"] for r in ranks)
    summary: Summary = {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generator": cast(Generator, native.generator(__version__)),
        "complete": complete,
        "options": {
            "top_k": opts.top_k,
            "steps": list(opts.steps) if opts.steps is not None else None,
            "include_last_step": opts.include_last_step,
            "include_last_step_default": DEFAULT_INCLUDE_LAST_STEP,
            "merge_rank_files": opts.merge_rank_files,
            "max_cycle_gap_s": opts.max_cycle_gap_s,
            "launch_calls": "all" if opts.launch_calls == "all" else "hta",
            "clip_launch_delay": opts.clip_launch_delay,
            "count_sync": opts.count_sync,
            "steps_keep_unlaunched": opts.steps_keep_unlaunched,
            "op_types": opts.op_types,
            "hta_compat": opts.hta_compat,
            "rule_thresholds": th.as_dict(),
        },
        "time_model": "hta" if opts.hta_compat else "exact",
        "inputs": inputs,
        "errors": [e.as_dict() for e in errors],
        "warnings": [w.as_dict() for w in warnings],
        "rank_files_merged": opts.merge_rank_files,
        "runs": run_records,
        "ranks": ranks,
        "cross_rank": cross_rank_section(
            table,
            best[2] if best is not None else rules.cross_rank([], th)[0],
            best[1] if best is not None else None,
        ),
        "findings": findings,
    }
    return AnalysisResult(summary=summary, complete=complete, errors=errors)
