"""`profstack legacy tag-rule-output`: tag old Profiler/Debugger rule output so it expires.

    profstack legacy tag-rule-output --bucket BUCKET [--prefix PREFIX] [--apply] [--with-profiler-output]
        [--batch | --batch-threshold N] [--role-arn ARN] [--replace-existing-tags]

Objects under `<output>/<job>/rule-output/` of the training jobs that used the Profiler (read from
DescribeTrainingJob: each job's output path and name, never a key pattern) get
`profstack:class=legacy-rule-output` (merged with their tags), which the StorageStack's lifecycle
rule expires. A dry run (the default) lists them; --apply tags. Past --batch-threshold matches (or
with --batch) it writes a manifest and creates one S3 Batch Operations tagging job instead.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO, Any

from profstack.cli import CliError
from profstack.cli._help import ARN, BUCKET, DAYS, PREFIX, REGION, N, command
from profstack.cli.legacy_profiler import add_parsers as add_legacy_profiler_parsers

DEFAULT_BATCH_THRESHOLD = 100_000
DEFAULT_MANIFEST_PREFIX = "profstack/batch-operations/"


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "legacy",
        help="clean up after SageMaker Profiler/Debugger",
        examples=("profstack legacy audit", "profstack legacy cleanup", "profstack legacy TOOL --help"),
    )
    commands = parser.add_subparsers(dest="legacy_command", metavar="TOOL", required=True)
    tag = command(
        commands,
        "tag-rule-output",
        help="tag <output>/<job>/rule-output/ objects so the tag-based lifecycle rule expires them",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=(
            "profstack legacy tag-rule-output --bucket my-sagemaker-output",
            "profstack legacy tag-rule-output --bucket my-sagemaker-output --prefix team-a/ --apply",
            "profstack legacy tag-rule-output --bucket my-sagemaker-output --batch --role-arn "
            "arn:aws:iam::111122223333:role/BatchTagging --replace-existing-tags --apply",
        ),
    )
    tag.add_argument("--bucket", required=True, metavar=BUCKET, help="bucket holding SageMaker job output")
    tag.add_argument("--prefix", default="", metavar=PREFIX, help="only job prefixes under this key prefix")
    mode = tag.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="tag the objects (default: list what would be tagged)")
    mode.add_argument(
        "--dry-run", action="store_true", help="the default; accepted so older scripts keep working (no effect)"
    )
    tag.add_argument("--with-profiler-output", action="store_true", help="also tag the jobs' profiler-output/ prefixes")
    tag.add_argument(
        "--days", type=int, default=365, metavar=DAYS, help="look at jobs created in the last DAYS days (default 365)"
    )
    tag.add_argument(
        "--max-jobs", type=int, default=10000, metavar=N, help="stop after N training jobs (default 10000)"
    )
    tag.add_argument("--region", metavar=REGION, help="AWS region (default: your AWS setup)")
    tag.add_argument("--batch", action="store_true", help="always use an S3 Batch Operations job")
    tag.add_argument(
        "--batch-threshold",
        type=int,
        default=DEFAULT_BATCH_THRESHOLD,
        metavar=N,
        help=f"use S3 Batch Operations above N matching objects (default {DEFAULT_BATCH_THRESHOLD:,})",
    )
    tag.add_argument("--role-arn", metavar=ARN, help="IAM role S3 Batch Operations assumes (batch mode)")
    tag.add_argument("--account-id", metavar="ACCOUNT", help="account of the batch job (default: caller's)")
    tag.add_argument(
        "--manifest-prefix",
        default=DEFAULT_MANIFEST_PREFIX,
        metavar=PREFIX,
        help=f"where the manifest and job report go, in --bucket (default {DEFAULT_MANIFEST_PREFIX})",
    )
    tag.add_argument(
        "--expire-after-days",
        dest="expire_days",
        type=int,
        default=30,
        metavar=DAYS,
        help="when no lifecycle rule of the bucket expires the tag, add ProfStack's first: expire tagged objects "
        "DAYS days after they were written (default 30); tags are never written without the rule that expires them",
    )
    tag.add_argument(
        "--replace-existing-tags",
        action="store_true",
        help="confirm batch mode: S3 Batch Operations replaces each object's whole tag set",
    )
    tag.set_defaults(handler=tag_rule_output_command)
    add_legacy_profiler_parsers(commands)


class ObjectProgress:
    """Objects-done progress on stderr: a redrawn bar on a terminal, a line every few seconds otherwise."""

    def __init__(self, total: int | None, stream: IO[str], label: str) -> None:
        self.total = total
        self.stream = stream
        self.label = label
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = 0.1 if self.tty else 5.0
        self.last = 0.0
        self.drawn = False

    def update(self, done: int, extra: str = "") -> None:
        now = time.monotonic()
        if now - self.last < self.interval and done != self.total:
            return
        self.last = now
        if self.total:
            frac = min(done / self.total, 1.0)
            width = 28
            bar = "#" * round(frac * width) + "." * (width - round(frac * width))
            text = f"{self.label} [{bar}] {frac * 100:5.1f}% {done:,}/{self.total:,} {extra}"
        else:
            text = f"{self.label} {done:,} {extra}"
        if self.tty:
            self.stream.write("\r" + text.ljust(79))
        else:
            self.stream.write(text.rstrip() + "\n")
        self.stream.flush()
        self.drawn = True

    def finish(self, done: int | None = None, extra: str = "") -> None:
        """Print the final count (throttled updates may have skipped it), then end the line."""
        if done is not None:
            self.update_now(done, extra)
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()

    def update_now(self, done: int, extra: str = "") -> None:
        self.last = time.monotonic() - self.interval
        self.update(done, extra)


def make_client(service: str, region: str | None) -> Any:
    """A boto3 client; tests replace this to inject moto or Stubber clients."""
    import boto3

    return boto3.client(service, region_name=region)  # type: ignore[call-overload]


def _aws_call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(*args, **kwargs)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CliError(f"{what}: {error.get('Code', 'error')}: {error.get('Message', exc)}") from None
    except BotoCoreError as exc:
        raise CliError(f"{what}: {exc}") from None


def _spool_matches(
    s3: Any, bucket: str, prefixes: list[str], progress: ObjectProgress, owner: str
) -> tuple[IO[str], int]:
    """Matching keys, one per line in a temp file: a bucket with millions of keys is never held whole."""
    from profstack.migrate.rule_output import iter_prefix_keys

    spool = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 - returned to the caller
    count = 0
    for key, _size in iter_prefix_keys(s3, bucket, prefixes, expected_owner=owner):
        spool.write(key + "\n")
        count += 1
        progress.update(count, "legacy objects found")
    progress.finish(count, "legacy objects found")
    spool.seek(0)
    return spool, count


def _verified_prefixes(args: argparse.Namespace) -> list[str]:
    """The job prefixes in --bucket (under --prefix) of the training jobs that used the Profiler."""
    from profstack.cli._aws import aws_errors
    from profstack.migrate.legacy_profiler import audit

    if args.days <= 0 or args.max_jobs <= 0:
        raise CliError("--days and --max-jobs must be positive")
    folders = ("rule-output", "profiler-output") if args.with_profiler_output else ("rule-output",)
    with aws_errors("listing training jobs"):
        report = audit(
            make_client("sagemaker", args.region),
            make_client("s3", args.region),
            since_days=args.days,
            max_jobs=args.max_jobs,
            measure_output=False,
        )
    for what in report.incomplete:  # e.g. more jobs than --max-jobs: older jobs' output is not tagged
        print(f"warning: incomplete: {what}", file=sys.stderr)
    return sorted(
        {
            p.prefix
            for job in report.jobs
            for p in job.prefixes(folders)
            if p.bucket == args.bucket and p.prefix.startswith(args.prefix)
        }
    )


def _expiry_rule_first(s3: Any, bucket: str, account: str, days: int) -> None:
    """Before any tag: a lifecycle rule that expires the tag (the bucket's own, or ProfStack's, merged in), so a run
    stopped part-way never leaves tagged objects that nothing expires."""
    from profstack.migrate.legacy_profiler import (
        EXPIRY_RULE_ID,
        LegacyProfilerError,
        apply_expiry_rule,
        current_lifecycle_rules,
        expires_tag,
    )

    if days <= 0:
        raise CliError("--expire-after-days must be positive")
    rules = _aws_call(f"reading the lifecycle of {bucket}", current_lifecycle_rules, s3, bucket, expected_owner=account)
    if expires_tag(rules):
        return
    try:
        _aws_call(
            f"writing the lifecycle of {bucket}",
            apply_expiry_rule,
            s3,
            bucket,
            days=days,
            apply=True,
            expected_owner=account,
        )
    except LegacyProfilerError as exc:
        raise CliError(f"{bucket}: {exc}; no object was tagged") from None
    print(f"added lifecycle rule {EXPIRY_RULE_ID} to {bucket} (expire tagged objects after {days} days)")


def _keys(spool: IO[str]) -> Iterator[str]:
    spool.seek(0)
    for line in spool:
        if line.strip():
            yield line.rstrip("\n")


def tag_rule_output_command(args: argparse.Namespace) -> int:
    from profstack.layout import LEGACY_RULE_OUTPUT_TAG
    from profstack.migrate.rule_output import (
        BatchJobRequest,
        TaggingError,
        create_tagging_job,
        manifest_csv,
        merge_object_tag,
    )

    if args.batch_threshold < 1:
        raise CliError("--batch-threshold must be >= 1")
    prefixes = _verified_prefixes(args)
    s3 = make_client("s3", args.region)
    where = f"s3://{args.bucket}/{args.prefix}"
    # every S3 call names this account as the bucket's owner: S3 answers 403 for another account's
    # bucket instead of letting this tag (or batch-tag) what that account owns
    account = str(
        args.account_id
        or _aws_call(
            "sts get-caller-identity", lambda: make_client("sts", args.region).get_caller_identity()["Account"]
        )
    )
    if not prefixes:
        print(f"no training job that used the Profiler has its output under {where}; nothing to tag")
        return 0
    finding = ObjectProgress(None, sys.stderr, "scanning:")
    spool, count = _aws_call(f"listing {where}", _spool_matches, s3, args.bucket, prefixes, finding, account)
    tag = "=".join(LEGACY_RULE_OUTPUT_TAG)
    with spool:
        batch = args.batch or count > args.batch_threshold
        if count == 0:
            print(f"no legacy objects under the {len(prefixes)} verified job prefixes in {where}")
            return 0
        if not args.apply:
            mode = "an S3 Batch Operations job" if batch else "object by object"
            print(
                f"dry run: would tag {count:,} legacy objects under {len(prefixes)} verified job prefixes "
                f"in {where} with {tag} ({mode}); add --apply to tag them"
            )
            for prefix in prefixes[:20]:
                print(f"  s3://{args.bucket}/{prefix}")
            return 0
        _expiry_rule_first(s3, args.bucket, account, args.expire_days)
        if batch:
            if not args.role_arn:
                raise CliError("batch mode needs --role-arn (a role S3 Batch Operations can assume)")
            if not args.replace_existing_tags:
                raise CliError(
                    "S3 Batch Operations replaces each object's whole tag set; SageMaker writes rule output "
                    "untagged, so this is normally safe: confirm with --replace-existing-tags"
                )
            manifest, rows = manifest_csv(args.bucket, _keys(spool))
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            prefix = args.manifest_prefix.rstrip("/") + "/"
            request = BatchJobRequest(
                account_id=account,
                bucket=args.bucket,
                manifest_bucket=args.bucket,
                manifest_key=f"{prefix}rule-output-{stamp}.csv",
                report_bucket=args.bucket,
                report_prefix=f"{prefix}reports",
                role_arn=args.role_arn,
            )
            job_id = _aws_call(
                "s3control create-job",
                create_tagging_job,
                s3,
                make_client("s3control", args.region),
                request,
                manifest,
            )
            print(f"created S3 Batch Operations job {job_id}: tag {rows:,} objects with {tag}")
            print(f"  manifest: s3://{request.manifest_bucket}/{request.manifest_key}")
            print(f"  failures report: s3://{request.report_bucket}/{request.report_prefix}/")
            return 0
        tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
        progress = ObjectProgress(count, sys.stderr, "tagging:")
        tagged = already = 0
        errors: list[str] = []
        for done, key in enumerate(_keys(spool), start=1):
            try:
                changed = _aws_call(
                    f"tagging s3://{args.bucket}/{key}",
                    merge_object_tag,
                    s3,
                    args.bucket,
                    key,
                    tag_key,
                    tag_value,
                    expected_owner=account,
                )
            except TaggingError as exc:
                errors.append(str(exc))
                changed = False
            else:
                tagged += int(changed)
                already += int(not changed)
            progress.update(done)
        progress.finish(count)
        print(f"tagged {tagged:,} objects with {tag}; {already:,} already had it; {len(errors):,} failed")
        for error in errors[:10]:
            print(f"  {error}", file=sys.stderr)
        return 1 if errors else 0
