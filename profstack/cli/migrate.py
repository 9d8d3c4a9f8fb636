"""`profstack migrate smprof PATH...`: take SageMaker Profiler out of scripts, launchers and dependencies.

Python files and the code cells of notebooks get the LibCST codemods (training scripts ->
torch.profiler; launchers lose ProfilerConfig and gain the ProfStack TensorBoard output and owner
tag). Requirements files, Dockerfiles, pyproject.toml and setup.cfg lose what installs smprof/smppy. One unreadable or
unparsable file is reported and the others are still processed. The account-side tools (audit,
cleanup, ...) live under `profstack legacy`.
"""

from __future__ import annotations

import argparse
import codecs
import difflib
import io
import os
import re
import sys
import tempfile
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profstack.cli import CliError
from profstack.cli._help import BUCKET, USER, command

# S3 general purpose bucket names: 3-63 of a-z 0-9 . -, starting and ending with a letter or digit
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache", "cdk.out"})


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "migrate",
        help="migrate off SageMaker Profiler",
        examples=("profstack migrate smprof train.py", "profstack migrate smprof --write src/"),
    )
    commands = parser.add_subparsers(dest="migrate_command", metavar="TOOL", required=True)
    smprof = command(
        commands,
        "smprof",
        examples=(
            "profstack migrate smprof train.py  # print the diff",
            "profstack migrate smprof --write src/ notebooks/",
            "profstack migrate smprof --check .  # in CI: exit 1 while anything would change",
            "profstack migrate smprof --write launch.py --user alice --trace-bucket my-profstack-traces",
        ),
        help="rewrite smprof/smppy scripts, notebooks, SageMaker launchers and dependency files (prints a diff "
        "unless --write)",
        description="Take SageMaker Profiler out of training scripts (-> torch.profiler), notebooks (their code "
        "cells), launchers (ProfilerConfig -> TensorBoardOutputConfig on the ProfStack prefix) and requirements/"
        "Dockerfile/pyproject/setup.cfg. Prints a unified diff by default; --write edits the files in place.",
    )
    smprof.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="files or directories (searched recursively)"
    )
    mode = smprof.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the files in place")
    mode.add_argument(
        "--check",
        action="store_true",
        help="exit 1 while any file would change or still uses smprof/smppy/ProfilerConfig (for CI)",
    )
    smprof.add_argument(
        "--user", metavar=USER, help="ProfStack user written into launchers (default: $PROFSTACK_USER at launch)"
    )
    smprof.add_argument(
        "--trace-bucket",
        metavar=BUCKET,
        help="ProfStack trace bucket for the TensorBoard prefix (default: $PROFSTACK_TRACE_BUCKET at launch)",
    )
    smprof.add_argument(
        "--no-tensorboard-config",
        action="store_true",
        help="do not add TensorBoardOutputConfig or the profstack:user tag to launchers",
    )
    smprof.set_defaults(handler=run_smprof)


@dataclass
class _Outcome:
    changed: bool = False
    source: str = ""
    edits: list[Any] = field(default_factory=list)
    manual: list[Any] = field(default_factory=list)


def _candidates(paths: list[Path]) -> Iterator[tuple[Path, str | None, str | None]]:
    """(file, dependency kind or None for Python, why it is not processed or None) of each file, each
    once. A requirements file's `-r`/`-c` includes are requirements files too, whatever their name
    (`-r base.txt`), when they lie under one of the given paths (never a file outside what was asked
    for). A symbolic link is followed to its file, which is rewritten in place (the link stays a link),
    when that file lies under a given path; a link out of them is reported, not followed."""
    from profstack.migrate.dependencies import kind_of

    seen: set[Path] = set()
    roots = [p.resolve() for p in paths]
    pending: list[tuple[Path, str | None]] = []
    for path in paths:
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                for name in sorted(files):
                    candidate = Path(root) / name
                    if candidate.suffix in {".py", ".ipynb"} or kind_of(candidate) is not None:
                        pending.append((candidate, _kind(candidate)))
        elif path.is_file():
            pending.append((path, _kind(path)))
        else:
            raise CliError(f"{path}: no such file or directory")
    while pending:
        path, kind = pending.pop(0)
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        if path.is_symlink():
            if not any(key.is_relative_to(root) for root in roots):
                yield path, kind, f"a link to {key}, outside the given paths: not rewritten"
                continue
            path = key
        yield path, kind, None
        if kind == "requirements":
            pending += [(p, "requirements") for p in _includes(path, roots) if p.resolve() not in seen]


def _kind(path: Path) -> str | None:
    from profstack.migrate.dependencies import kind_of

    return "notebook" if path.suffix == ".ipynb" else kind_of(path)


