"""`profstack config check [FILE]`: validate a ProfStack config file without synthesizing anything.

The same check `make synth` and `cdk synth` run first: problems are one line each, naming the field;
warnings (for example a region where managed TensorBoard is not documented) do not fail the check.
Exit status: 0 valid, 1 invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from profstack.config import DEFAULT_CONFIG_PATH, load_config_reporting


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config",
        help="check a ProfStack config file",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    commands = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = commands.add_parser(
        "check",
        help="validate a config file (exit 1 with one line per problem if invalid)",
        description="Validate a ProfStack config file: the check `make synth` runs before synthesizing.",
    )
    check.add_argument(
        "file",
        nargs="?",
        type=Path,
        default=DEFAULT_CONFIG_PATH,
        metavar="FILE",
        help=f"config file (default {DEFAULT_CONFIG_PATH})",
    )
    check.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    config = load_config_reporting(args.file, sys.stderr)
    if config is None:
        return 1
    print(f"{args.file}: valid ({len(config.users)} users, domain {config.domain.mode})")
    return 0
