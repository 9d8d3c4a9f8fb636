"""`profstack analyze`: analyse PyTorch profiler traces locally; write summary.json, report.html, Perfetto traces.

    profstack analyze PATH... --out DIR [--format json,html,perfetto] [--steps A:B] [--top K]
                      [--no-merge-ranks] [--threshold NAME=VALUE ...]

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
from typing import IO, TYPE_CHECKING, Any

from profstack.cli import CliError

if TYPE_CHECKING:
    from profstack.analysis import TraceSource

FORMATS = ("json", "html", "perfetto")
#: A trimmed trace meant for a viewer must stay well under ~500 MB of JSON (docs/platform-facts.md); Kineto
#: events average ~200-250 bytes, so one million events is ~250 MB before gzip.
DEFAULT_PERFETTO_MAX_EVENTS = 1_000_000
MB = 1_000_000
SEVERITIES = ("critical", "warning", "info")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="analyse PyTorch profiler (Kineto) traces: summary.json, report.html, trimmed Perfetto traces",
        description="Analyse PyTorch profiler (Kineto) traces locally: summary.json, a self-contained "
        "report.html and trimmed per-rank traces that Perfetto opens.",
        epilog=(
            "PATH is a *.json / *.json.gz trace or a directory searched recursively. Exit status: 0 complete, "
            "1 partial results (some input unreadable), 2 error."
        ),
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
    parser.add_argument("--top", type=int, default=10, metavar="K", help="top-K kernels (default 10)")
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
    parts = text.split(":")
    try:
        if len(parts) == 1:
            a = b = int(parts[0])
        elif len(parts) == 2:
            a, b = int(parts[0]), int(parts[1])
        else:
            raise ValueError(text)
    except ValueError:
        raise CliError(f"--steps: expected A:B with step numbers, e.g. 5:10, got {text!r}") from None
    if a > b:
        raise CliError(f"--steps: empty window {a}:{b} (A must not exceed B)")
    return a, b


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


# ------------------------------------------------------------------------------------------- progress


class Progress:
    """Bytes-read progress on stderr: a redrawn bar on a terminal, a plain line every few seconds otherwise."""

    def __init__(self, total_bytes: int, stream: IO[str], *, interval_s: float | None = None) -> None:
        self.total = max(total_bytes, 0)
        self.done = 0
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = interval_s if interval_s is not None else (0.1 if self.tty else 5.0)
        self.start = self.last = time.monotonic()
        self.drawn = False

    def __call__(self, nbytes: int) -> None:
        self.done += max(int(nbytes), 0)
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / MB / elapsed
        frac = min(self.done / self.total, 1.0) if self.total else 0.0
        if self.tty:
            width = 28
            filled = round(frac * width)
            bar = "█" * filled + "░" * (width - filled)
            self.stream.write(
                f"\r  {bar} {frac * 100:5.1f}%  {self.done / MB:,.1f}/{self.total / MB:,.1f} MB  {rate:,.1f} MB/s "
            )
        else:
            self.stream.write(
                f"profstack: read {self.done / MB:,.1f} of {self.total / MB:,.1f} MB ({frac * 100:.0f}%), "
                f"{rate:,.1f} MB/s\n"
            )
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\r" + " " * 78 + "\r")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------- outputs


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _perfetto_outputs(
    summary: Mapping[str, Any], sources: Sequence[TraceSource], out_dir: Path
) -> list[tuple[TraceSource, Path]]:
    """One trimmed trace per rank file: rank-<r>.trace.json.gz (rank-<r>.<i>.trace.json.gz for several)."""
    by_name = {s.name: s for s in sources}
    failed = {str(i.get("name")) for i in summary.get("inputs") or [] if i.get("status") == "failed"}
    plan: list[tuple[TraceSource, Path]] = []
    per_rank: dict[str, list[TraceSource]] = defaultdict(list)
    for rank in summary.get("ranks") or []:
        label = str(rank.get("rank", rank.get("label", "0")))
        for name in rank.get("sources") or []:
            src = by_name.get(str(name))
            if src is not None and src.name not in failed and src not in per_rank[label]:
                per_rank[label].append(src)
    for label, srcs in per_rank.items():
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)
        for i, src in enumerate(srcs):
            suffix = f".{i}" if len(srcs) > 1 else ""
            plan.append((src, out_dir / f"rank-{safe}{suffix}.trace.json.gz"))
    return plan


def _write_perfetto(
    plan: Sequence[tuple[TraceSource, Path]], steps: tuple[int, int] | None, max_events: int
) -> tuple[list[Path], list[str]]:
    """Trimmed traces; a file that cannot be trimmed (e.g. truncated) is skipped and reported, not fatal."""
    from profstack.analysis import TraceError, trim_trace

    written: list[Path] = []
    skipped: list[str] = []
    for src, path in plan:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with tmp.open("wb") as fh:
                trim_trace(src, fh, steps=steps, max_events=max_events, compress=True)
        except TraceError as exc:
            tmp.unlink(missing_ok=True)
            skipped.append(str(exc.with_source(src.name)))
            continue
        os.replace(tmp, path)
        written.append(path)
    return written, skipped


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


# C0 controls but newline, DEL, C1 controls (ESC/CSI start terminal sequences) and bidirectional overrides
_UNPRINTABLE = dict.fromkeys([*range(0x00, 0x0A), *range(0x0B, 0x20), *range(0x7F, 0xA0)], "?")
_UNPRINTABLE.update(dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)], "?"))


def printable(text: str) -> str:
    """``text`` with every control character (except newline) and bidi override replaced by ``?``."""
    return text.translate(_UNPRINTABLE)


def text_summary(summary: Mapping[str, Any], outputs: Sequence[Path], seconds: float, total_bytes: int) -> str:
    ranks = [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]
    gpu = [r for r in ranks if r.get("has_gpu")]
    status = "complete" if summary.get("complete") else "PARTIAL (some input could not be read)"
    lines = [
        f"Analysed {len(ranks)} rank(s) from {len(summary.get('inputs') or [])} file(s) "
        f"({total_bytes / MB:,.1f} MB on disk) in {seconds:.1f} s: {status}"
    ]
    if not gpu:
        lines.append("GPU: no GPU activity in these traces (CPU-only)")
    else:
        idle = [(r, (r.get("temporal_breakdown") or {}).get("idle_pct")) for r in gpu]
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
    lines.append("Findings: " + ", ".join(f"{n} {s}" for s, n in by_sev.items()))
    ranked = sorted(findings, key=lambda f: SEVERITIES.index(f["severity"]) if f.get("severity") in SEVERITIES else 9)
    for f in ranked[:5]:
        lines.append(f"  [{f.get('severity')}] {f.get('rule_id')}: {f.get('message')}")
    if outputs:
        lines.append("Outputs:")
        lines.extend(f"  {p}" for p in outputs)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- handler


def run(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    steps = parse_steps(args.steps)
    thresholds = parse_thresholds(args.threshold)
    if args.top < 1:
        raise CliError(f"--top must be at least 1, got {args.top}")
    if args.perfetto_max_events < 1:
        raise CliError(f"--perfetto-max-events must be at least 1, got {args.perfetto_max_events}")

    from profstack.analysis import AnalysisOptions, TraceError, analyze, discover_sources

    out_dir: Path = args.out
    start = time.monotonic()
    try:
        options = AnalysisOptions(
            top_k=args.top,
            steps=steps,
            rule_thresholds=thresholds,
            merge_rank_files=not args.no_merge_ranks,
        )
        # Never read our own outputs back (`profstack analyze . --out out`, run twice).
        sources = [s for s in discover_sources(args.paths) if not _inside(getattr(s, "path", None), out_dir)]
        if not sources:
            raise CliError(f"no *.json or *.json.gz trace files under {', '.join(args.paths)}")
        total = sum(s.size_hint or 0 for s in sources)
        progress = Progress(total, sys.stderr)
        try:
            result = analyze(sources, options, progress=progress)
        finally:
            progress.finish()
        summary: Mapping[str, Any] = result.summary
        if not summary.get("ranks"):
            # Nothing usable: an error, not an empty report.
            errors = [e.message for e in result.errors] or ["no analysable trace data"]
            more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
            raise CliError(f"{errors[0]}{more}")
        out_dir.mkdir(parents=True, exist_ok=True)
        outputs: list[Path] = []
        if "json" in formats:
            path = out_dir / "summary.json"
            _write_atomic(path, (json.dumps(summary, indent=2, allow_nan=False) + "\n").encode())
            outputs.append(path)
        if "html" in formats:
            from profstack.report import render_html

            path = out_dir / "report.html"
            _write_atomic(path, render_html(summary).encode("utf-8"))
            outputs.append(path)
        skipped: list[str] = []
        if "perfetto" in formats:
            plan = _perfetto_outputs(summary, sources, out_dir / "perfetto")
            written, skipped = _write_perfetto(plan, steps, args.perfetto_max_events)
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
    for w in summary.get("warnings") or []:
        print(printable(f"profstack: warning: {w.get('message')}"), file=sys.stderr)
    problems = []
    if not result.complete:
        problems.append("partial results; some input could not be fully read (see summary.json errors)")
    if skipped:
        problems.append(f"no Perfetto trace for {len(skipped)} file(s): {skipped[0]}")
    if problems:
        print("profstack: warning: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0
