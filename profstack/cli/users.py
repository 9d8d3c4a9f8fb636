"""`profstack users`: list ProfStack users with live status; add or remove them in the config.

    profstack users list [--config PATH] [--domain-id ID] [--region REGION] [--no-status] [--json]
    profstack users add USER --email EMAIL [--instance-type INSTANCE_TYPE] [--config PATH]
    profstack users remove USER [--config PATH]

`add` and `remove` edit the YAML in place, keeping its comments and layout, validate the
result like `cdk synth` does, and only then write it. The change takes effect on the next
`npx cdk deploy --all`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from profstack.cli import CliError, _aws
from profstack.cli._aws import (
    add_aws_arguments,
    add_config_argument,
    aws_errors,
    domain_id,
    load,
    region_of,
)
from profstack.cli._help import EMAIL, INSTANCE_TYPE, USER, command
from profstack.config import ConfigError, ProfStackConfig, parse_config
from profstack.tensorboard.names import APP_NAME, APP_TYPE, user_profile_name

NOT_CREATED = "-"


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "users",
        help="list ProfStack users (with live profile/TensorBoard status), add or remove them",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=("profstack users list", "profstack users add carol --email carol@yourcompany.com"),
    )
    commands = parser.add_subparsers(dest="users_command", metavar="ACTION", required=True)

    listing = command(
        commands,
        "list",
        help="users from the config, with their profile and app status",
        examples=(
            "profstack users list",
            "profstack users list --no-status --json",
            "profstack users list --config my-profstack.yaml --region eu-west-1",
        ),
    )
    add_aws_arguments(listing)
    listing.add_argument("--no-status", action="store_true", help="config only; make no AWS call")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=run_list)

    adding = command(
        commands,
        "add",
        help="add a user to the config (then run `npx cdk deploy --all`)",
        examples=(
            "profstack users add carol --email carol@yourcompany.com",
            "profstack users add dave --email dave@yourcompany.com --instance-type ml.r5.xlarge",
        ),
    )
    adding.add_argument("name", metavar=USER, help="lower-case user name (S3 prefixes, profile name)")
    adding.add_argument("--email", required=True, metavar=EMAIL, help="the user's e-mail address")
    adding.add_argument("--instance-type", metavar=INSTANCE_TYPE, help="TensorBoard instance type (default: config)")
    add_config_argument(adding)
    adding.set_defaults(handler=run_add)

    removing = command(
        commands,
        "remove",
        help="remove a user from the config (then run `npx cdk deploy --all`)",
        examples=("profstack users remove carol", "profstack users remove carol --config my-profstack.yaml"),
    )
    removing.add_argument("name", metavar=USER, help="user name as written in the config")
    add_config_argument(removing)
    removing.set_defaults(handler=run_remove)


# ------------------------------------------------------------------------------------------- list


def live_status(client: Any, domain: str, user: str) -> tuple[str, str]:
    """(profile status, TensorBoard app status) of one user; NOT_CREATED where there is none."""
    profile_name = user_profile_name(user)
    with aws_errors(f"status of user '{user}'"):
        profile = _describe_profile(client, domain=domain, profile_name=profile_name)
        if profile is None:
            return NOT_CREATED, NOT_CREATED
        pages = client.get_paginator("list_apps").paginate(DomainIdEquals=domain, UserProfileNameEquals=profile_name)
        apps = [app for page in pages for app in page.get("Apps", [])]
    app_status = NOT_CREATED
    for app in apps:
        if app.get("AppType") == APP_TYPE and app.get("AppName") == APP_NAME and app.get("Status") != "Deleted":
            app_status = str(app.get("Status"))
    return str(profile.get("Status", "?")), app_status


def _describe_profile(client: Any, *, domain: str, profile_name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        response: dict[str, Any] = client.describe_user_profile(DomainId=domain, UserProfileName=profile_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFound":
            return None
        raise
    return response


def run_list(args: argparse.Namespace) -> int:
    config = load(args)
    rows: list[dict[str, str]] = []
    if not args.no_status and config.users:
        region = region_of(args, config)
        domain = domain_id(args, config, region)
        client = _aws.make_client("sagemaker", region)
    for user in config.users:
        row = {
            "user": user.name,
            "email": user.email,
            "instance_type": user.tensorboard_instance_type or config.tensorboard.default_instance_type,
        }
        if not args.no_status:
            row["profile"], row["tensorboard"] = live_status(client, domain, user.name)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no users in {args.config}; add one with `profstack users add USER --email EMAIL`")
    else:
        _print_table(rows)
    return 0


def _print_table(rows: list[dict[str, str]]) -> None:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip())
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())


# ----------------------------------------------------------------------------------- add / remove


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip: keeps comments, order and quoting
    yaml.indent(mapping=2, sequence=4, offset=2)  # the layout of config/profstack.yaml
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        return _yaml().load(text)
    except Exception as exc:  # ruamel raises several unrelated types for bad YAML
        raise CliError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None


def _validated(path: Path, document: Any) -> ProfStackConfig:
    try:
        return parse_config(document, source=str(path))
    except ConfigError as exc:
        raise CliError(f"the edited config would be invalid: {exc}") from None


def _write(path: Path, document: Any) -> None:
    """Atomically replace the file, so an interrupted write never leaves half a config."""
    buffer = io.StringIO()
    _yaml().dump(document, buffer)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(buffer.getvalue())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _move_trailing_comment(source: Any, target: Any) -> None:
    """ruamel keeps what follows a list (blank lines, comments) on its last entry's last key."""
    from ruamel.yaml.comments import CommentedMap

    if not (isinstance(source, CommentedMap) and isinstance(target, CommentedMap) and source and target):
        return
    source_key, target_key = list(source)[-1], list(target)[-1]
    slot = source.ca.items.get(source_key)
    if not slot or len(slot) < 3 or slot[2] is None:
        return
    target.ca.items.setdefault(target_key, [None, None, None, None])[2] = slot[2]
    slot[2] = None


