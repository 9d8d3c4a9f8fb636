"""`profstack analyze`: analyse PyTorch profiler traces locally; write summary.json, report.html, Perfetto traces.

    profstack analyze PATH... --out DIR [--format json,html,perfetto] [--steps A:B] [--top K]
                      [--include-last-step | --exclude-last-step] [--timeline-window median|slowest|all|A:B]
                      [--no-merge-ranks] [--threshold NAME=VALUE ...] [--jobs N]

Exit status: 0 complete, 1 outputs written but some input could not be fully read (summary says
`complete: false`), 2 bad arguments or nothing could be analysed (one `profstack: error:` line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profstack import escape
from profstack.analysis.errors import NOT_RECORDED
from profstack.analysis.perfetto_plan import PERFETTO_MAX_EVENTS
from profstack.analysis.summary import SEVERITIES, Summary, gpu_side_unknown, severity_rank
from profstack.cli import CliError, _help
from profstack.cli._help import command
from profstack.cli.progress import Phase, Progress

if TYPE_CHECKING:
    from profstack.analysis import TraceSource
    from profstack.analysis.summary import TimelineFile
    from profstack.analysis.trim import TrimReport

FORMATS = ("json", "html", "perfetto")
DEFAULT_TOP_K = _help.DEFAULT_TOP_K  # one default for every command that analyses traces
DEFAULT_PERFETTO_MAX_EVENTS = PERFETTO_MAX_EVENTS  # why a million: profstack/analysis/perfetto_plan.py
MB = 1_000_000


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "analyze",
        help="analyse PyTorch profiler (Kineto) traces: summary.json, report.html, trimmed Perfetto traces",
        description="Analyse PyTorch profiler (Kineto) traces locally: summary.json, a self-contained "
        "report.html and trimmed per-rank traces that Perfetto opens.",
        examples=(
            "profstack analyze traces/ --out out/",
            "profstack analyze rank-0.pt.trace.json.gz rank-1.pt.trace.json.gz --out out/ --steps 10:20",
            "profstack analyze traces/ --out out/ --format json --top 30 --jobs 4",
            "profstack analyze traces/ --out out/ --threshold low_gpu_util_busy_pct=60",
        ),
        note="PATH is a *.json / *.json.gz trace or a directory searched recursively. Exit status: 0 complete, "
        "1 partial results (the line before names the file and the cause), 2 error.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory (created)")
    parser.add_argument(
        "--format",
        default=",".join(FORMATS),
        metavar="LIST",
        help="comma-separated outputs among json,html,perfetto (default: all)",
    )
    parser.add_argument("--steps", metavar="A:B", help="analyse only ProfilerStep#A..#B (inclusive)")
    parser.add_argument(
        "--top", type=int, default=DEFAULT_TOP_K, metavar="K", help=f"top-K kernels (default {DEFAULT_TOP_K})"
    )
    from profstack.analysis.options import DEFAULT_INCLUDE_LAST_STEP

    last = parser.add_mutually_exclusive_group()
    last.add_argument(
        "--include-last-step",
        dest="include_last_step",
        action="store_true",
        default=None,
        help="keep GPU work launched in the last ProfilerStep" + (" (default)" if DEFAULT_INCLUDE_LAST_STEP else ""),
    )
    last.add_argument(
        "--exclude-last-step",
        dest="include_last_step",
        action="store_false",
        help="drop the last ProfilerStep, like HTA's include_last_profiler_step=False"
        + (" (default)" if not DEFAULT_INCLUDE_LAST_STEP else ""),
    )
    parser.add_argument(
        "--launch-calls",
        choices=("hta", "all"),
        default="hta",
        help="launch delays over HTA's launch calls (default) or every call that can launch GPU work",
    )
    parser.add_argument(
        "--raw-launch-delay",
        action="store_true",
        help="keep negative launch delays instead of clipping them at zero like HTA",
    )
    parser.add_argument(
        "--no-sync-in-breakdown",
        action="store_true",
        help="leave cuda_sync rows out of the temporal breakdown (HTA counts them; default: counted)",
    )
    parser.add_argument(
        "--no-op-types",
        action="store_true",
        help="read the precision of kernels whose names carry no types from their names only, not from the input "
        "types of the operators that launched them (record_shapes; default: read, which can read a file twice)",
    )
    parser.add_argument(
        "--hta-compat",
        action="store_true",
        help="HTA's time model: round every GPU op to whole µs (start up, end down) as HolisticTraceAnalysis does "
        "(default: exact, at the trace's own ns resolution; docs/analysis.md says what differs)",
    )
    parser.add_argument(
        "--max-cycle-gap",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="largest gap between two files of one rank merged as cycles of one run (default 1800)",
    )
    parser.add_argument(
        "--timeline-window",
        metavar="WINDOW",
        help="time window of the trimmed Perfetto traces: median (default: the median step with its "
        "neighbours, plus the slowest step), slowest (the slowest step with its neighbours), all, or A:B "
        "(ProfilerStep#A..#B; the default when --steps is given)",
    )
    parser.add_argument(
        "--no-merge-ranks",
        action="store_true",
        help="keep several files of one rank apart instead of merging them",
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a rule threshold (repeatable), e.g. low_gpu_util_busy_pct=60",
    )
    parser.add_argument(
        "--perfetto-max-events",
        type=int,
        default=DEFAULT_PERFETTO_MAX_EVENTS,
        metavar="N",
        help=f"cap on events per trimmed trace (default {DEFAULT_PERFETTO_MAX_EVENTS:,})",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="analyse ranks in N processes (default: the CPUs available to this process; 1: one process); "
        "the summary is the same as with one process",
    )
    parser.set_defaults(handler=run)


# ------------------------------------------------------------------------------------------ arguments


def parse_formats(text: str) -> list[str]:
    wanted = [f.strip().lower() for f in text.split(",") if f.strip()]
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown or not wanted:
        raise CliError(f"--format: unknown format {', '.join(unknown) or '(none)'}; choose from {','.join(FORMATS)}")
    return [f for f in FORMATS if f in wanted]


def parse_steps(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    from profstack.analysis.trim import step_bounds

    try:
        a, b = step_bounds(text)
    except ValueError:
        raise CliError(f"--steps: expected A:B with step numbers, e.g. 5:10, got {text!r}") from None
    if a > b:
        raise CliError(f"--steps: empty window {a}:{b} (A must not exceed B)")
    return a, b


def parse_timeline_window(text: str | None, steps: tuple[int, int] | None) -> str | tuple[int, int]:
    """--timeline-window: median | slowest | all | A:B; without it, --steps (when given) or median."""
    from profstack.analysis.errors import AnalysisOptionsError
    from profstack.analysis.trim import DEFAULT_WINDOW, parse_window

    if text is None:
        return steps if steps is not None else DEFAULT_WINDOW
    try:
        return parse_window(text)
    except AnalysisOptionsError as exc:
        raise CliError(f"--timeline-window: {exc}") from None


def parse_thresholds(items: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--threshold: expected NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise CliError(f"--threshold {name.strip()}: {value!r} is not a number") from None
    return out


# ---------------------------------------------------------------------------------------------- outputs


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _perfetto_outputs(
    summary: Mapping[str, Any], sources: Sequence[TraceSource], out_dir: Path
) -> list[tuple[TraceSource, Path, int | None]]:
    """One trimmed trace per rank file, named by profstack.analysis.perfetto_plan (rank-<r>[.<i>])."""
    from profstack.analysis.perfetto_plan import perfetto_plan

    by_name = {s.name: s for s in sources}
    plan = perfetto_plan(summary, available=by_name.keys())
    ranks = {str(i.get("name")): i.get("rank") for i in summary.get("inputs") or [] if isinstance(i, Mapping)}
    return [(by_name[out.source], out_dir / out.file_name, _int_or_none(ranks.get(out.source))) for out in plan.outputs]


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _write_perfetto(
    plan: Sequence[tuple[TraceSource, Path, int | None]],
    window: str | tuple[int, int],
    max_events: int,
    done: Phase,
) -> tuple[list[Path], list[str], list[TrimReport]]:
    """Trimmed traces; a file that cannot be trimmed (e.g. truncated) is skipped and reported, not fatal."""
    from profstack.analysis import TraceError
    from profstack.analysis.trim import trim_timeline

    written: list[Path] = []
    skipped: list[str] = []
    reports: list[TrimReport] = []
    for src, path, rank in plan:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with tmp.open("wb") as fh:
                report = trim_timeline(src, fh, window=window, max_events=max_events, rank=rank, compress=True)
        except TraceError as exc:
            tmp.unlink(missing_ok=True)
            skipped.append(str(exc.with_source(src.name)))
            done(1)
            continue
        os.replace(tmp, path)
        written.append(path)
        reports.append(report)
        done(1)
    return written, skipped, reports


def timeline_entries(paths: Sequence[Path], reports: Sequence[TrimReport], out_dir: Path) -> list[TimelineFile]:
    """The summary's ``timelines[]``: each trimmed trace, relative to the output directory, and its window."""
    entries: list[TimelineFile] = []
    for path, rep in zip(paths, reports, strict=True):
        entries.append(
            {
                "file": path.relative_to(out_dir).as_posix(),
                "source": rep.source,
                "rank": rep.rank,
                "window": rep.mode,
                "steps": list(rep.steps),
                "events": rep.written,
                "max_events": rep.max_events,
                "dropped": {k: v for k, v in rep.dropped.items() if v},
                "moved_to_overlap_tracks": rep.moved_to_overlap_tracks,
            }
        )
    return entries


