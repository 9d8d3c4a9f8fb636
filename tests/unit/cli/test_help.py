"""Every sub-command and option of `profstack` says what it does, and every command's help shows examples that
the command accepts (as git, pip, ruff and the AWS CLI do)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from profstack.cli import build_parser
from profstack.cli._help import DEFAULT_TOP_K, example_commands
from tests.unit.cli.command_lines import check, commands_in


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue  # an alias (`reanalyse` of `reanalyze`): the same parser
                seen.add(id(sub))
                yield " ".join((*path, name)), argparse.Action([name], name, help=helps.get(name))
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield " ".join(path) or "profstack", action


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("profstack",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _parsers(sub, (*path, name))


def test_every_command_and_option_has_help_text() -> None:
    # GIVEN the whole command tree WHEN every command and option is listed THEN none lacks help text
    missing = [
        f"{where}: {'/'.join(action.option_strings) or action.dest}"
        for where, action in _walk(build_parser())
        if not (action.help or "").strip()
    ]
    assert not missing, missing


def test_the_tree_is_walked_for_real() -> None:
    # a guard for the test above: the walk reaches nested sub-commands and their options
    seen = {(where, action.dest) for where, action in _walk(build_parser())}
    assert ("analyze", "steps") in seen
    assert ("tensorboard start", "apply") in seen
    assert ("config check", "file") in seen
    assert ("reports reanalyze", "apply") in seen
    assert len(seen) > 40


def test_every_command_shows_examples_its_parser_accepts() -> None:
    # GIVEN every command and command group of the tree
    parsers = list(_parsers(build_parser()))
    # WHEN each one's help epilog is read
    without = [name for name, parser in parsers if not example_commands(parser.epilog)]
    # THEN each shows examples
    assert not without, f"no examples in the help of: {without}"
    # AND each example names the command it belongs to and is one the real parser accepts in full
    problems = []
    for name, parser in parsers:
        for example in example_commands(parser.epilog):
            (command,) = commands_in(example)
            if not example.startswith(name + " ") and name not in (example, "profstack"):
                problems.append(f"{name}: example {example!r} is another command's")
            problems += [f"{name}: {example!r}: {p}" for p in check(command, full="--help" not in example)]
    assert not problems, "\n".join(problems)
    assert len(parsers) > 30


def test_examples_appear_in_the_help_text() -> None:
    # GIVEN a command WHEN its --help is printed THEN the examples follow the options, as written
    parser = dict(_parsers(build_parser()))["profstack reports list"]
    text = parser.format_help()
    assert "examples:\n  profstack reports list --user alice\n" in text


@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_top_has_one_default_everywhere(command: str) -> None:
    # GIVEN the commands that analyse traces WHEN --top is not given THEN the same default applies
    parsers = dict(_parsers(build_parser()))
    top = next(a for a in parsers[f"profstack {command}"]._actions if "--top" in a.option_strings)
    assert top.default == DEFAULT_TOP_K == 15


def test_days_means_a_lookback_and_expiry_has_its_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    # GIVEN the legacy commands WHEN their options are listed THEN --days is always "created in the last N days"
    parsers = dict(_parsers(build_parser()))
    for name, parser in parsers.items():
        for action in parser._actions:
            if "--days" in action.option_strings and action.help != argparse.SUPPRESS:
                assert "in the last" in (action.help or ""), name
    # AND the expiry is --expire-after-days; `expire-rule-output --days` is refused with a hint, not misread
    with pytest.raises(SystemExit) as exited:
        main(["legacy", "expire-rule-output", "--bucket", "b", "--days", "14"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--expire-after-days" in err
    assert "lookback" in err


def test_dry_run_and_apply_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    # GIVEN a command that takes the old --dry-run switch WHEN given with --apply THEN argparse refuses both
    with pytest.raises(SystemExit) as exited:
        main(["legacy", "tag-rule-output", "--bucket", "b", "--dry-run", "--apply"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_every_read_command_has_json() -> None:
    # GIVEN the commands that read and report (not those that change files or accounts)
    reads = [
        "config check",
        "diff",
        "reports list",
        "reports open",
        "reports get",
        "reports diff",
        "reports reanalyze",
        "reports backfill",
        "users list",
        "tensorboard url",
        "legacy audit",
        "verify",
        "cost",
    ]
    parsers = dict(_parsers(build_parser()))
    # WHEN their options are listed THEN each takes --json
    lacking = [r for r in reads if not any("--json" in a.option_strings for a in parsers[f"profstack {r}"]._actions)]
    assert not lacking, lacking
