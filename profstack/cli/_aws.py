"""Shared plumbing of the `users` and `tensorboard` sub-commands: config, AWS clients, domain id.

boto3 is imported lazily (inside functions) so the CLI starts without it. Every expected
failure becomes a one-line CliError: unknown user, no domain, no credentials, AWS errors.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from profstack.cli import MISSING_AWS_EXTRA, CliError
from profstack.config import (
    CONFIG_ENV,
    DEFAULT_CONFIG_PATH,
    ConfigError,
    ProfStackConfig,
    User,
    default_config_path,
    load_config,
)
from profstack.tensorboard.names import DOMAIN_ID_OUTPUT, tensorboard_stack_name

T = TypeVar("T")

NO_REGION = (
    "no AWS region: pass --region, set environment.region in the config, or set AWS_REGION or "
    "AWS_DEFAULT_REGION (or `region` in your AWS config profile)"
)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=default_config_path(),
        metavar="PATH",
        help=f"ProfStack config (default ${CONFIG_ENV}, else {DEFAULT_CONFIG_PATH})",
    )


def add_aws_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--region", metavar="REGION", help="AWS region (default: config, then your AWS setup)")
    parser.add_argument(
        "--domain-id",
        metavar="ID",
        help="SageMaker domain id (default: from the config, or the deployed TensorBoard stack's output)",
    )


def load(args: argparse.Namespace) -> ProfStackConfig:
    try:
        return load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def config_user(config: ProfStackConfig, name: str) -> User:
    for user in config.users:
        if user.name == name:
            return user
    known = ", ".join(u.name for u in config.users) or "none"
    raise CliError(f"unknown user '{name}' (users in the config: {known})")


def resolve_region(region: str | None) -> str | None:
    """The region to use: the one given (--region or the config), else ``AWS_REGION``, else None, which
    leaves botocore's own chain (``AWS_DEFAULT_REGION``, then ``region`` in the AWS config profile).

    botocore itself reads only ``AWS_DEFAULT_REGION``; Lambda, CloudShell and most other AWS SDKs set or
    read ``AWS_REGION``, so the CLI honours both.
    """
    return region or os.environ.get("AWS_REGION") or None


def make_client(service: str, region: str | None) -> Any:
    """A boto3 client; tests replace this function to inject stubbed clients."""
    try:
        import boto3
    except ModuleNotFoundError:
        raise CliError(MISSING_AWS_EXTRA) from None

    # A fresh session per client: credentials are resolved now, not cached from an earlier call.
    # NoRegionError surfaces at creation, so creation sits inside aws_errors too.
    with aws_errors(f"{service} client"):
        return boto3.session.Session(region_name=resolve_region(region)).client(service)  # type: ignore[call-overload]


def region_of(args: argparse.Namespace, config: ProfStackConfig) -> str | None:
    return getattr(args, "region", None) or config.environment.region


@contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Turn botocore failures into one-line CliErrors."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError
    except ModuleNotFoundError:
        raise CliError(MISSING_AWS_EXTRA) from None

    try:
        yield
    except NoCredentialsError:
        raise CliError(
            f"{what}: no AWS credentials found (set AWS_PROFILE, run `aws sso login`, or export keys)"
        ) from None
    except NoRegionError:
        raise CliError(f"{what}: {NO_REGION}") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CliError(f"{what}: {error.get('Code', 'error')}: {error.get('Message', exc)}") from None
    except BotoCoreError as exc:
        raise CliError(f"{what}: {exc}") from None


def call(what: str, fn: Callable[..., T], **kwargs: Any) -> T:
    with aws_errors(what):
        return fn(**kwargs)


def domain_id(args: argparse.Namespace, config: ProfStackConfig, region: str | None) -> str:
    """--domain-id, else the imported domain's id, else the deployed TensorBoard stack's output."""
    if getattr(args, "domain_id", None):
        return str(args.domain_id)
    if config.domain.mode == "import":
        return config.domain.domain_id
    from botocore.exceptions import ClientError

    stack = tensorboard_stack_name(config.prefix)
    cloudformation = make_client("cloudformation", region)
    with aws_errors(f"looking up the SageMaker domain in stack {stack}"):
        try:
            stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as exc:
            if "does not exist" not in str(exc.response.get("Error", {}).get("Message", "")):
                raise
            stacks = []  # not deployed (yet)
    for output in stacks[0].get("Outputs", []) if stacks else []:
        if output.get("OutputKey") == DOMAIN_ID_OUTPUT:
            return str(output["OutputValue"])
    raise CliError(
        f"no SageMaker domain found: stack {stack} is not deployed (or has no {DOMAIN_ID_OUTPUT} output); "
        "run `npx cdk deploy` or pass --domain-id"
    )


def stack_outputs(stack: str, region: str | None, *, hint: str) -> dict[str, str]:
    """The outputs of a deployed stack (DescribeStacks); a stack that is not deployed is a CliError naming it
    and ``hint`` (what to pass instead)."""
    from botocore.exceptions import ClientError

    cloudformation = make_client("cloudformation", region)
    with aws_errors(f"reading the outputs of stack {stack} ({hint})"):
        try:
            stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as exc:
            if "does not exist" not in str(exc.response.get("Error", {}).get("Message", "")):
                raise
            stacks = []
    if not stacks:
        raise CliError(f"stack {stack} is not deployed in {resolve_region(region) or 'your default region'} ({hint})")
    return {str(o["OutputKey"]): str(o["OutputValue"]) for o in stacks[0].get("Outputs", []) if "OutputKey" in o}
