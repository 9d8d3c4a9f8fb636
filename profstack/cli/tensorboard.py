"""`profstack tensorboard`: open, start and stop a user's managed TensorBoard.

    profstack tensorboard url --user USER [--job JOB] [--expires SECONDS] [--json]
    profstack tensorboard start --user USER [--wait] [--apply]
    profstack tensorboard stop --user USER [--apply]

`url` prints a presigned Studio URL that lands in the user's TensorBoard app, optionally
on a training job (docs/platform-facts.md A3). Common options: --config PATH, --domain-id ID,
--region REGION. The caller needs the user's access policy (the TensorBoard stack's output
`User<user>AccessPolicyArn...`, described "Attach to <user>'s IAM identity") or admin rights.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from profstack.cli import CliError, _aws
from profstack.cli._aws import add_aws_arguments, aws_errors, config_user, domain_id, load, region_of
from profstack.cli._help import JOB, SECONDS, USER, command
from profstack.tensorboard.apps import (
    DELETED,
    DELETING,
    FAILED,
    IN_SERVICE,
    PENDING,
    create_app,
    delete_app,
    describe_app,
)
from profstack.tensorboard.names import (
    APP_NAME,
    SESSION_SECONDS,
    URL_EXPIRES_SECONDS,
    StudioNameError,
    job_state,
    tensorboard_url,
    user_profile_name,
)

# `start --wait`: poll DescribeApp this often, up to this long (an app takes a few minutes).
POLL_SECONDS = 10.0
WAIT_SECONDS = 15 * 60.0


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "tensorboard",
        help="open (presigned URL), start or stop a user's managed TensorBoard",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=("profstack tensorboard url --user alice", "profstack tensorboard start --user alice --apply"),
    )
    commands = parser.add_subparsers(dest="tensorboard_command", metavar="ACTION", required=True)

    url = command(
        commands,
        "url",
        help="print a presigned URL that opens the user's TensorBoard",
        examples=(
            "profstack tensorboard url --user alice",
            "profstack tensorboard url --user alice --job my-training-job --expires 60",
            "profstack tensorboard url --user alice --json",
        ),
    )
    _user_argument(url)
    url.add_argument("--job", metavar=JOB, help="open this training job in TensorBoard")
    url.add_argument(
        "--expires",
        type=int,
        default=URL_EXPIRES_SECONDS,
        metavar=SECONDS,
        help=f"seconds the URL stays valid, 5-300 (default {URL_EXPIRES_SECONDS})",
    )
    url.add_argument("--json", action="store_true", help="print {user, job, url} as JSON")
    add_aws_arguments(url)
    url.set_defaults(handler=run_url)

    start = command(
        commands,
        "start",
        help="start the user's TensorBoard app (a billed instance; a dry run unless --apply)",
        examples=(
            "profstack tensorboard start --user alice",
            "profstack tensorboard start --user alice --apply --wait",
        ),
    )
    _user_argument(start)
    start.add_argument("--wait", action="store_true", help="wait until it is InService")
    start.add_argument("--apply", action="store_true", help="really start it (default: say what would happen)")
    add_aws_arguments(start)
    start.set_defaults(handler=run_start)

    stop = command(
        commands,
        "stop",
        help="stop (delete) the user's TensorBoard app; its data stays in S3 (a dry run unless --apply)",
        examples=("profstack tensorboard stop --user alice", "profstack tensorboard stop --user alice --apply"),
    )
    _user_argument(stop)
    stop.add_argument("--apply", action="store_true", help="really stop it (default: say what would happen)")
    add_aws_arguments(stop)
    stop.set_defaults(handler=run_stop)


def _user_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar=USER, help="user name from the config (default $PROFSTACK_USER)")


def _user(args: argparse.Namespace) -> str:
    user = args.user or os.environ.get("PROFSTACK_USER")
    if not user:
        raise CliError("which user? pass --user USER or set PROFSTACK_USER (a user name from the config)")
    args.user = user
    return str(user)


def _target(args: argparse.Namespace) -> tuple[Any, str, str, str]:
    """(SageMaker client, domain id, profile name, instance type) for --user, or a CliError."""
    name = _user(args)
    config = load(args)
    user = config_user(config, name)
    region = region_of(args, config)
    domain = domain_id(args, config, region)
    instance_type = user.tensorboard_instance_type or config.tensorboard.default_instance_type
    return _aws.make_client("sagemaker", region), domain, user_profile_name(user.name), instance_type


def run_url(args: argparse.Namespace) -> int:
    if not 5 <= args.expires <= 300:
        raise CliError("--expires must be between 5 and 300 seconds")
    if args.job is not None:
        try:
            job_state(args.job)  # reject a bad job name before any AWS call
        except StudioNameError as exc:
            raise CliError(str(exc)) from None
    client, domain, profile, _ = _target(args)
    with aws_errors(f"CreatePresignedDomainUrl for '{profile}'"):
        response = client.create_presigned_domain_url(
            DomainId=domain,
            UserProfileName=profile,
            ExpiresInSeconds=args.expires,
            SessionExpirationDurationInSeconds=SESSION_SECONDS,
        )
    link = tensorboard_url(response["AuthorizedUrl"], args.job)
    if args.json:
        print(json.dumps({"user": args.user, "job": args.job, "url": link, "expires_in": args.expires}, indent=2))
    else:
        print(link)
    return 0


def run_start(args: argparse.Namespace) -> int:
    client, domain, profile, instance_type = _target(args)
    with aws_errors(f"starting TensorBoard of '{profile}'"):
        app = describe_app(client, domain_id=domain, user_profile_name=profile)
        if app is not None and app.status in {IN_SERVICE, PENDING}:
            print(f"TensorBoard of '{profile}' is already {app.status} ({app.instance_type})")
        elif not args.apply:
            was = f" (now {app.status}; it would be replaced)" if app is not None else ""
            print(f"dry run: would start TensorBoard of '{profile}' on {instance_type}{was}; rerun with --apply")
            return 0
        else:
            if app is not None and app.status == FAILED:
                # A Failed app keeps its name; delete it so that CreateApp can reuse "default".
                delete_app(client, domain_id=domain, user_profile_name=profile)
            if app is not None and app.status in {FAILED, DELETING}:
                _wait(client, domain, profile, until={DELETED}, seconds=WAIT_SECONDS)
            if create_app(client, domain_id=domain, user_profile_name=profile, instance_type=instance_type):
                print(f"starting TensorBoard of '{profile}' on {instance_type} (a few minutes)")
            else:
                print(f"TensorBoard of '{profile}' is already being started")
        if args.wait:
            state = _wait(client, domain, profile, until={IN_SERVICE, FAILED}, seconds=WAIT_SECONDS)
            if state == FAILED:
                reason = describe_app(client, domain_id=domain, user_profile_name=profile)
                raise CliError(
                    f"TensorBoard of '{profile}' failed: {reason.failure_reason if reason else 'unknown reason'}"
                )
            print(
                f"TensorBoard of '{profile}' is InService; open it with `profstack tensorboard url --user {args.user}`"
            )
    return 0


def _wait(client: Any, domain: str, profile: str, *, until: set[str], seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while True:
        app = describe_app(client, domain_id=domain, user_profile_name=profile)
        status = DELETED if app is None else app.status
        if status in until:
            return status
        if time.monotonic() >= deadline:
            raise CliError(f"TensorBoard of '{profile}' is still {status} after {int(seconds)} s")
        time.sleep(POLL_SECONDS)


def run_stop(args: argparse.Namespace) -> int:
    client, domain, profile, _ = _target(args)
    with aws_errors(f"stopping TensorBoard of '{profile}'"):
        app = describe_app(client, domain_id=domain, user_profile_name=profile, app_name=APP_NAME)
        if app is None or app.status == DELETED:
            print(f"TensorBoard of '{profile}' is not running")
            return 0
        if app.status == DELETING:
            print(f"TensorBoard of '{profile}' is already stopping")
            return 0
        if not args.apply:
            print(f"dry run: would stop TensorBoard of '{profile}' (now {app.status}); rerun with --apply")
            return 0
        delete_app(client, domain_id=domain, user_profile_name=profile)
    print(f"stopping TensorBoard of '{profile}'; its logs and reports stay in S3")
    return 0