def _includes(path: Path, roots: list[Path]) -> list[Path]:
    from profstack.migrate.dependencies import included_files

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []  # reported when the file itself is processed
    found = [path.parent / name for name in included_files(text)]
    return [p for p in found if p.is_file() and any(p.resolve().is_relative_to(root) for root in roots)]


def _read(path: Path, kind: str | None) -> tuple[str, str]:
    """(text, encoding), byte for byte: line endings kept as they are (CRLF stays CRLF), a Python
    file decoded as its coding line or BOM says (PEP 263: latin-1 files, utf-8-sig), others UTF-8."""
    data = path.read_bytes()
    if kind is None:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    else:
        encoding = "utf-8-sig" if data.startswith(codecs.BOM_UTF8) else "utf-8"
    return data.decode(encoding), encoding


def _write_atomically(path: Path, text: str, encoding: str) -> None:
    data = text.encode(encoding)  # before the temp file: an unencodable text leaves nothing behind
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, path.stat().st_mode)
    os.replace(tmp, path)


def _process(path: Path, kind: str | None, text: str, args: argparse.Namespace) -> _Outcome:
    from profstack.migrate.dependencies import rewrite_dependencies
    from profstack.migrate.launcher import LauncherOptions
    from profstack.migrate.smprof import rewrite_source

    if kind is not None and kind != "notebook":
        dep = rewrite_dependencies(kind, text)
        return _Outcome(dep.changed, dep.source, dep.edits, dep.manual)
    options = LauncherOptions(
        user=args.user, trace_bucket=args.trace_bucket, tensorboard=not args.no_tensorboard_config
    )
    if kind == "notebook":
        from profstack.migrate.notebook import NotebookError, rewrite_notebook

        try:
            notebook = rewrite_notebook(text, launcher=options)
        except NotebookError as exc:
            return _Outcome(False, text, [], [_finding(0, str(exc))])
        return _Outcome(notebook.changed, notebook.source, notebook.edits, notebook.manual)
    result = rewrite_source(text, filename=str(path), launcher=options)
    return _Outcome(result.changed, result.source, result.edits, result.manual)


def _finding(line: int, message: str) -> Any:
    from profstack.migrate._cst import Finding

    return Finding(line, message)


def _check_launcher_values(args: argparse.Namespace) -> None:
    """--user and --trace-bucket are written into launchers as string literals: only plain values."""
    from profstack.layout import LayoutError, user_tensorboard_prefix

    if args.user is not None:
        try:
            user_tensorboard_prefix(args.user)
        except LayoutError as exc:
            raise CliError(str(exc)) from None
    if args.trace_bucket is not None and not BUCKET_NAME.fullmatch(args.trace_bucket):
        # a quote in it would break (or inject into) the launcher's code
        raise CliError(f"--trace-bucket '{args.trace_bucket}' is not an S3 bucket name")


def run_smprof(args: argparse.Namespace) -> int:
    from profstack.migrate.smprof import RewriteError

    _check_launcher_values(args)
    changed = needs_review = failed = 0
    for path, kind, skipped in _candidates(args.paths):
        if skipped is not None:
            print(f"{path}: needs review: {skipped}", file=sys.stderr)
            needs_review += 1
            continue
        try:
            original, encoding = _read(path, kind)
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:  # SyntaxError: a bad coding line
            print(f"{path}: error: cannot read ({exc})", file=sys.stderr)
            failed += 1
            continue
        try:
            outcome = _process(path, kind, original, args)
        except RewriteError as exc:
            print(f"{exc} (file left as is)", file=sys.stderr)
            failed += 1
            continue
        for finding in outcome.edits:
            where = f"{path}:{finding.line}" if finding.line else str(path)  # a notebook's say `cell N, line M`
            print(f"{where}: rewrote: {finding.message}", file=sys.stderr)
        for finding in outcome.manual:
            where = f"{path}:{finding.line}" if finding.line else str(path)
            print(f"{where}: needs review: {finding.message}", file=sys.stderr)
        needs_review += bool(outcome.manual)
        if not outcome.changed:
            continue
        changed += 1
        if args.write:
            _write_atomically(path, outcome.source, encoding)
        elif not args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    original.splitlines(keepends=True),
                    outcome.source.splitlines(keepends=True),
                    fromfile=f"a/{path}",
                    tofile=f"b/{path}",
                )
            )
    verb = "rewrote" if args.write else "would rewrite"
    print(
        f"profstack migrate: {verb} {changed} file(s); {needs_review} need review; "
        f"{failed} could not be read or parsed",
        file=sys.stderr,
    )
    if failed:
        return 1
    return 1 if args.check and (changed or needs_review) else 0
