"""`profstack init`: write a ProfStack config from the account you are signed in to.

    profstack init [--output FILE] [--force] [--print] [--region REGION] [--prefix PREFIX]
                   [--domain-id ID | --vpc-id VPC [--subnet-ids SUBNET,...]] [--network-access MODE]
                   [--user NAME=EMAIL ...] [--identity-center-group GROUP [--identity-store-id ID]
                   [--identity-center-region REGION]]
                   [--notify EMAIL ...]

What it reads (read-only calls; nothing in the account changes):

* the account and region: STS GetCallerIdentity, and --region or your AWS setup;
* the SageMaker domain: --domain-id imports that domain (DescribeDomain: it must use IAM authentication, which
  presigned TensorBoard URLs need); else --vpc-id creates one in that VPC; else, when the region has exactly one
  domain with IAM authentication (ListDomains), it is imported; else the default VPC (DescribeVpcs) gets a new
  domain. Subnets: --subnet-ids, else one per Availability Zone of the VPC (at most three, private ones first:
  DescribeSubnets);
* users: --user NAME=EMAIL (repeatable), and/or the members of an IAM Identity Center group (identitystore
  GetGroupId, ListGroupMemberships, DescribeUser: user name and primary e-mail). IAM users are not read: IAM
  holds no e-mail address, which ProfStack needs for each user. Names are made ProfStack user names (lower-case
  letters, digits and dashes; the part before an `@`), and each mapping is printed.

The file holds only what differs between accounts; every other key takes its default (config/profstack.yaml
in the repository shows and explains them all). It is validated like `profstack config check` before it is
written: example values (example.com e-mails, documentation account ids) are refused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from profstack.cli import CliError, _aws
from profstack.cli._aws import aws_errors
from profstack.cli._help import EMAIL, FILE, PREFIX, REGION, command
from profstack.config import (
    ConfigError,
    ProfStackConfig,
    default_config_path,
    example_value_problems,
    parse_config,
)
from profstack.escape import one_line

#: at most this many subnets are picked when none are given (one per Availability Zone)
AUTO_SUBNETS = 3
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "init",
        help="write a ProfStack config from your AWS account: VPC and subnets, SageMaker domain, users, region",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=(
            "profstack init --region eu-west-1 --user alice=alice@yourcompany.com --notify ml-oncall@yourcompany.com",
            "profstack init --output config/deploy.yaml --vpc-id vpc-0123abcd --subnet-ids subnet-0aa11,subnet-0bb22",
            "profstack init --domain-id d-1a2b3c4d5e6f --identity-center-group ml-engineers --print",
        ),
        note="Read-only: nothing in the account changes. Then: profstack config check FILE, and "
        "docs/operate.md, Deploy.",
    )
    parser.add_argument(
        "--output",
        type=Path,
        metavar=FILE,
        help="where to write it (default $PROFSTACK_CONFIG, else config/profstack.yaml); never overwritten "
        "without --force",
    )
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    parser.add_argument("--print", action="store_true", help="print the config instead of writing it")
    parser.add_argument("--region", metavar=REGION, help="AWS region to deploy to (default: your AWS setup)")
    parser.add_argument(
        "--prefix", default="profstack", metavar=PREFIX, help="name prefix of stacks and resources (default profstack)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--domain-id", metavar="ID", help="import this existing SageMaker domain (IAM authentication)")
    where.add_argument("--vpc-id", metavar="VPC", help="create a SageMaker domain in this VPC")
    parser.add_argument(
        "--subnet-ids", metavar="SUBNET,...", help="subnets of --vpc-id (default: one per Availability Zone, up to 3)"
    )
    parser.add_argument(
        "--network-access",
        choices=("PublicInternetOnly", "VpcOnly"),
        default="PublicInternetOnly",
        help="the created domain's network access (default PublicInternetOnly)",
    )
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME=EMAIL",
        help="a ProfStack user (repeatable)",
    )
    parser.add_argument(
        "--identity-center-group",
        metavar="GROUP",
        help="add the members of this IAM Identity Center group as users (their primary e-mail)",
    )
    parser.add_argument(
        "--identity-store-id",
        metavar="ID",
        help="the Identity Center identity store (default: the account's instance, from sso-admin ListInstances)",
    )
    parser.add_argument(
        "--identity-center-region",
        metavar=REGION,
        help="IAM Identity Center's home region, when it is not --region",
    )
    parser.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar=EMAIL,
        help="who gets findings and alarms by e-mail (repeatable; default: nobody, with a warning)",
    )
    parser.set_defaults(handler=run)


# ------------------------------------------------------------------------------------------ the plan


@dataclass
class Plan:
    """What the config will say, and where each value came from (printed as comments)."""

    prefix: str
    account: str
    region: str
    domain: dict[str, Any]
    domain_note: str
    users: list[tuple[str, str]] = field(default_factory=list)
    user_notes: list[str] = field(default_factory=list)
    emails: list[str] = field(default_factory=list)

    def to_yaml(self, now: datetime) -> str:
        q = json.dumps  # JSON strings are YAML strings: quoted, escaped, never read as numbers
        lines = [
            f"# ProfStack configuration, written by `profstack init` on {now:%Y-%m-%d} from account {self.account}",
            f"# ({self.region}). Keys not set here take their defaults: config/profstack.yaml in the repository shows",
            "# and explains every key (retention, processing, alarms, history). Check it with",
            "# `profstack config check FILE`; deploy it as docs/operate.md says.",
            f"prefix: {q(self.prefix)}",
            "",
            "environment:",
            f"  account: {q(self.account)}",
            f"  region: {q(self.region)}",
            "",
            f"# {self.domain_note}",
            "domain:",
        ]
        for key, value in self.domain.items():
            shown = "[" + ", ".join(q(v) for v in value) + "]" if isinstance(value, list) else q(value)
            lines.append(f"  {key}: {shown}")
        lines += ["", *(f"# {note}" for note in self.user_notes), "users:" if self.users else "users: []"]
        for name, email in self.users:
            lines += [f"  - name: {q(name)}", f"    email: {q(email)}"]
        lines += ["", "notifications:", "  emails:" if self.emails else "  emails: []"]
        lines += [f"    - {q(e)}" for e in self.emails]
        return "\n".join(lines) + "\n"


def _pairs(items: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        name, sep, email = item.partition("=")
        if not sep or not name.strip() or not email.strip():
            raise CliError(f"--user {item!r}: expected NAME=EMAIL, e.g. alice=alice@yourcompany.com")
        pairs.append((name.strip(), email.strip()))
    return pairs


def profstack_name(raw: str) -> str:
    """A ProfStack user name from an identity's user name: the part before `@`, lower-case, other characters
    as dashes, starting with a letter, at most 63 characters (config.User's pattern)."""
    name = _NAME_CHARS.sub("-", raw.split("@", 1)[0].lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name).lstrip("0123456789-")
    return name[:63].rstrip("-")


# ------------------------------------------------------------------------------------------ the account


def _region(given: str | None) -> str:
    """--region, else AWS_REGION, else what boto3 finds (AWS_DEFAULT_REGION, the profile's region)."""
    import boto3

    region = given or _aws.resolve_region(None) or boto3.session.Session().region_name
    if not region:
        raise CliError(_aws.NO_REGION)
    return str(region)


def _account(region: str) -> str:
    sts = _aws.make_client("sts", region)
    with aws_errors("sts GetCallerIdentity"):
        return str(sts.get_caller_identity()["Account"])


def _domain_by_id(sagemaker: Any, domain_id: str) -> tuple[dict[str, Any], str]:
    with aws_errors(f"DescribeDomain {domain_id}"):
        found = sagemaker.describe_domain(DomainId=domain_id)
    mode = found.get("AuthMode")
    if mode and mode != "IAM":
        raise CliError(
            f"domain {domain_id} uses {mode} authentication; ProfStack opens TensorBoard with presigned URLs, which "
            "need IAM authentication: import another domain (--domain-id) or create one (--vpc-id)"
        )
    return {"mode": "import", "domain_id": domain_id}, f"imported: {found.get('DomainName', domain_id)} ({domain_id})"


def _only_iam_domain(sagemaker: Any) -> tuple[dict[str, Any], str] | None:
    """The region's one InService domain with IAM authentication, if there is exactly one."""
    with aws_errors("ListDomains"):
        domains = [d for page in sagemaker.get_paginator("list_domains").paginate() for d in page.get("Domains", [])]
    usable = []
    for summary in domains:
        if summary.get("Status") not in {None, "InService"}:
            continue
        with aws_errors(f"DescribeDomain {summary['DomainId']}"):
            if sagemaker.describe_domain(DomainId=summary["DomainId"]).get("AuthMode", "IAM") == "IAM":
                usable.append(summary)
    if len(usable) > 1:
        listed = ", ".join(f"{d['DomainId']} ({d.get('DomainName', '?')})" for d in usable)
        raise CliError(
            f"this region has {len(usable)} SageMaker domains ({listed}): pass --domain-id ID or --vpc-id VPC"
        )
    if not usable:
        return None
    only = usable[0]
    return (
        {"mode": "import", "domain_id": str(only["DomainId"])},
        f"imported: the region's one SageMaker domain with IAM authentication, {only.get('DomainName', '?')} "
        "(to create a new one instead: profstack init --vpc-id VPC)",
    )


def _default_vpc(ec2: Any) -> str:
    with aws_errors("DescribeVpcs"):
        vpcs = ec2.describe_vpcs().get("Vpcs", [])
    default = [v for v in vpcs if v.get("IsDefault")]
    if default:
        return str(default[0]["VpcId"])
    if len(vpcs) == 1:
        return str(vpcs[0]["VpcId"])
    listed = ", ".join(str(v["VpcId"]) for v in vpcs[:10]) or "none"
    raise CliError(f"no default VPC in this region (VPCs: {listed}): pass --vpc-id VPC, or --domain-id ID")


def _subnets(ec2: Any, vpc: str) -> list[str]:
    """One subnet per Availability Zone (private, i.e. not mapping public IPs, first), at most AUTO_SUBNETS."""
    with aws_errors(f"DescribeSubnets of {vpc}"):
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}]).get("Subnets", [])
    if not subnets:
        raise CliError(f"VPC {vpc} has no subnets: create some, or pass another --vpc-id")
    ranked = sorted(subnets, key=lambda s: (bool(s.get("MapPublicIpOnLaunch")), str(s.get("SubnetId"))))
    chosen: dict[str, str] = {}
    for subnet in ranked:
        chosen.setdefault(str(subnet.get("AvailabilityZone")), str(subnet["SubnetId"]))
    return [chosen[zone] for zone in sorted(chosen)][:AUTO_SUBNETS]


