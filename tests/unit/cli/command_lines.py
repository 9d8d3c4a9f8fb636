"""Command lines as people read them (docs, help examples), checked against the real CLI, Makefile and modules.

`check(line, full=...)` returns the problems of one command line, an empty list when it is one the project
accepts: a `profstack ...` line is parsed by the real argparse tree (`profstack.cli.build_parser`), a `make ...`
line names a target (and variables) of the Makefile, a `python -m X ...` line names a module that exists and
flags that its `--help` lists. Usage notation (`[--x]`, `A | B`, `...`) is read as the options it shows.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

PROFSTACK = ("profstack", ".venv/bin/profstack", "bin/profstack")
PYTHONS = ("python", "python3", "python3.11", ".venv/bin/python", "$(BIN)/python", "venv/bin/python")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*")


@dataclass(frozen=True)
class Command:
    kind: str  # profstack | make | python-m
    words: tuple[str, ...]  # after the program (profstack: its arguments; make: targets; python-m: module, args)
    text: str


def words_of(line: str) -> list[str] | None:
    """Shell words of one command line, without a `$ ` prompt, a trailing comment or env assignments; None when
    the shell could not split it (an unbalanced quote in prose)."""
    line = line.strip().removeprefix("$ ").strip()
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and _ASSIGNMENT.match(words[0]) and not words[0].startswith("--"):
        words.pop(0)
    return words


def commands_in(line: str) -> list[Command]:
    """The checkable commands of a shell line (`a && b`, `a; b` and `a | b` are several)."""
    found = []
    for part in re.split(r"\s(?:&&|\|\||;|\|)\s", line):
        words = words_of(part)
        if not words:
            continue
        head = words[0]
        if head in PROFSTACK:
            if len(words) > 1 and re.fullmatch(r"\d+\.\d+(\.\d+)?", words[1]):
                continue  # `profstack 0.1.0 (engine: c)`: what --version prints, quoted
            found.append(Command("profstack", tuple(words[1:]), part.strip()))
        elif head in {"make", "$(MAKE)"}:
            found.append(Command("make", tuple(words[1:]), part.strip()))
        elif head in PYTHONS and len(words) > 2 and words[1] == "-m":
            if words[2] == "profstack" or words[2] == "profstack.cli":
                found.append(Command("profstack", tuple(words[3:]), part.strip()))
            elif words[2] not in {"pip", "venv", "pytest", "mypy", "ruff", "json.tool", "http.server"}:
                found.append(Command("python-m", tuple(words[2:]), part.strip()))
    return found


def usage_words(words: tuple[str, ...]) -> list[str]:
    """Usage notation read as the options it shows: `[--x N]` -> `--x N`, a lone `|` or `...` dropped,
    `PATH...` -> `PATH`."""
    out = []
    for raw in words:
        word = raw.strip("[]")
        if word in {"", "|", "...", "…"}:
            continue
        out.append(word.removesuffix("...").removesuffix("…") or word)
    return out


# ------------------------------------------------------------------------------------------ profstack


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from profstack.cli import build_parser

    return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def _unknown_options(parser: argparse.ArgumentParser, args: list[str], path: str) -> list[str]:
    options = _options(parser)
    problems = []
    for word in args:
        match = _FLAG.match(word)
        if match and not re.fullmatch(r"-\d+(\.\d+)?", word):
            flag = match.group(0)
            if flag not in options:  # an abbreviation argparse would take is still not what the docs should show
                problems.append(f"`{path}` has no option {flag}")
    return problems


def check_profstack(words: tuple[str, ...], *, full: bool) -> list[str]:
    """Problems of `profstack <words>`: an unknown sub-command or option anywhere; with `full`, whatever
    argparse itself refuses (a missing required argument, a bad choice)."""
    args = usage_words(words)
    parser = _parser()
    path = ["profstack"]
    i = 0
    while i < len(args):
        subs = _subcommands(parser)
        if not subs or args[i].startswith("-"):
            break
        if "|" in args[i] and all(alt in subs for alt in args[i].split("|")):
            args[i] = args[i].split("|")[0]  # `iam boundary|scp`: alternatives, each a sub-command
        if args[i] not in subs:
            if args[i] in {"COMMAND", "ACTION", "TOOL"}:  # the help's own placeholder
                return []
            return [f"`{' '.join(path)}` has no sub-command {args[i]!r} (it has {', '.join(sorted(subs))})"]
        parser = subs[args[i]]
        path.append(args[i])
        i += 1
    if _subcommands(parser) and i == len(args):
        return []  # a group named on its own (`profstack legacy`): a reference, not a command line
    problems = _unknown_options(parser, args[i:], " ".join(path))
    if problems or not full:
        return problems
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(args)
    except SystemExit as exit_:
        if exit_.code not in (0, None):  # --help exits 0
            return [stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else "argparse refused it"]
    return []


# ------------------------------------------------------------------------------------------ make


@functools.cache
def make_targets() -> tuple[frozenset[str], frozenset[str]]:
    """(targets, variables) of the Makefile."""
    text = (REPO_ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z0-9][a-z0-9-]*):", text, flags=re.MULTILINE))
    variables = set(re.findall(r"^([A-Z_]+)\s*[?:]?=", text, flags=re.MULTILINE))
    variables |= set(re.findall(r"\$\(([A-Z_]+)\)", text))
    return frozenset(targets), frozenset(variables)


def check_make(words: tuple[str, ...]) -> list[str]:
    targets, variables = make_targets()
    problems = []
    for word in usage_words(words):
        if "=" in word:
            name = word.split("=", 1)[0]
            if name not in variables:
                problems.append(f"the Makefile reads no variable {name}")
        elif word.startswith("-"):
            continue  # make's own options (-n, -j2)
        elif word not in targets:
            problems.append(f"the Makefile has no target {word!r}")
    return problems


# ------------------------------------------------------------------------------------------ python -m


@functools.cache
def module_help(module: str) -> str:
    """What `python -m module --help` prints (stdout and stderr): the flags it knows are named there."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr


def check_python_module(words: tuple[str, ...]) -> list[str]:
    if not usage_words(words):
        return []  # `python -m ...`: prose about the form, not a command
    module, *rest = usage_words(words)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return [f"no module {module}"]
    flags = [m.group(0) for w in rest if (m := _FLAG.match(w)) and w.startswith("--")]
    if not flags:
        return []
    shown = module_help(module)
    return [
        f"`python -m {module}` does not know {flag} (its --help does not list it)"
        for flag in flags
        if flag not in shown
    ]


def check(command: Command, *, full: bool) -> list[str]:
    if command.kind == "profstack":
        return check_profstack(command.words, full=full)
    if command.kind == "make":
        return check_make(command.words)
    return check_python_module(command.words)


def relative(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))