def _inside(path: object, folder: Path) -> bool:
    if not isinstance(path, Path):
        return False
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- summary


def _fmt_us(us: Any) -> str:
    if not isinstance(us, int | float):
        return "—"
    if us >= 1_000_000:
        return f"{us / 1_000_000:.2f} s"
    if us >= 1000:
        return f"{us / 1000:.1f} ms"
    return f"{us:.0f} µs"


def printable(text: str) -> str:
    """``text`` as it may reach a terminal: line breaks kept, every control character, bidi override and other
    unsafe character written as a visible escape (profstack.escape, the one rule for terminals and e-mail)."""
    return escape.lines(text)


def _only_not_recorded(summary: Summary | Mapping[str, Any]) -> bool:
    """Every error says something was not recorded (the inputs were read whole)."""
    errors = [e for e in summary.get("errors") or [] if isinstance(e, Mapping)]
    return bool(errors) and all(e.get("error_type") in NOT_RECORDED for e in errors)


def text_summary(summary: Summary, outputs: Sequence[Path], seconds: float, total_bytes: int) -> str:
    ranks = [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]
    gpu = [r for r in ranks if r.get("has_gpu")]
    status = (
        "complete"
        if summary.get("complete")
        else "PARTIAL (not everything was recorded)"
        if _only_not_recorded(summary)
        else "PARTIAL (some input could not be read)"
    )
    runs = [r for r in summary.get("runs") or [] if isinstance(r, Mapping)]
    generator: Mapping[str, Any] = summary["generator"]
    engine = str(generator.get("engine") or "?") + (
        f" ({generator['engine_reason']})" if generator.get("engine_reason") else ""
    )
    lines = [
        f"Analysed {len(ranks)} rank(s) from {len(summary.get('inputs') or [])} file(s) "
        f"({total_bytes / MB:,.1f} MB on disk) in {seconds:.1f} s with the {engine} engine: {status}"
    ]
    opts: Mapping[str, Any] = summary["options"]
    if "include_last_step" in opts:
        lines.append(
            "Last ProfilerStep: "
            + ("included" if opts.get("include_last_step") else "dropped (like HTA)")
            + (" (default)" if opts.get("include_last_step") == opts.get("include_last_step_default") else "")
        )
    if len(runs) > 1:
        lines.append(f"{len(runs)} separate runs (files of one rank merge only as successive cycles of one run):")
        by_label: dict[str, Mapping[str, Any]] = {str(r.get("label")): r for r in ranks}
        for run in runs[:20]:
            parts = []
            for lab in run.get("ranks") or []:
                r = by_label.get(str(lab), {})
                idle = (r.get("temporal_breakdown") or {}).get("idle_pct") if r.get("has_gpu") else None
                unknown = " GPU unknown" if gpu_side_unknown(summary, r) else " CPU-only"
                parts.append(f"rank {lab}" + (f" GPU idle {idle:.1f}%" if isinstance(idle, int | float) else unknown))
            lines.append(f"  {run.get('id')}: {run.get('label')}: " + ", ".join(parts))
        if len(runs) > 20:
            lines.append(f"  ... and {len(runs) - 20} more (see summary.json runs[])")
    not_recorded = [
        e for e in [*(summary.get("errors") or []), *(summary.get("warnings") or [])]
        if isinstance(e, Mapping) and e.get("error_type") in NOT_RECORDED
    ]  # fmt: skip
    unrecorded = [e for e in not_recorded if e.get("error_type") == "GpuActivityNotRecordedError"]
    gpu_unknown = [
        e for e in not_recorded if e.get("error_type") in ("NothingRecordedError", "DevicesWithoutActivityError")
    ]
    if not gpu and unrecorded:
        lines.append("GPU: used but not recorded (the trace launched GPU work and holds no GPU rows): see the warning")
    elif not gpu and gpu_unknown:
        lines.append("GPU: no GPU activity recorded, and the traces cannot tell a CPU-only run: see below")
    elif not gpu and (cut := [e for r in ranks for e in gpu_side_unknown(summary, r)]):
        # a file cut off before its GPU rows (or another gap that leaves the GPU side unknown): never "CPU-only"
        lines.append(f"GPU: unknown (not a CPU-only run): {cut[0].get('message')}")
    elif not gpu:
        lines.append("GPU: no GPU activity in these traces (CPU-only)")
    else:
        idle = [(r, r["temporal_breakdown"]["idle_pct"]) for r in gpu]
        if len(gpu) <= 8:
            lines.append(
                "GPU idle: "
                + ", ".join(f"rank {r.get('label', r.get('rank'))} {v:.1f}%" for r, v in idle if v is not None)
            )
        else:
            vals = [v for _, v in idle if isinstance(v, int | float)]
            if vals:
                lines.append(
                    f"GPU idle over {len(vals)} ranks: min {min(vals):.1f}%, "
                    f"mean {sum(vals) / len(vals):.1f}%, max {max(vals):.1f}%"
                )
        totals: dict[str, float] = defaultdict(float)
        for r in gpu:
            for k in r.get("top_kernels_by_time") or []:
                totals[str(k.get("name"))] += float(k.get("total_us") or 0)
        if totals:
            lines.append("Top kernels by total time" + (" (all ranks)" if len(gpu) > 1 else "") + ":")
            for i, (name, us) in enumerate(sorted(totals.items(), key=lambda kv: -kv[1])[:3], 1):
                short = name if len(name) <= 90 else name[:87] + "..."
                lines.append(f"  {i}. {_fmt_us(us):>9}  {short}")
    # a rank held in memory whole: say why (several files merged, or a trace the bounded pass cannot order)
    held: dict[str, list[str]] = defaultdict(list)
    for r in ranks:
        mode = r.get("gpu_analysis")
        if isinstance(mode, Mapping) and mode.get("mode") == "buffered":
            held[str(mode.get("reason"))].append(str(r.get("label", r.get("rank"))))
    for reason, labels in sorted(held.items()):
        shown = ", ".join(labels[:8]) + (f" and {len(labels) - 8} more" if len(labels) > 8 else "")
        lines.append(f"GPU ops held in memory (buffered) for rank {shown}: {reason}")
    findings = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    by_sev = {s: sum(1 for f in findings if f.get("severity") == s) for s in SEVERITIES}
    # what the traces did not record, each with how to record it (analysis/unrecorded.py)
    lines.extend(f"Not recorded: {e.get('message')}" for e in not_recorded[:8])
    if len(not_recorded) > 8:
        lines.append(f"  ... and {len(not_recorded) - 8} more (summary.json errors[] and warnings[] list each)")
    no_delay: dict[str, list[str]] = defaultdict(list)
    for r in gpu:
        why = r["launch_delay"].get("unavailable_reason")
        if why:
            no_delay[str(why)].append(str(r.get("label", r.get("rank"))))
    for why, labels in sorted(no_delay.items()):
        shown = ", ".join(labels[:8]) + (f" and {len(labels) - 8} more" if len(labels) > 8 else "")
        lines.append(f"Launch delays of rank {shown}: not computed: {why}")
    lines.append("Findings: " + ", ".join(f"{n} {s}" for s, n in by_sev.items()))
    ranked = sorted(findings, key=lambda f: severity_rank(f.get("severity")))
    for f in ranked[:5]:
        lines.append(f"  [{f.get('severity')}] {f.get('rule_id')}: {f.get('message')}")
    if outputs:
        lines.append("Outputs:")
        lines.extend(f"  {p}" for p in outputs)
    return "\n".join(lines)