def _created_domain(args: argparse.Namespace, region: str, vpc: str, how: str) -> tuple[dict[str, Any], str]:
    ec2 = _aws.make_client("ec2", region)
    if args.subnet_ids:
        subnets = [s.strip() for s in args.subnet_ids.split(",") if s.strip()]
        note = f"created in {vpc} ({how}), subnets as given"
    else:
        subnets = _subnets(ec2, vpc)
        note = f"created in {vpc} ({how}); subnets: one per Availability Zone, private ones first"
    return {"mode": "create", "vpc_id": vpc, "subnet_ids": subnets, "network_access": args.network_access}, note


def domain_plan(args: argparse.Namespace, region: str) -> tuple[dict[str, Any], str]:
    if args.subnet_ids and not args.vpc_id:
        raise CliError("--subnet-ids needs --vpc-id (the VPC they belong to)")
    sagemaker = _aws.make_client("sagemaker", region)
    if args.domain_id:
        return _domain_by_id(sagemaker, args.domain_id)
    if args.vpc_id:
        return _created_domain(args, region, args.vpc_id, "--vpc-id")
    existing = _only_iam_domain(sagemaker)
    if existing is not None:
        return existing
    return _created_domain(args, region, _default_vpc(_aws.make_client("ec2", region)), "the default VPC")