def run_add(args: argparse.Namespace) -> int:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    path: Path = args.config
    document = _read(path)
    if not isinstance(document, dict):
        raise CliError(f"{path}: the file must hold a YAML mapping at the top level")
    users = document.get("users")
    if users is None:
        users = CommentedSeq()
        document["users"] = users
    if not isinstance(users, list):
        raise CliError(f"{path}: users: must be a list")
    if any(isinstance(u, dict) and u.get("name") == args.name for u in users):
        raise CliError(f"user '{args.name}' already exists in {path}")
    if isinstance(users, CommentedSeq) and not users:
        users.fa.set_block_style()  # `users: []` becomes a block list, like the example config
    entry = CommentedMap([("name", args.name), ("email", args.email)])
    if args.instance_type:
        entry["tensorboard_instance_type"] = args.instance_type
    if users:
        _move_trailing_comment(users[-1], entry)  # the blank line/comment after the list stays after it
    users.append(entry)
    _validated(path, document)
    _write(path, document)
    print(
        f"added user '{args.name}' to {path}. Run `npx cdk deploy --all` to create their SageMaker profile, "
        "execution role and TensorBoard app."
    )
    return 0


def run_remove(args: argparse.Namespace) -> int:
    path: Path = args.config
    document = _read(path)
    users = document.get("users") if isinstance(document, dict) else None
    index = next((i for i, u in enumerate(users or []) if isinstance(u, dict) and u.get("name") == args.name), None)
    if users is None or index is None:
        known = ", ".join(str(u.get("name")) for u in users or [] if isinstance(u, dict)) or "none"
        raise CliError(f"unknown user '{args.name}' (users in {path}: {known})")
    if index == len(users) - 1 and index > 0:
        _move_trailing_comment(users[index], users[index - 1])
    del users[index]
    _validated(path, document)
    _write(path, document)
    print(
        f"removed user '{args.name}' from {path}. Run `npx cdk deploy --all` to delete their TensorBoard app "
        "and SageMaker profile (their S3 data is kept)."
    )
    return 0
