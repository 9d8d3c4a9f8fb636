"""`profstack diff A B`: compare two jobs (summary.json files, report folders holding one, or trace folders).

    profstack diff A B [--html FILE] [--top K] [--limit N] [--json]

Prints per-kernel and per-operator time and count deltas, step time and breakdown deltas; `--html` also
writes them as a self-contained page. Exit status: 0, or 2 for an input that is neither a summary nor a
folder of traces (one `profstack: error:` line).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from profstack.analysis.diff import Delta, NamedDelta, SummaryDiff
from profstack.cli import CliError
from profstack.cli._help import DEFAULT_DIFF_LIMIT, DEFAULT_TOP_K, FILE, N, command


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "diff",
        help="compare two jobs: kernel, operator, step-time and breakdown deltas (text and HTML)",
        description="Compare two jobs, each given as a summary.json, a folder holding one (a report folder), "
        "or a folder of PyTorch profiler traces (analysed first).",
        examples=(
            "profstack diff before/summary.json after/summary.json",
            "profstack diff run-a/ run-b/ --html diff.html",
            "profstack diff traces-a/ traces-b/ --top 30 --limit 50 --json",
        ),
    )
    parser.add_argument("a", metavar="A", type=Path, help="the baseline: summary.json, report folder or trace folder")
    parser.add_argument("b", metavar="B", type=Path, help="the job to compare with A, in the same forms")
    parser.add_argument("--html", type=Path, metavar=FILE, help="also write the comparison as an HTML page")
    add_top_argument(parser, "top-K kernels per rank when analysing trace folders")
    add_limit_argument(parser)
    add_json_argument(parser, "print the comparison as JSON instead of text")
    parser.set_defaults(handler=run)


def add_top_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--top", type=int, default=DEFAULT_TOP_K, metavar="K", help=f"{what} (default {DEFAULT_TOP_K})")


def add_limit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_DIFF_LIMIT,
        metavar=N,
        help=f"kernels and operators listed (default {DEFAULT_DIFF_LIMIT})",
    )


def add_json_argument(parser: argparse.ArgumentParser, what: str = "print JSON instead of text") -> None:
    parser.add_argument("--json", action="store_true", help=what)


def diff_json(diff: SummaryDiff) -> dict[str, Any]:
    """The comparison as JSON: every delta with its change and relative change (None where undefined)."""

    def delta(d: Delta) -> dict[str, Any]:
        return {"name": d.name, "a": d.a, "b": d.b, "unit": d.unit, "change": d.change, "change_pct": d.change_pct}

    def named(n: NamedDelta) -> dict[str, Any]:
        return {"name": n.name, "kind": n.kind, "time": delta(n.time), "count": delta(n.count)}

    return {
        "a": diff.a_label,
        "b": diff.b_label,
        "steps": [delta(d) for d in diff.steps],
        "breakdown": [delta(d) for d in diff.breakdown],
        "kernels": [named(n) for n in diff.kernels],
        "operators": [named(n) for n in diff.operators],
        "notes": list(diff.notes),
    }


def print_diff(diff: SummaryDiff, *, html: Path | None, as_json: bool) -> None:
    """Text (or JSON) on stdout; the HTML page too when asked for."""
    if html:
        from profstack.report.diff import render_diff_html

        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_diff_html(diff), encoding="utf-8")
    if as_json:
        print(json.dumps({**diff_json(diff), "html": str(html) if html else None}, indent=2))
        return
    from profstack.analysis.diff import format_text

    print(format_text(diff), end="")
    if html:
        print(f"HTML: {html}")


def load_summary(path: Path, *, top_k: int) -> dict[str, Any]:
    """A summary from a summary.json, a folder with one at its top, or a folder (or file) of traces."""
    candidate = path / "summary.json" if path.is_dir() else path
    if candidate.is_file() and candidate.suffix == ".json":
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            if candidate.name == "summary.json":
                raise CliError(f"{candidate}: not a readable summary ({exc})") from None
            data = None
        if isinstance(data, dict) and "schema_version" in data and "ranks" in data:
            return data
    if not path.exists():
        raise CliError(f"{path}: no such file or folder")
    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    sources = discover_sources([path])
    if not sources:
        raise CliError(f"{path}: neither a summary.json nor a folder with PyTorch profiler traces")
    result = analyze(sources, AnalysisOptions(top_k=top_k))
    if result.failed_all:
        raise CliError(f"{path}: no trace could be analysed")
    return dict(result.summary)


def run(args: Any) -> int:
    if args.top < 1 or args.limit < 1:
        raise CliError("--top and --limit must be at least 1")
    from profstack.analysis.diff import diff_summaries

    a = load_summary(args.a, top_k=args.top)
    b = load_summary(args.b, top_k=args.top)
    diff = diff_summaries(a, b, a_label=str(args.a), b_label=str(args.b), limit=args.limit)
    print_diff(diff, html=args.html, as_json=args.json)
    return 0