def _identity_store(args: argparse.Namespace, region: str) -> str:
    region = args.identity_center_region or region
    if args.identity_store_id:
        return str(args.identity_store_id)
    admin = _aws.make_client("sso-admin", region)
    with aws_errors("sso-admin ListInstances (or pass --identity-store-id)"):
        instances = admin.list_instances().get("Instances", [])
    if len(instances) != 1:
        raise CliError(
            f"found {len(instances)} IAM Identity Center instances in {region}: pass --identity-center-region with "
            "Identity Center's home region, or --identity-store-id ID"
        )
    return str(instances[0]["IdentityStoreId"])


def group_members(args: argparse.Namespace, region: str) -> list[tuple[str, str]]:
    """(user name, primary e-mail) of each member of --identity-center-group."""
    store = _identity_store(args, region)
    ids = _aws.make_client("identitystore", args.identity_center_region or region)
    group = args.identity_center_group
    with aws_errors(f"Identity Center group {group!r}"):
        group_id = ids.get_group_id(
            IdentityStoreId=store,
            AlternateIdentifier={"UniqueAttribute": {"AttributePath": "displayName", "AttributeValue": group}},
        )["GroupId"]
        members = [
            m["MemberId"]["UserId"]
            for page in ids.get_paginator("list_group_memberships").paginate(IdentityStoreId=store, GroupId=group_id)
            for m in page.get("GroupMemberships", [])
            if "UserId" in m.get("MemberId", {})
        ]
        people = [ids.describe_user(IdentityStoreId=store, UserId=member) for member in members]
    found = []
    for person in people:
        emails = person.get("Emails") or []
        primary = next((e for e in emails if e.get("Primary")), emails[0] if emails else None)
        if primary and primary.get("Value"):
            found.append((str(person.get("UserName", "")), str(primary["Value"])))
        else:
            print(
                f"profstack: warning: {one_line(person.get('UserName'))}: no e-mail in Identity Center; left out",
                file=sys.stderr,
            )
    return found


