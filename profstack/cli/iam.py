"""`profstack iam`: the guardrails an administrator installs where ProfStack cannot write (docs/security.md,
"What an administrator must not grant").

    profstack iam boundary --user USER [--account ID] [--partition P] [--domain-id ID]
    profstack iam scp [--exempt ARN ...] [--bucket NAME] [--domain-id ID] [--out-dir DIR]

`boundary` prints user USER's permissions boundary (install it as the customer-managed policy
`<prefix>-boundary-<USER>` and set it as the boundary of USER's own IAM identities). `scp` prints the service control
policies (JSON list; with --out-dir one file each) to attach, next to FullAWSAccess, to the account's OU. Both
are computed from the config alone: no AWS call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from profstack.cli import CliError
from profstack.cli._aws import add_config_argument
from profstack.cli._help import BUCKET, DIR, USER, command
from profstack.config import ConfigError, ProfStackConfig, load_config
from profstack.guardrails import (
    MANAGED_POLICY_MAX_CHARS,
    Scope,
    behaviour_tag_keys,
    boundary_document,
    boundary_policy_name,
    document_chars,
    scp_documents,
)
from profstack.tensorboard.names import DOMAIN_ID_PATTERN

#: service control policies one target may have besides FullAWSAccess (AWS Organizations quota, default 5)
SCPS_PER_TARGET = 4
#: the CloudFormation execution role `cdk bootstrap` creates (any qualifier): it deploys ProfStack's identities
CDK_DEPLOY_ROLE = "arn:{partition}:iam::{account}:role/cdk-*-cfn-exec-role-*"


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "iam",
        help="print the permissions boundary and service control policies that keep users apart",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=("profstack iam boundary --user alice", "profstack iam scp --out-dir scps/"),
    )
    commands = parser.add_subparsers(dest="iam_command", metavar="ACTION", required=True)
    boundary = command(
        commands,
        "boundary",
        help="one user's permissions boundary (JSON)",
        examples=(
            "profstack iam boundary --user alice",
            "profstack iam boundary --user alice --account 403921877410 --domain-id d-1a2b3c4d5e6f",
        ),
    )
    boundary.add_argument("--user", required=True, metavar=USER, help="the config user the boundary is for")
    scp = command(
        commands,
        "scp",
        help="the service control policies for the account (JSON)",
        examples=(
            "profstack iam scp",
            "profstack iam scp --exempt arn:aws:iam::403921877410:role/Admin --bucket my-trace-bucket --out-dir scps/",
        ),
    )
    scp.add_argument(
        "--exempt",
        action="append",
        default=[],
        metavar="ARN",
        help="a principal (ARN pattern) that administers identities or deploys ProfStack; repeat for more "
        "(always exempt: CDK's CloudFormation execution role, ProfStack's processing and platform roles, "
        "storage.break_glass_principal_arns)",
    )
    scp.add_argument("--bucket", metavar=BUCKET, help="the trace bucket (stack output TraceBucketName): its "
                     "policy, replication, inventory, notifications and lifecycle change only by deploy")  # fmt: skip
    scp.add_argument("--out-dir", type=Path, metavar=DIR, help="write scp-1.json, scp-2.json, ... here")
    for sub in (boundary, scp):
        add_config_argument(sub)
        sub.add_argument("--account", metavar="ID", help="AWS account id (default: environment.account, else *)")
        sub.add_argument("--partition", default="aws", metavar="P", help="aws, aws-cn or aws-us-gov (default aws)")
        sub.add_argument(
            "--domain-id", metavar="ID", help="the SageMaker domain (default: the imported one, else every domain)"
        )
    boundary.set_defaults(handler=run_boundary)
    scp.set_defaults(handler=run_scp)


def _scope(args: argparse.Namespace) -> tuple[ProfStackConfig, Scope]:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    account = args.account or config.environment.account or "*"
    if account != "*" and not (account.isdigit() and len(account) == 12):
        raise CliError(f"--account {account[:40]!r} is not a 12-digit account id")
    if args.partition not in {"aws", "aws-cn", "aws-us-gov"}:
        raise CliError(f"--partition {args.partition[:40]!r} is not aws, aws-cn or aws-us-gov")
    domain_id = args.domain_id or getattr(config.domain, "domain_id", None) or "*"
    import re

    if domain_id != "*" and not re.fullmatch(DOMAIN_ID_PATTERN.strip("^$"), domain_id):
        raise CliError(f"--domain-id {domain_id[:40]!r} is not a SageMaker domain id (d-xxxxxxxxxxxx)")
    scope = Scope(
        prefix=config.prefix,
        users=tuple(u.name for u in config.users),
        user_tag_key=config.tensorboard.user_tag_key,
        behaviour_tags=behaviour_tag_keys(config),
        partition=args.partition,
        account=account,
        domain_id=domain_id,
        principals={u.name: tuple(u.principals) for u in config.users if u.principals},
    )
    return config, scope


def run_boundary(args: argparse.Namespace) -> int:
    config, scope = _scope(args)
    if args.user not in scope.users:
        known = ", ".join(scope.users) or "none"
        raise CliError(f"unknown user '{args.user}' (users in the config: {known})")
    if scope.account == "*":
        raise CliError("a boundary names its own policy ARN: pass --account (or set environment.account)")
    document = boundary_document(scope, args.user)
    size = document_chars(document)
    if size > MANAGED_POLICY_MAX_CHARS:
        raise CliError(
            f"the boundary is {size} characters, over IAM's {MANAGED_POLICY_MAX_CHARS} for a managed policy: "
            f"{len(scope.users)} users are too many for one boundary"
        )
    print(json.dumps(document, indent=2))
    print(f"install as the policy {boundary_policy_name(config.prefix, args.user)}", file=sys.stderr)
    return 0


def default_exempt(config: ProfStackConfig, partition: str, account: str) -> list[str]:
    """Principals the SCP always spares: CDK's CloudFormation execution role (it deploys ProfStack's identities),
    ProfStack's processing roles (the actions role stops jobs) and platform roles (they start and stop every
    user's TensorBoard), and break-glass."""
    return [
        CDK_DEPLOY_ROLE.format(partition=partition, account=account),
        f"arn:{partition}:iam::{account}:role/{config.prefix}/processing/*",
        f"arn:{partition}:iam::{account}:role/{config.prefix}/platform/*",
        *config.storage.break_glass_principal_arns,
    ]


def app_managers(config: ProfStackConfig, partition: str, account: str) -> list[str]:
    """Who starts and stops every user's Studio apps: ProfStack's platform roles and break-glass."""
    return [
        f"arn:{partition}:iam::{account}:role/{config.prefix}/platform/*",
        *config.storage.break_glass_principal_arns,
    ]


def run_scp(args: argparse.Namespace) -> int:
    config, scope = _scope(args)
    exempt = [*default_exempt(config, args.partition, scope.account), *args.exempt]
    bucket = f"arn:{args.partition}:s3:::{args.bucket}" if args.bucket else None
    managers = app_managers(config, args.partition, scope.account)
    documents = scp_documents(scope, exempt=exempt, bucket_arn=bucket, app_managers=managers)
    if len(documents) > SCPS_PER_TARGET:
        print(
            f"profstack: warning: {len(documents)} policies; AWS attaches at most 5 SCPs to an account or OU (one "
            "is FullAWSAccess): attach the rest to a parent OU, or ask for a higher quota",
            file=sys.stderr,
        )
    if args.out_dir is None:
        print(json.dumps(documents, indent=2))
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for index, document in enumerate(documents, start=1):
        path = args.out_dir / f"scp-{index}.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {path}")
    return 0