def partial_cause(summary: Summary | Mapping[str, Any], outputs: Sequence[Path] = ()) -> str:
    """Why a summary is partial, naming the file and the cause: the first error that is not a "not recorded"
    one (a file read in part or not at all), then how many more, and where the whole list is."""
    errors = [e for e in summary.get("errors") or [] if isinstance(e, Mapping)]
    unread = [e for e in errors if e.get("error_type") not in NOT_RECORDED] or errors
    where = next((str(p) for p in outputs if p.name == "summary.json"), "summary.json")
    if not unread:
        partial = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping) and i.get("status") != "ok"]
        if partial:
            first = partial[0]
            more = f"; {len(partial) - 1} more file(s) in {where} inputs[]" if len(partial) > 1 else ""
            return f"{first.get('name')}: {first.get('status')}{more}"
        return f"some input could not be fully read ({where} inputs[] says which)"
    first = unread[0]
    source = str(first.get("source") or "?")
    message = str(first.get("message") or first.get("error_type") or "unreadable")
    cause = message if message.startswith(source) else f"{source}: {message}"
    kind = f" ({first.get('error_type')})" if first.get("error_type") else ""
    more = f"; {len(unread) - 1} more in {where} errors[]" if len(unread) > 1 else ""
    return f"{cause}{kind}{more}"