def user_plan(args: argparse.Namespace, region: str) -> tuple[list[tuple[str, str]], list[str]]:
    given = _pairs(args.user)
    notes = []
    users: dict[str, str] = {}
    for name, email in given:
        if name in users:
            raise CliError(f"--user {name}: given twice")
        users[name] = email
    if args.identity_center_group:
        members = group_members(args, region)
        notes.append(f"users: the members of IAM Identity Center group {args.identity_center_group!r}")
        for raw, email in members:
            name = profstack_name(raw)
            if not name:
                print(
                    f"profstack: warning: {one_line(repr(raw))}: no ProfStack user name can be made of it; left out",
                    file=sys.stderr,
                )
                continue
            base, n = name, 2
            while name in users and users[name] != email:
                name, n = f"{base[:60]}-{n}", n + 1
            users.setdefault(name, email)
            if name != raw:
                notes.append(f"  {raw} -> {name}")
    if not users:
        notes.append("no users yet: add them with `profstack users add USER --email EMAIL`")
    return sorted(users.items()), notes


# ------------------------------------------------------------------------------------------ run


def _validated(text: str, where: str) -> ProfStackConfig:
    import yaml

    try:
        config = parse_config(yaml.safe_load(text), source=where)
    except ConfigError as exc:
        raise CliError(f"the config would be invalid: {'; '.join(exc.problems)}") from None
    problems = example_value_problems(config)
    if problems:
        raise CliError(f"the config would hold example values: {'; '.join(problems)}")
    return config


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    output: Path = args.output or default_config_path()
    if not args.print and output.exists() and not args.force:
        raise CliError(
            f"{output} exists (in a checkout: the example config the tests read); write yours elsewhere with "
            "--output config/deploy.yaml and `export PROFSTACK_CONFIG=config/deploy.yaml`, or replace it with --force"
        )
    region = _region(args.region)
    account = _account(region)
    domain, domain_note = domain_plan(args, region)
    users, user_notes = user_plan(args, region)
    plan = Plan(args.prefix, account, region, domain, domain_note, users, user_notes, list(dict.fromkeys(args.notify)))
    text = plan.to_yaml(datetime.now(UTC))
    config = _validated(text, str(output))
    if args.print:
        print(text, end="")
        return 0
    _write(output, text)
    print(
        f"wrote {output}: account {account}, {region}, domain {domain['mode']} "
        f"({domain.get('domain_id') or domain.get('vpc_id')}), {len(config.users)} user(s), "
        f"{len(config.notifications.emails)} notification address(es)"
    )
    for warning in config.warnings():
        print(f"profstack: warning: {warning}", file=sys.stderr)
    flag = "" if output == default_config_path() else f" {output}"
    print(f"next: profstack config check{flag}; then docs/operate.md, Deploy")
    return 0
