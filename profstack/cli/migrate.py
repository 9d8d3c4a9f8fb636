"""`profstack migrate smprof PATH...`: rewrite SageMaker Profiler scripts to torch.profiler.

The account-side tools (audit, expire-rule-output, disable-profiler) live under
`profstack legacy`, next to tag-rule-output.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profstack.cli import CliError
from profstack.migrate.smprof import RewriteError, RewriteResult, rewrite_source


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("migrate", help="migrate off SageMaker Profiler")
    commands = parser.add_subparsers(dest="migrate_command", metavar="TOOL", required=True)
    smprof = commands.add_parser(
        "smprof",
        help="rewrite smprof/smppy scripts to torch.profiler (prints a diff unless --write)",
        description="Rewrite SageMaker Profiler (smprof/smppy) usage to torch.profiler. "
        "Prints a unified diff by default; --write edits the files in place.",
    )
    smprof.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="Python files or directories")
    mode = smprof.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the files in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if any file still uses smprof (for CI)")
    smprof.set_defaults(handler=run_smprof)


def _python_files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if ".venv" not in p.parts)
        elif path.is_file():
            yield path
        else:
            raise CliError(f"{path}: no such file or directory")


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, path.stat().st_mode)
    os.replace(tmp, path)


def _report(path: Path, result: RewriteResult) -> None:
    for finding in result.edits:
        print(f"{path}:{finding.line}: rewrote: {finding.message}", file=sys.stderr)
    for finding in result.manual:
        where = f"{path}:{finding.line}" if finding.line else str(path)
        print(f"{where}: needs review: {finding.message}", file=sys.stderr)


def run_smprof(args: argparse.Namespace) -> int:
    changed = needs_review = 0
    for path in _python_files(args.paths):
        try:
            original = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{path}: cannot read ({exc})") from None
        try:
            result = rewrite_source(original, filename=str(path))
        except RewriteError as exc:
            raise CliError(str(exc)) from None
        _report(path, result)
        needs_review += bool(result.manual)
        if not result.changed:
            continue
        changed += 1
        if args.write:
            _write_atomically(path, result.source)
        elif not args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    original.splitlines(keepends=True),
                    result.source.splitlines(keepends=True),
                    fromfile=f"a/{path}",
                    tofile=f"b/{path}",
                )
            )
    verb = "rewrote" if args.write else "would rewrite"
    print(f"profstack migrate: {verb} {changed} file(s); {needs_review} need review", file=sys.stderr)
    return 1 if args.check and (changed or needs_review) else 0