# --------------------------------------------------------------------------------------------- handler


def run(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    steps = parse_steps(args.steps)
    window = parse_timeline_window(args.timeline_window, steps)
    thresholds = parse_thresholds(args.threshold)
    if args.top < 1:
        raise CliError(f"--top must be at least 1, got {args.top}")
    if args.perfetto_max_events < 1:
        raise CliError(f"--perfetto-max-events must be at least 1, got {args.perfetto_max_events}")
    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, got {args.jobs}")

    from profstack.analysis import AnalysisOptions, TraceError, analyze
    from profstack.analysis.parallel import analyze as analyze_in_processes
    from profstack.analysis.sources import discover

    out_dir: Path = args.out
    start = time.monotonic()
    try:
        from profstack.analysis.options import DEFAULT_INCLUDE_LAST_STEP

        options = AnalysisOptions(
            top_k=args.top,
            steps=steps,
            rule_thresholds=thresholds,
            merge_rank_files=not args.no_merge_ranks,
            include_last_step=DEFAULT_INCLUDE_LAST_STEP if args.include_last_step is None else args.include_last_step,
            launch_calls=args.launch_calls,
            clip_launch_delay=not args.raw_launch_delay,
            count_sync=not args.no_sync_in_breakdown,
            op_types=not args.no_op_types,
            hta_compat=args.hta_compat,
            max_cycle_gap_s=args.max_cycle_gap,
        )
        # Never read our own outputs back (`profstack analyze . --out out`, run twice).
        found, left_out = discover(args.paths)
        for name, why in left_out:
            print(escape.one_line(f"profstack: note: {name}: left out: {why}"), file=sys.stderr)
        sources = [s for s in found if not _inside(getattr(s, "path", None), out_dir)]
        if not sources:
            raise CliError(f"no *.json or *.json.gz trace files under {', '.join(args.paths)}")
        total = sum(s.size_hint or 0 for s in sources)
        progress = Progress(total, sys.stderr)
        try:
            if len(sources) > 1 and args.jobs != 1:
                # ranks in several processes where it pays (profstack/analysis/parallel.py): the same summary
                result = analyze_in_processes(sources, options, progress=progress, jobs=args.jobs)
            else:
                result = analyze(sources, options, progress=progress)
        finally:
            progress.finish()
        summary: Summary = result.summary
        if not summary.get("ranks"):
            # Nothing usable: an error, not an empty report.
            said = [str(w.get("message")) for w in summary.get("warnings") or []]  # e.g. files left out, and why
            errors = [e.message for e in result.errors] or [
                f"no analysable trace data: {said[0]}" if said else "no analysable trace data"
            ]
            more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
            raise CliError(f"{errors[0]}{more}")
        out_dir.mkdir(parents=True, exist_ok=True)
        outputs: list[Path] = []
        skipped: list[str] = []
        trims: list[TrimReport] = []
        if "perfetto" in formats:
            # first, so summary.json and the report can name the timeline files and what they hold
            plan = _perfetto_outputs(summary, sources, out_dir / "perfetto")
            with progress.phase("writing Perfetto traces", len(plan)) as phase:
                written, skipped, trims = _write_perfetto(plan, window, args.perfetto_max_events, phase)
            summary["timelines"] = timeline_entries(written, trims, out_dir)
        else:
            written = []
            summary["timelines"] = []
        if "json" in formats:
            path = out_dir / "summary.json"
            _write_atomic(path, (json.dumps(summary, indent=2, allow_nan=False) + "\n").encode())
            outputs.append(path)
        if "html" in formats:
            from profstack.report import render_html

            path = out_dir / "report.html"
            with progress.phase("writing report", 1) as phase:
                _write_atomic(path, render_html(summary).encode("utf-8"))
                phase(1)
            outputs.append(path)
        outputs.extend(written)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise CliError(f"{where}{exc.strerror or exc}") from None
    except (CliError, KeyboardInterrupt):
        raise
    except Exception as exc:
        # A bug, not bad input: still one line for the user; PROFSTACK_DEBUG=1 shows the traceback.
        if os.environ.get("PROFSTACK_DEBUG"):
            raise
        detail = " ".join(str(exc).split())[:200]
        raise CliError(
            f"internal error ({type(exc).__name__}: {detail}); rerun with PROFSTACK_DEBUG=1 and report it"
        ) from None
    # names and messages come from the trace: no terminal escape codes or control characters reach the tty
    print(printable(text_summary(summary, outputs, time.monotonic() - start, total)))
    for rep in trims:
        print(escape.one_line(f"Timeline of {rep.source} (rank {rep.rank}): {rep.describe()}"))
    if trims:
        print("Open a timeline: https://ui.perfetto.dev, then drag the .trace.json.gz file onto the page.")
    for w in summary.get("warnings") or []:
        print(escape.one_line(f"profstack: warning: {w.get('message')}"), file=sys.stderr)
    problems = []
    if not result.complete and _only_not_recorded(summary):
        problems.append("partial results; the traces did not record everything (see Not recorded above)")
    elif not result.complete:
        problems.append(f"partial results: {partial_cause(summary, outputs)}")
    if skipped:
        problems.append(f"no Perfetto trace for {len(skipped)} file(s): {skipped[0]}")
    if problems:
        print(escape.one_line("profstack: warning: " + "; ".join(problems)), file=sys.stderr)
        return 1
    return 0
