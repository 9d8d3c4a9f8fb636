"""`profstack config check [FILE]`: validate a ProfStack config file without synthesizing anything.

The same check `cdk deploy` runs first (app.py): every problem is one line, naming the field, and a value that
is the example config's placeholder (its VPC and subnets, example.com e-mails, documentation account ids) is a
problem: such a config synthesizes but cannot deploy. Warnings (for example a region where managed TensorBoard
is not documented) do not fail the check. Exit status: 0 valid, 1 invalid.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from profstack.cli._help import FILE, command
from profstack.config import CONFIG_ENV, DEFAULT_CONFIG_PATH, default_config_path, load_config_reporting

_INVALID = "profstack: invalid config: "
_WARNING = "profstack: warning: "


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "config",
        help="check a ProfStack config file (write one with `profstack init`)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=("profstack config check", "profstack config check my-profstack.yaml --json"),
    )
    commands = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = command(
        commands,
        "check",
        help="validate a config file (exit 1 with one line per problem if invalid)",
        description="Validate a ProfStack config file: the check `cdk deploy` runs first. Every problem is one "
        "line naming the field; placeholder values of the example config (its VPC and subnets, example.com "
        "e-mails, documentation account ids) are problems.",
        examples=(
            "profstack config check",
            "profstack config check config/profstack.yaml",
            "profstack config check my-profstack.yaml --json",
            "profstack config check config/profstack.yaml --allow-example-values  # the shipped example",
        ),
    )
    check.add_argument(
        "file",
        nargs="?",
        type=Path,
        default=default_config_path(),
        metavar=FILE,
        help=f"config file (default ${CONFIG_ENV}, else {DEFAULT_CONFIG_PATH})",
    )
    check.add_argument(
        "--allow-example-values",
        action="store_true",
        help="warn about the example config's placeholders instead of rejecting them (what `make synth` does: "
        "the example synthesizes, it cannot deploy)",
    )
    check.add_argument("--json", action="store_true", help="print {file, valid, problems, warnings} as JSON")
    check.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    stream = io.StringIO() if args.json else sys.stderr
    config = load_config_reporting(args.file, stream, example_values="warn" if args.allow_example_values else "refuse")
    if args.json:
        lines = stream.getvalue().splitlines() if isinstance(stream, io.StringIO) else []
        print(
            json.dumps(
                {
                    "file": str(args.file),
                    "valid": config is not None,
                    "problems": [ln.removeprefix(_INVALID) for ln in lines if ln.startswith(_INVALID)],
                    "warnings": [ln.removeprefix(_WARNING) for ln in lines if ln.startswith(_WARNING)],
                    "users": len(config.users) if config else None,
                    "domain": config.domain.mode if config else None,
                },
                indent=2,
            )
        )
    elif config is not None:
        print(f"{args.file}: valid ({len(config.users)} users, domain {config.domain.mode})")
    return 0 if config is not None else 1
