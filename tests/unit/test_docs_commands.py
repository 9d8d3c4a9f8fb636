"""Docs that cannot go stale: every command README.md, CONTRIBUTING.md, docs/*.md and bench/README.md show is
one the project accepts.

Extracted: each line of a fenced code block, and each inline code span, that runs `profstack ...` (also as
`.venv/bin/profstack` or `python -m profstack.cli`), `make ...` or `python -m MODULE ...`. A fenced line is
parsed in full by the real argparse tree (a missing required argument fails too); an inline span may be a
fragment (`profstack reports open`), so its sub-commands and options must exist. Make targets and variables
are read from the Makefile; a module must exist and its `--help` must list each option shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.unit.cli.command_lines import Command, check, commands_in, relative

DOCS = sorted(
    [
        REPO_ROOT / "README.md",
        REPO_ROOT / "CONTRIBUTING.md",
        REPO_ROOT / "bench" / "README.md",
        *(REPO_ROOT / "docs").glob("*.md"),
    ]
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def doc_commands(path: Path) -> Iterator[tuple[int, Command, bool]]:
    """(line number, command, whether it is a whole line of a fenced block) of one Markdown file."""
    fenced = False
    pending = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if _FENCE.match(line):
            fenced, pending = not fenced, ""
            continue
        if fenced:
            text = pending + line
            if text.rstrip().endswith("\\"):
                pending = text.rstrip()[:-1] + " "
                continue
            pending = ""
            for command in commands_in(text):
                yield number, command, True
            continue
        for span in _INLINE.findall(line):
            for command in commands_in(span):
                yield number, command, False


def all_doc_commands() -> list[tuple[str, int, Command, bool]]:
    return [(relative(path), number, command, full) for path in DOCS for number, command, full in doc_commands(path)]


def test_every_command_in_the_docs_exists() -> None:
    # GIVEN every command the README, the contributors' guide, the docs and the benchmark guide show
    found = all_doc_commands()
    # WHEN each is checked against the real CLI parser, the Makefile and the modules
    problems = [
        f"{doc}:{number}: {command.text!r}: {problem}"
        for doc, number, command, full in found
        for problem in check(command, full=full)
    ]
    # THEN none names a sub-command, option, target or module that does not exist
    assert not problems, "\n".join(problems)


def test_the_extractor_sees_the_commands_people_type() -> None:
    # a guard for the test above: the extraction reaches fenced and inline commands of every kind
    found = all_doc_commands()
    kinds = {command.kind for _, _, command, _ in found}
    assert kinds == {"profstack", "make", "python-m"}
    assert any(full for *_, full in found)
    assert any(not full for *_, full in found)
    texts = {command.text for _, _, command, _ in found}
    assert "profstack reports list --user carol --since 7d" in texts or any(
        t.startswith("profstack reports list") for t in texts
    )
    assert len(found) >= 100, len(found)


@pytest.mark.parametrize(
    ("line", "full", "problem"),
    [
        ("profstack migrate expire-rule-output --bucket B", True, "has no sub-command 'expire-rule-output'"),
        ("profstack legacy tag-rule-output --bucket B --no-such-flag", False, "has no option --no-such-flag"),
        ("profstack reports open", True, "the following arguments are required: JOB"),
        ("make no-such-target", True, "no target 'no-such-target'"),
        ("make synth NO_SUCH_VAR=1", True, "no variable NO_SUCH_VAR"),
        ("python -m no_such_module_here", True, "no module no_such_module_here"),
        ("python -m profstack.config --no-such", True, "does not know --no-such"),
    ],
)
def test_a_stale_command_is_caught(line: str, full: bool, problem: str) -> None:
    # GIVEN a command line that names something that does not exist WHEN checked THEN the problem says what
    (command,) = commands_in(line)
    problems = check(command, full=full)
    assert any(problem in p for p in problems), problems


def test_usage_notation_is_read_as_the_options_it_shows() -> None:
    # GIVEN the usage notation docs use ([--x], A | B, PATH...) WHEN checked THEN it passes when the options exist
    (good,) = commands_in(
        "profstack legacy tag-rule-output --bucket B [--prefix P] [--apply] [--batch | --batch-threshold N]"
    )
    assert check(good, full=False) == []
    (bad,) = commands_in("profstack legacy tag-rule-output --bucket B [--dry-run-only]")
    assert check(bad, full=False) == ["`profstack legacy tag-rule-output` has no option --dry-run-only"]


def test_the_schema_page_names_the_current_schema_version() -> None:
    from profstack.analysis.summary import SUMMARY_SCHEMA_VERSION

    # GIVEN docs/summary-schema.md WHEN its title is read THEN it names the version the engine writes
    title = (REPO_ROOT / "docs" / "summary-schema.md").read_text(encoding="utf-8").splitlines()[0]
    assert title.endswith(f"schema {SUMMARY_SCHEMA_VERSION}"), title
