"""`profstack legacy audit | expire-rule-output | disable-profiler`: what SageMaker Profiler left behind.

    audit                 jobs still using Profiler/Debugger profiling, and their legacy output in S3
    expire-rule-output    add the tag-expiry lifecycle rule to a bucket holding legacy output (merged)
    disable-profiler      turn the Profiler off on in-progress jobs

Registered by profstack.cli.legacy beside tag-rule-output.
"""

from __future__ import annotations

import argparse
from typing import Any

from profstack.cli import CliError


def add_parsers(commands: Any) -> None:
    audit = commands.add_parser("audit", help="find training jobs that still use SageMaker Profiler/Debugger profiling")
    audit.add_argument("--days", type=int, default=90, help="look at jobs created in the last N days (default 90)")
    audit.add_argument("--max-jobs", type=int, default=1000, help="stop after N jobs (default 1000)")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.add_argument("--region", metavar="REGION")
    audit.set_defaults(handler=run_audit)

    expire = commands.add_parser(
        "expire-rule-output",
        help="add ProfStack's tag-based expiry rule to a bucket that holds legacy rule-output (dry run unless --apply)",
    )
    expire.add_argument("--bucket", required=True)
    expire.add_argument("--days", type=int, default=30, help="expire tagged objects after N days (default 30)")
    expire.add_argument("--apply", action="store_true", help="write the merged lifecycle configuration")
    expire.add_argument("--region", metavar="REGION")
    expire.set_defaults(handler=run_expire)

    disable = commands.add_parser(
        "disable-profiler", help="turn SageMaker Profiler off on in-progress jobs (dry run unless --apply)"
    )
    disable.add_argument("--days", type=int, default=30)
    disable.add_argument("--apply", action="store_true")
    disable.add_argument("--region", metavar="REGION")
    disable.set_defaults(handler=run_disable)


def _human_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - loop always returns


def _clients(region: str | None) -> tuple[Any, Any]:
    from profstack.cli._aws import make_client

    return make_client("sagemaker", region), make_client("s3", region)


def _positive(value: int, flag: str) -> int:
    if value <= 0:
        raise CliError(f"{flag} must be a positive number, got {value}")
    return value


def run_audit(args: argparse.Namespace) -> int:
    import json

    from profstack.cli._aws import aws_errors
    from profstack.migrate.legacy_profiler import LegacyProfilerError, audit

    days = _positive(args.days, "--days")
    with aws_errors("audit"):
        sm, s3 = _clients(args.region)
        try:
            report = audit(sm, s3, since_days=days, max_jobs=_positive(args.max_jobs, "--max-jobs"))
        except LegacyProfilerError as exc:
            raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(f"Scanned {report.scanned} training jobs created since {report.since:%Y-%m-%d}.")
    if not report.jobs:
        print("No job uses SageMaker Profiler or Debugger profiler rules.")
        return 0
    print(f"{len(report.jobs)} use SageMaker Profiler or Debugger profiling:")
    print(f"  {'job':<40} {'status':<11} {'profiler':<8} {'rules':<28} legacy output")
    for job in report.jobs:
        rules = ", ".join(name for name, _ in job.profiler_rules) or "-"
        print(
            f"  {job.name:<40} {job.status:<11} {'on' if job.profiler_enabled else 'off':<8} {rules[:28]:<28} "
            f"{_human_bytes(job.legacy_bytes)}"
        )
    print("Next steps:")
    if any(j.status == "InProgress" and j.profiler_enabled for j in report.jobs):
        print("  profstack legacy disable-profiler --apply        # stop profiling on running jobs")
    for bucket, size in sorted(report.buckets.items()):
        print(f"  # {bucket}: {_human_bytes(size)} of legacy output")
        print(f"  profstack legacy expire-rule-output --bucket {bucket} --apply")
        print(f"  profstack legacy tag-rule-output --bucket {bucket}")
    print("  profstack migrate smprof --write <your training scripts>")
    return 0


def run_expire(args: argparse.Namespace) -> int:
    from profstack.cli._aws import aws_errors, make_client
    from profstack.migrate.legacy_profiler import EXPIRY_RULE_ID, LegacyProfilerError, apply_expiry_rule

    days = _positive(args.days, "--days")
    with aws_errors(f"bucket {args.bucket}"):
        try:
            rules, changed = apply_expiry_rule(make_client("s3", args.region), args.bucket, days=days, apply=args.apply)
        except LegacyProfilerError as exc:
            raise CliError(f"{args.bucket}: {exc}") from None
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
