"""Every sub-command and option of `profstack` says what it does."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from profstack.cli import build_parser


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield " ".join((*path, name)), argparse.Action([name], name, help=helps.get(name))
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield " ".join(path) or "profstack", action


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
    assert len(seen) > 40
