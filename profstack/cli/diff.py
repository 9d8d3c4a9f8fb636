"""`profstack diff A B`: compare two jobs (summary.json files, report folders holding one, or trace folders).

    profstack diff A B [--html FILE] [--top K] [--limit N]

Prints per-kernel and per-operator time and count deltas, step time and breakdown deltas; `--html` also
writes them as a self-contained page. Exit status: 0, or 2 for an input that is neither a summary nor a
folder of traces (one `profstack: error:` line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from profstack.cli import CliError
from profstack.escape import lines


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="compare two jobs: kernel, operator, step-time and breakdown deltas (text and HTML)",
        description="Compare two jobs, each given as a summary.json, a folder holding one (a report folder), "
        "or a folder of PyTorch profiler traces (analysed first).",
    )
    parser.add_argument("a", metavar="A", type=Path, help="the baseline: summary.json, report folder or trace folder")
    parser.add_argument("b", metavar="B", type=Path, help="the job to compare with A, in the same forms")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write the comparison as an HTML page")
    parser.add_argument(
        "--top",
        type=int,
        default=50,
        metavar="K",
        help="top-K kernels per rank when analysing trace folders (default 50)",
    )
    parser.add_argument("--limit", type=int, default=25, metavar="N", help="kernels and operators listed (default 25)")
    parser.set_defaults(handler=run)


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
    from profstack.analysis.diff import diff_summaries, format_text

    a = load_summary(args.a, top_k=args.top)
    b = load_summary(args.b, top_k=args.top)
    diff = diff_summaries(a, b, a_label=str(args.a), b_label=str(args.b), limit=args.limit)
    print(lines(format_text(diff)), end="")  # kernel and operator names come from traces
    if args.html:
        from profstack.report.diff import render_diff_html

        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(render_diff_html(diff), encoding="utf-8")
        print(f"HTML: {args.html}")
    return 0
