"""`profstack` command line. Each sub-command lives in its own module and registers itself.

Sub-command modules expose `register(subparsers)`; they import boto3 lazily so that
`profstack analyze` works on a laptop without AWS credentials.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from profstack import __version__
from profstack.analysis.allocator import tune_malloc

# Modules under profstack.cli that contribute sub-commands, in help order.
SUBCOMMAND_MODULES = (
    "analyze",
    "diff",
    "reports",
    "reanalyze",  # adds `reports reanalyze` and `reports backfill`
    "init",
    "config",
    "verify",
    "cost",
    "users",
    "iam",
    "tensorboard",
    "legacy",
    "migrate",
)
# Top-level modules of the `aws` extra: a sub-command that needs them is listed but says how to get them.
AWS_EXTRA_MODULES = frozenset({"boto3", "botocore", "s3transfer"})
#: what the `aws` extra of pyproject.toml installs (ProfStack is not on PyPI: `profstack[aws]` would not resolve)
AWS_EXTRA_REQUIREMENT = "boto3>=1.34,<2"


def missing_aws_extra(what: str = "this command") -> str:
    """What to type when boto3 is missing: install it into the Python that runs `profstack` (not PyPI's
    `profstack[aws]`, which does not exist)."""
    return (
        f"{what} talks to AWS and needs boto3, which is not installed in {sys.prefix}: "
        f"run `{sys.executable} -m pip install '{AWS_EXTRA_REQUIREMENT}'` (docs/first-report.md, Install)"
    )


MISSING_AWS_EXTRA = missing_aws_extra()


class CliError(Exception):
    """An expected failure: printed as one line, exit status 2."""


def _version_text() -> str:
    """`profstack 0.1.0 (engine: c)`, or `(engine: python (<why>))`: which engine this install runs."""
    from profstack.analysis import native

    return f"profstack {__version__} (engine: {native.describe()})"


def build_parser() -> argparse.ArgumentParser:
    from profstack.cli._help import HelpFormatter, examples

    parser = argparse.ArgumentParser(
        prog="profstack",
        description="ProfStack: analyse PyTorch profiler traces, manage per-user TensorBoard on SageMaker, "
        "and move off SageMaker Profiler.",
        epilog=examples(
            "profstack analyze traces/ --out out/",
            "profstack reports list --user alice --since 7d",
            "profstack init --region us-east-1 --user alice=alice@yourcompany.com",
            "profstack COMMAND --help",
            note="Every command that changes an AWS account is a dry run until --apply. "
            "Guides: docs/first-report.md (engineers), docs/operate.md (administrators).",
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version_text())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"profstack.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"profstack.cli.{name}":
                continue  # sub-command not built yet
            if (exc.name or "").split(".")[0] in AWS_EXTRA_MODULES:
                _register_needs_aws_extra(subparsers, name)
                continue
            raise
        module.register(subparsers)
    return parser


def _register_needs_aws_extra(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """`pip install profstack` without `[aws]`: the AWS sub-commands exist and say what to install."""
    parser = subparsers.add_parser(
        name, help=f"(needs boto3: pip install '{AWS_EXTRA_REQUIREMENT}')", add_help=False, prefix_chars="\0"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the sub-command")

    def needs_extra(_: argparse.Namespace) -> int:
        raise CliError(missing_aws_extra(f"`profstack {name}`"))

    parser.set_defaults(handler=needs_extra)


def main(argv: Sequence[str] | None = None) -> int:
    tune_malloc()  # this process is ProfStack's: big blocks go back to the system (allocator.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except CliError as exc:
        print(f"profstack: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("profstack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # last resort: a bug must still read as one line, not a traceback
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in AWS_EXTRA_MODULES:
            # a lazy `import boto3` deep in a sub-command, on an install without the extra
            print(f"profstack: error: {MISSING_AWS_EXTRA}", file=sys.stderr)
            return 2
        if os.environ.get("PROFSTACK_DEBUG"):
            raise
        detail = str(exc).splitlines()[0] if str(exc) else ""
        print(
            f"profstack: internal error: {type(exc).__name__}: {detail} (PROFSTACK_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 3
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
