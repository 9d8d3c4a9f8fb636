"""One vocabulary for the `profstack` help: examples in every command's help, shared placeholders and defaults.

Every sub-command is created through `command()`, which gives it an `examples:` epilog (kept as written, each
line a command that `tests/unit/cli/test_help.py` parses against the real parser) and the formatter that keeps
it so. Placeholders (metavars) and defaults that several commands share live here, so `--top` or `--user`
cannot mean one thing in one command and another elsewhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

EXAMPLES_HEADING = "examples:"

# ------------------------------------------------------------------------------------------ placeholders
USER = "USER"
JOB = "JOB"
BUCKET = "BUCKET"
REGION = "REGION"
PATH = "PATH"
DIR = "DIR"
FILE = "FILE"
ARN = "ARN"
N = "N"
DAYS = "DAYS"
SECONDS = "SECONDS"
EMAIL = "EMAIL"
INSTANCE_TYPE = "INSTANCE_TYPE"
PREFIX = "PREFIX"
WHEN = "WHEN"

# ------------------------------------------------------------------------------------------ shared defaults
#: top-K kernels per rank, wherever traces are analysed (`analyze --top`, `diff --top`)
DEFAULT_TOP_K = 15
#: kernels and operators a comparison lists (`diff --limit`, `reports diff --limit`)
DEFAULT_DIFF_LIMIT = 25

#: the environment variable naming the trace bucket, for the reports commands and for migrated launchers
BUCKET_ENV = "PROFSTACK_TRACE_BUCKET"
#: its older spelling, read by `profstack reports` until 0.3 (with a warning)
DEPRECATED_BUCKET_ENV = "PROFSTACK_BUCKET"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an `examples:` epilog keeps its lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES_HEADING):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def examples(*lines: str, note: str = "") -> str:
    """The epilog: `examples:` then one command per line (`#` comments allowed after two spaces)."""
    import textwrap

    body = "\n".join(f"  {line}" for line in lines)
    return f"{EXAMPLES_HEADING}\n{body}" + (f"\n\n{textwrap.fill(note, width=79)}" if note else "")


def command(
    subparsers: Any,
    name: str,
    *,
    help: str,
    examples: Sequence[str],
    description: str | None = None,
    note: str = "",
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """A sub-command with help, a description (default: the help) and its examples."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=description or _sentence(help),
        epilog=_examples(examples, note),
        formatter_class=HelpFormatter,
        **kwargs,
    )
    return parser


def _examples(lines: Sequence[str], note: str) -> str:
    return examples(*lines, note=note)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def example_commands(epilog: str | None) -> list[str]:
    """The commands of an `examples:` epilog, without their trailing `# comments`."""
    if not epilog or not epilog.startswith(EXAMPLES_HEADING):
        return []
    found = []
    for line in epilog.splitlines()[1:]:
        if not line.startswith("  "):
            break
        found.append(line.strip().split("  #", 1)[0].strip())
    return [c for c in found if c]


def refuse(hint: str) -> type[argparse.Action]:
    """An option spelling that is no longer accepted: argparse reports `hint` as the error, naming the option."""

    class Refused(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
            parser.error(f"{'/'.join(self.option_strings)}: {hint}")

    return Refused


def deprecated(new: str) -> type[argparse.Action]:
    """An older option spelling that still works, with a one-line warning naming the new one."""

    class Deprecated(argparse.Action):
        def __call__(
            self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
        ) -> None:
            import sys

            print(f"profstack: warning: {option} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, values)

    return Deprecated
