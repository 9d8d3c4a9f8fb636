"""`profstack legacy audit | cleanup | expire-rule-output | disable-profiler`: what SageMaker Profiler left.

    audit                 AWS's checklist: profiled jobs and their S3 output, rule-job logs, IAM, DetailedProfiler
                          apps, EventBridge / Step Functions / Lambda that use them; table or JSON, with cost
    cleanup               tag + expire verified job prefixes, delete DetailedProfiler apps, log streams behind a
                          flag; never IAM, rules, state machines or functions (dry run unless --apply)
    expire-rule-output    add the tag-expiry lifecycle rule to one bucket (merged; dry run unless --apply)
    disable-profiler      turn the Profiler off on in-progress jobs (dry run unless --apply)

Registered by profstack.cli.legacy beside tag-rule-output.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from profstack.cli import CliError
from profstack.cli._help import BUCKET, DAYS, REGION, N, command, deprecated, refuse

REGION_HELP = "AWS region (default: your AWS setup)"


def _window(parser: argparse.ArgumentParser, days: int) -> None:
    parser.add_argument(
        "--days",
        type=int,
        default=days,
        metavar=DAYS,
        help=f"look at jobs created in the last DAYS days (default {days})",
    )
    parser.add_argument(
        "--max-jobs", type=int, default=1000, metavar=N, help="stop after N training jobs in a region (default 1000)"
    )
    parser.add_argument("--region", metavar=REGION, help=REGION_HELP)
    parser.add_argument(
        "--regions",
        metavar="REGIONS",
        help="also audit these regions whole (comma-separated), or `all`: every region enabled for the account "
        "(the functions, state machines, rules and pipelines of every enabled region are always read as the users "
        "of its IAM roles)",
    )


def _expiry(parser: argparse.ArgumentParser, *, old_spelling: str) -> None:
    """`--expire-after-days`: after how many days tagged legacy output expires (the config's
    `legacy.rule_output_expire_after_days`). `--days` is a lookback window in every other legacy command."""
    parser.add_argument(
        "--expire-after-days",
        dest="expire_days",
        type=int,
        default=30,
        metavar=DAYS,
        help="expire tagged legacy output DAYS days after it was written (default 30)",
    )
    if old_spelling == "--expire-days":
        parser.add_argument(
            "--expire-days",
            dest="expire_days",
            type=int,
            metavar=DAYS,
            action=deprecated("--expire-after-days"),
            help=argparse.SUPPRESS,  # older spelling of --expire-after-days: works, with a warning
        )
    else:
        parser.add_argument(
            old_spelling,
            nargs="?",
            metavar=DAYS,
            action=refuse(
                "here the expiry is --expire-after-days DAYS; --days is the lookback window of the other legacy "
                "commands"
            ),
            help=argparse.SUPPRESS,  # refused with the hint above
        )


def _prices(parser: argparse.ArgumentParser) -> None:
    from profstack.migrate.legacy_profiler import LOGS_USD_PER_GB_MONTH, S3_USD_PER_GB_MONTH

    parser.add_argument(
        "--s3-price",
        type=float,
        default=S3_USD_PER_GB_MONTH,
        metavar="USD",
        help=f"S3 storage price per GB-month for the estimate (default {S3_USD_PER_GB_MONTH}, us-east-1 Standard)",
    )
    parser.add_argument(
        "--logs-price",
        type=float,
        default=LOGS_USD_PER_GB_MONTH,
        metavar="USD",
        help=f"CloudWatch Logs storage price per GB-month (default {LOGS_USD_PER_GB_MONTH}, us-east-1)",
    )


def add_parsers(commands: Any) -> None:
    audit = command(
        commands,
        "audit",
        help="find what SageMaker Profiler left: jobs, S3 output, logs, IAM, apps, automation (read-only)",
        examples=(
            "profstack legacy audit",
            "profstack legacy audit --days 180 --json",
            "profstack legacy audit --region eu-west-1",
            "profstack legacy audit --regions all  # every region enabled for the account",
        ),
    )
    _window(audit, 90)
    _prices(audit)
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(handler=run_audit)

    clean = command(
        commands,
        "cleanup",
        help="act on the audit's verified findings (dry run unless --apply); never edits IAM or automation",
        examples=(
            "profstack legacy cleanup",
            "profstack legacy cleanup --list-objects",
            "profstack legacy cleanup --apply --expire-after-days 14",
            "profstack legacy cleanup --regions us-east-1,eu-west-1 --apply",
        ),
    )
    _window(clean, 90)
    _prices(clean)
    clean.add_argument("--apply", action="store_true", help="change the account (default: print what would change)")
    _expiry(clean, old_spelling="--expire-days")
    clean.add_argument(
        "--delete-log-streams",
        action="store_true",
        help="also delete the rule-evaluation jobs' log streams in /aws/sagemaker/ProcessingJobs",
    )
    clean.add_argument(
        "--list-objects",
        action="store_true",
        help="print every object that is (or would be) tagged for expiry, with its size",
    )
    clean.set_defaults(handler=run_cleanup)

    expire = command(
        commands,
        "expire-rule-output",
        help="add ProfStack's tag-based expiry rule to a bucket that holds legacy output (dry run unless --apply)",
        examples=(
            "profstack legacy expire-rule-output --bucket my-sagemaker-output",
            "profstack legacy expire-rule-output --bucket my-sagemaker-output --expire-after-days 14 --apply",
        ),
    )
    expire.add_argument("--bucket", required=True, metavar=BUCKET, help="bucket holding SageMaker job output")
    _expiry(expire, old_spelling="--days")
    expire.add_argument("--apply", action="store_true", help="write the merged lifecycle configuration")
    expire.add_argument("--region", metavar=REGION, help=REGION_HELP)
    expire.set_defaults(handler=run_expire)

    disable = command(
        commands,
        "disable-profiler",
        help="turn SageMaker Profiler off on in-progress jobs (dry run unless --apply)",
        examples=("profstack legacy disable-profiler", "profstack legacy disable-profiler --days 7 --apply"),
    )
    disable.add_argument(
        "--days", type=int, default=30, metavar=DAYS, help="look at jobs created in the last DAYS days (default 30)"
    )
    disable.add_argument("--apply", action="store_true", help="call UpdateTrainingJob (default: list the jobs)")
    disable.add_argument("--region", metavar=REGION, help=REGION_HELP)
    disable.set_defaults(handler=run_disable)


def human_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - loop always returns


def _clients(region: str | None) -> tuple[Any, Any]:
    from profstack.cli._aws import make_client

    return make_client("sagemaker", region), make_client("s3", region)


def account_clients(region: str | None, regions: str | None = None) -> Any:
    from profstack.cli._aws import make_client
    from profstack.migrate.legacy_profiler import AccountClients

    if regions and regions.strip().lower() != "all":
        _region_names(regions)
    sts = make_client("sts", region)
    # the account whose buckets cleanup may write: a job's output in another account's bucket is left alone
    account = str(sts.get_caller_identity()["Account"])
    home = str(region or getattr(getattr(sts, "meta", None), "region_name", "") or "")
    ec2 = make_client("ec2", region)  # DescribeRegions: the regions enabled for the account
    iam, s3 = make_client("iam", region), make_client("s3", region)
    made: dict[str, Any] = {}

    def in_region(name: str) -> Any:
        if name not in made:
            made[name] = AccountClients(
                sagemaker=make_client("sagemaker", name),
                s3=s3,
                logs=make_client("logs", name),
                iam=iam,
                events=make_client("events", name),
                stepfunctions=make_client("stepfunctions", name),
                lambda_=make_client("lambda", name),
                cloudwatch=make_client("cloudwatch", name),
                account_id=account,
                region=name,
            )
        return made[name]

    clients = in_region(home)
    clients.ec2, clients.regional = ec2, in_region
    if regions and regions.strip().lower() == "all":
        enabled = [r["RegionName"] for r in ec2.describe_regions().get("Regions", [])]
        clients.audit_regions = tuple(sorted(r for r in enabled if r != home))
    elif regions:
        clients.audit_regions = tuple(dict.fromkeys(r for r in _region_names(regions) if r != home))
    return clients


def _region_names(regions: str) -> list[str]:
    """--regions R1,R2: each must look like a region name (checked before any AWS call)."""
    named = [r.strip() for r in regions.split(",") if r.strip()]
    wrong = [r for r in named if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", r)]
    if wrong or not named:
        raise CliError(f"--regions: not a region name: {', '.join(wrong) or regions!r} (e.g. eu-west-1, or `all`)")
    return named


def _positive(value: float, flag: str) -> Any:
    if value <= 0:
        raise CliError(f"{flag} must be a positive number, got {value}")
    return value


def _full_audit(args: argparse.Namespace) -> Any:
    from profstack.cli._aws import aws_errors
    from profstack.migrate.legacy_profiler import LegacyProfilerError, audit_account

    days = _positive(args.days, "--days")
    with aws_errors("audit"):
        clients = account_clients(args.region, args.regions)
        try:
            report = audit_account(
                clients,
                since_days=days,
                max_jobs=_positive(args.max_jobs, "--max-jobs"),
                s3_price=_positive(args.s3_price, "--s3-price"),
                logs_price=_positive(args.logs_price, "--logs-price"),
            )
        except LegacyProfilerError as exc:
            raise CliError(str(exc)) from None
    return clients, report


def print_findings(findings: list[Any], *, title: str) -> None:
    if not findings:
        return
    print(title)
    print(f"  {'kind':<16} {'size':>10} {'USD/month':>10}  resource")
    for f in findings:
        size = human_bytes(f.bytes) if f.bytes is not None else "-"
        cost = f"{f.monthly_usd:.4f}" if f.monthly_usd is not None else "-"
        only = " [Profiler-only]" if f.profiler_only else ""
        where = f" ({f.region})" if f.region and f.region not in f.resource else ""
        print(f"  {f.kind:<16} {size:>10} {cost:>10}  {f.resource}{where}{only}")
        print(f"  {'':<16} {'':>10} {'':>10}    {f.why}")
        if f.command:
            print(f"  {'':<16} {'':>10} {'':>10}    $ {f.command}")


def _print_debugger(report: Any) -> None:
    from profstack.migrate.legacy_evidence import DEBUGGER_CLOSED_TO_NEW_CUSTOMERS

    if not report.debugger and not report.debugger_jobs:
        return
    print(
        f"Debugger (kept; closed to new customers on {DEBUGGER_CLOSED_TO_NEW_CUSTOMERS}): Debugger is not Profiler "
        "and existing customers still run it, so ProfStack never cleans these up"
    )
    for job in report.debugger_jobs:
        print(f"  job {job.name}: Debugger rules {', '.join(job.debugger_rules)}")
    for f in report.debugger:
        print(f"  {f.kind:<16} {f.resource}\n  {'':<16}   {f.why}")


def run_audit(args: argparse.Namespace) -> int:
    import json

    _, report = _full_audit(args)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(f"Scanned {report.scanned} training jobs created since {report.since:%Y-%m-%d}.")
    if report.jobs:
        print(f"{len(report.jobs)} use SageMaker Profiler:")
        print(f"  {'job':<40} {'status':<11} {'profiler':<8} {'rules':<28} legacy output")
        for job in report.jobs:
            rules = ", ".join(name for name, _ in job.profiler_rules) or "-"
            print(
                f"  {job.name:<40} {job.status:<11} {'on' if job.profiler_enabled else 'off':<8} {rules[:28]:<28} "
                f"{human_bytes(job.legacy_bytes)}"
            )
    else:
        print("No job uses SageMaker Profiler or its rules.")
    print_findings(report.found, title=f"{len(report.found)} legacy resources:")
    print_findings(report.review, title=f"{len(report.review)} to review (not cleaned up: each says why):")
    _print_debugger(report)
    print(f"Estimated storage cost of what was found: {report.monthly_usd:.2f} USD/month (list prices).")
    for what in report.incomplete:
        print(f"warning: incomplete: {what}")
    print("Next steps:")
    if any(j.status == "InProgress" and j.profiler_enabled for j in report.jobs):
        print("  profstack legacy disable-profiler --apply        # stop profiling on running jobs")
    if report.found:
        print("  profstack legacy cleanup                         # see exactly what cleanup would change")
    print("  profstack migrate smprof --write <your training scripts and launchers>")
    return 0


def run_cleanup(args: argparse.Namespace) -> int:
    from profstack.cli._aws import aws_errors
    from profstack.migrate.legacy_profiler import cleanup

    days = _positive(args.expire_days, "--expire-after-days")
    clients, report = _full_audit(args)
    with aws_errors("cleanup"):
        listed: list[tuple[str, int]] = []
        result = cleanup(
            report,
            clients,
            apply=args.apply,
            expire_days=days,
            delete_log_streams=args.delete_log_streams,
            on_object=(lambda uri, size: listed.append((uri, size))) if args.list_objects else None,
        )
    would = "" if args.apply else "would "
    prefixes = [f for f in report.found if f.kind in {"rule-output", "profiler-output"}]
    print(f"{would}tag {result.tagged:,} objects under {len(prefixes)} verified job prefixes for expiry:")
    for f in prefixes:
        print(f"  {f.resource}")
    if result.already_tagged:
        print(f"  ({result.already_tagged:,} already tagged)")
    if args.list_objects:
        print(f"{'tagged' if args.apply else 'would tag'} for expiry ({len(listed):,} objects):")
        for uri, size in listed:
            print(f"  {uri}  ({human_bytes(size)})")
    for bucket in result.expiry_rules:
        print(f"{would}add lifecycle rule profstack-legacy-rule-output to {bucket} (expire after {days} days)")
    for app in result.apps:
        print(f"{would}delete DetailedProfiler app {app}")
    for stream in result.log_streams:
        print(f"{would}delete log stream {stream}")
    if result.left_alone:
        print("Left alone (cleanup never edits these); to act on them yourself:")
        for f in result.left_alone:
            tag = "" if f.verified else " (review: names no verified job)"
            print(f"  {f.kind}: {f.resource}{tag}\n    {f.why}")
            if f.command and not f.command.startswith("profstack legacy cleanup"):
                print(f"    $ {f.command}")
            elif f.kind == "log-stream":
                print("    $ profstack legacy cleanup --delete-log-streams --apply")
    for section in result.skipped:
        print(f"skipped: {section} was read incompletely, so cleanup changed nothing there (see the warnings)")
    for what in report.incomplete:
        print(f"warning: incomplete audit: {what}")
    if not args.apply:
        print("dry run: nothing changed; add --apply to do the above")
    return _print_failures(result.failed)


def _print_failures(failed: list[str], shown: int = 20) -> int:
    """Each failure (the first `shown`), then one summary line; 1 when anything failed."""
    for failure in failed[:shown]:
        print(f"  failed: {failure}")
    if len(failed) > shown:
        print(f"  ... and {len(failed) - shown:,} more")
    if failed:
        print(
            f"{len(failed):,} failed; cleanup went on past each, and no object was tagged without its bucket's "
            "expiry rule: fix the permissions named above and run it again (it redoes only what is left)"
        )
    return 1 if failed else 0


def run_expire(args: argparse.Namespace) -> int:
    from profstack.cli._aws import aws_errors, make_client
    from profstack.migrate.legacy_profiler import EXPIRY_RULE_ID, LegacyProfilerError, apply_expiry_rule

    days = _positive(args.expire_days, "--expire-after-days")
    with aws_errors(f"bucket {args.bucket}"):
        from botocore.exceptions import ClientError

        # both S3 calls name this account as the bucket's owner: another account's bucket answers 403, never written
        account = str(make_client("sts", args.region).get_caller_identity()["Account"])
        try:
            rules, changed = apply_expiry_rule(
                make_client("s3", args.region), args.bucket, days=days, apply=args.apply, expected_owner=account
            )
        except LegacyProfilerError as exc:
            raise CliError(f"{args.bucket}: {exc}") from None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "AccessDenied":
                raise
            raise CliError(
                f"{args.bucket}: refused, nothing written: S3 denied access to a request naming account {account} as "
                "the bucket's owner (another account's bucket, or missing s3:GetLifecycleConfiguration / "
                "s3:PutLifecycleConfiguration)"
            ) from None
    kept = len(rules) - 1
    if not changed:
        print(f"{args.bucket}: rule {EXPIRY_RULE_ID} already expires tagged objects after {days} days; nothing to do")
    elif args.apply:
        print(f"{args.bucket}: rule {EXPIRY_RULE_ID} set (expire after {days} days); {kept} existing rule(s) kept")
    else:
        print(f"{args.bucket}: would set rule {EXPIRY_RULE_ID} (expire after {days} days), keeping {kept} rule(s)")
        print("dry run: add --apply to write it")
    return 0


def run_disable(args: argparse.Namespace) -> int:
    from profstack.cli._aws import aws_errors
    from profstack.migrate.legacy_profiler import audit, disable_profiler

    with aws_errors("disable-profiler"):
        sm, s3 = _clients(args.region)
        report = audit(sm, s3, since_days=_positive(args.days, "--days"), measure_output=False)
        names = disable_profiler(sm, report.jobs, apply=args.apply)
    verb = "disabled" if args.apply else "would disable"
    for name in names:
        print(f"{verb} SageMaker Profiler on {name}")
    if not names:
        print("no in-progress job runs SageMaker Profiler")
    elif not args.apply:
        print("dry run: add --apply to change the jobs")
    return 0
