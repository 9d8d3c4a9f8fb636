"""`profstack reports reanalyze JOB` and `profstack reports backfill`: run the pipeline again (administrators).

    profstack reports reanalyze JOB [--apply] [--queue-url URL] [--config PATH] [--region REGION] [--json]
    profstack reports backfill --since WHEN [--until WHEN] [--status LIST] [--include-reported] [--rate PER_SECOND]
                               [--max-jobs N] [--apply] [--queue-url URL] [--bucket BUCKET] [--json]

How the pipeline is entered (docs/processing.md): SageMaker's `Training Job State Change` event reaches the
processor through the EventBridge rule and the job queue. A re-analysis puts the same event on that queue, built
from DescribeTrainingJob (its name, ARN, status and output path), with no `Tags` and one extra field,
`detail.ProfStackReanalysis` (a fresh id). The processor treats it as it treats SageMaker's events: it reads the
status from DescribeTrainingJob (a different one fails with `status_mismatch`) and the owner from ListTags and
the job's execution role (`job.owner_of`), never from the message, so a re-analysis files a job exactly where
SageMaker's own event would, under no one else. The id only makes the idempotency key new (the job was analysed
once already) and names a new fan-out execution; a redelivery of the same request is still analysed once. The
owner is not e-mailed again (the e-mail marker of the job and status exists); a backfilled job that never had a
report is e-mailed once, like any job.

Who may: whoever may send to the job queue (`sqs:SendMessage` on it and `kms:GenerateDataKey` on the data key:
administrators; users' roles may not) and call `sagemaker:DescribeTrainingJob`, `ListTrainingJobs`, `ListTags`,
`cloudformation:DescribeStacks` and `s3:ListBucket` (docs/operate.md, "Re-analyse and backfill").

Every command that changes something is a dry run until --apply; backfill queues at most --rate requests a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from profstack import layout
from profstack.cli import CliError, _aws
from profstack.cli._aws import add_config_argument, aws_errors, call
from profstack.cli._help import BUCKET, BUCKET_ENV, JOB, REGION, WHEN, N, command
from profstack.config import ConfigError, ProfStackConfig, default_config_path, load_config
from profstack.escape import one_line
from profstack.jobs.events import DETAIL_TYPE, REANALYSIS_FIELD, SOURCE, TERMINAL_STATUSES
from profstack.tensorboard.names import TRAINING_JOB_NAME_RE

QUEUE_OUTPUT = "QueueUrl"
BUCKET_OUTPUT = "TraceBucketName"
DEFAULT_USER_TAG_KEY = "profstack:user"
#: ListTrainingJobs' page size (its maximum)
PAGE = 100


def register(subparsers: Any) -> None:
    """Add `reanalyze` and `backfill` to `profstack reports` (registered after it: reports.py need not know them)."""
    reports = subparsers.choices["reports"]
    commands = next(a for a in reports._actions if isinstance(a, argparse._SubParsersAction))
    again = command(
        commands,
        "reanalyze",
        help="(administrators) analyze a finished job again; its report is rewritten (dry run unless --apply)",
        description="Put a re-analysis request for JOB on the job queue: the processor checks the job with "
        "DescribeTrainingJob and ListTags as it checks SageMaker's own events, and rewrites its report under "
        "its owner. A dry run unless --apply.",
        examples=(
            "profstack reports reanalyze my-training-job",
            "profstack reports reanalyze my-training-job --apply",
            "profstack reports reanalyze my-training-job --apply --queue-url "
            "https://sqs.us-east-1.amazonaws.com/111122223333/profstack-processing-JobsQueue --region us-east-1",
        ),
        aliases=["reanalyse"],
    )
    again.add_argument("job", metavar=JOB, help="training job name")
    _target_arguments(again)
    again.set_defaults(handler=run_reanalyze)

    back = command(
        commands,
        "backfill",
        help="(administrators) queue the reports of jobs that ended before the deployment (dry run unless --apply)",
        description="Find the training jobs that ended in a window (ListTrainingJobs, paged), and queue a "
        "re-analysis request for each that the deployment would have processed (its tag filter) and that has no "
        "report yet. A dry run (the list) unless --apply; at most --rate requests a second.",
        examples=(
            "profstack reports backfill --since 30d",
            "profstack reports backfill --since 2026-10-01 --until 2026-11-01 --status Completed",
            "profstack reports backfill --since 90d --apply --rate 0.5 --max-jobs 200",
        ),
    )
    back.add_argument(
        "--since", required=True, metavar=WHEN, help="jobs that ended since: 30d, 12h, 2w or a date (UTC)"
    )
    back.add_argument(
        "--until",
        metavar=WHEN,
        help="jobs that ended before (default: when the processing stack was created, so the jobs it never saw)",
    )
    back.add_argument(
        "--status",
        default=",".join(TERMINAL_STATUSES),
        metavar="LIST",
        help=f"comma-separated end states to take (default {','.join(TERMINAL_STATUSES)})",
    )
    back.add_argument(
        "--include-reported", action="store_true", help="also queue jobs that have a report already (re-analyse)"
    )
    back.add_argument(
        "--rate",
        type=float,
        default=1.0,
        metavar="PER_SECOND",
        help="requests queued per second, at most (default 1; the processor runs processing.reserved_concurrency "
        "jobs at once)",
    )
    back.add_argument("--max-jobs", type=int, default=1000, metavar=N, help="jobs looked at, at most (default 1000)")
    back.add_argument(
        "--bucket",
        metavar=BUCKET,
        help=f"the trace bucket, to skip jobs with a report (default ${BUCKET_ENV}, else the storage stack's output)",
    )
    _target_arguments(back)
    back.set_defaults(handler=run_backfill)


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--apply", action="store_true", help="queue the request(s) (default: say what would be)")
    parser.add_argument(
        "--queue-url",
        metavar="URL",
        help="the job queue (default: the processing stack's QueueUrl output, found through the config's prefix)",
    )
    add_config_argument(parser)
    parser.add_argument("--region", metavar=REGION, help="AWS region (default: config, then your AWS setup)")
    parser.add_argument("--json", action="store_true", help="print what was (or would be) queued as JSON")


# ------------------------------------------------------------------------------------------ where


@dataclass
class Deployment:
    """What a re-analysis talks to: the config (None: ProfStack's defaults), region, SageMaker and the queue."""

    config: ProfStackConfig | None
    region: str | None
    sagemaker: Any
    queue_url: str | None

    @property
    def prefix(self) -> str:
        return self.config.prefix if self.config else "profstack"

    @property
    def user_tag_key(self) -> str:
        return self.config.tensorboard.user_tag_key if self.config else DEFAULT_USER_TAG_KEY


def _config(args: argparse.Namespace) -> ProfStackConfig | None:
    """The config when there is one; without the default file (`--queue-url` given), ProfStack's defaults."""
    path = Path(args.config)
    if path == default_config_path() and not path.exists() and args.queue_url:
        return None
    try:
        return load_config(path)
    except ConfigError as exc:
        raise CliError(f"{exc} (the config names the deployment's stacks; or pass --queue-url URL)") from None


def deployment(args: argparse.Namespace) -> Deployment:
    config = _config(args)
    region = args.region or (config.environment.region if config else None)
    return Deployment(config, region, _aws.make_client("sagemaker", region), args.queue_url)


def processing_stack(prefix: str) -> str:
    return f"{prefix}-processing"


def queue_url(where: Deployment) -> str:
    if where.queue_url:
        return where.queue_url
    outputs = _aws.stack_outputs(processing_stack(where.prefix), where.region, hint="or pass --queue-url URL")
    if QUEUE_OUTPUT not in outputs:
        raise CliError(f"stack {processing_stack(where.prefix)} has no {QUEUE_OUTPUT} output; pass --queue-url URL")
    where.queue_url = outputs[QUEUE_OUTPUT]
    return where.queue_url


# ------------------------------------------------------------------------------------------ the request


def request_id(kind: str) -> str:
    """A fresh id: `reanalyze-<12 hex>` or `backfill-<12 hex>` (REANALYSIS_ID_PATTERN)."""
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def _epoch_ms(value: Any) -> int | None:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return None


def reanalysis_event(describe: Mapping[str, Any], request: str, now: datetime) -> dict[str, Any]:
    """The job's `SageMaker Training Job State Change` event as EventBridge would deliver it, from
    DescribeTrainingJob, with no Tags (the processor reads them) and `detail.ProfStackReanalysis`."""
    arn = str(describe["TrainingJobArn"])
    parts = arn.split(":")
    detail: dict[str, Any] = {
        "TrainingJobName": str(describe["TrainingJobName"]),
        "TrainingJobArn": arn,
        "TrainingJobStatus": str(describe["TrainingJobStatus"]),
        REANALYSIS_FIELD: request,
    }
    output = (describe.get("OutputDataConfig") or {}).get("S3OutputPath")
    if output:
        detail["OutputDataConfig"] = {"S3OutputPath": str(output)}
    end = _epoch_ms(describe.get("TrainingEndTime"))
    if end is not None:
        detail["TrainingEndTime"] = end
    return {
        "version": "0",
        "id": f"profstack-{request}",
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": parts[4] if len(parts) > 4 else "",
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": parts[3] if len(parts) > 3 else "",
        "resources": [arn],
        "detail": detail,
    }


def _job_name(name: str) -> str:
    if not TRAINING_JOB_NAME_RE.fullmatch(name):
        raise CliError(f"'{name}' is not a SageMaker training job name")
    return name


def describe(where: Deployment, job: str) -> dict[str, Any]:
    from botocore.exceptions import ClientError

    with aws_errors(f"DescribeTrainingJob {job}"):
        try:
            found: dict[str, Any] = where.sagemaker.describe_training_job(TrainingJobName=job)
        except ClientError as exc:
            if "not found" in str(exc.response.get("Error", {}).get("Message", "")).lower() or exc.response.get(
                "Error", {}
            ).get("Code") in {"ValidationException", "ResourceNotFound"}:
                raise CliError(
                    f"no training job '{job}' in {_aws.resolve_region(where.region) or 'your default region'} "
                    "(check the name and --region)"
                ) from None
            raise
    return found


def send(where: Deployment, event: Mapping[str, Any]) -> str:
    url = queue_url(where)
    sqs = _aws.make_client("sqs", where.region)
    response = call(f"sending to {url}", sqs.send_message, QueueUrl=url, MessageBody=json.dumps(event))
    return str(response.get("MessageId", ""))


def run_reanalyze(args: argparse.Namespace) -> int:
    job = _job_name(args.job)
    where = deployment(args)
    described = describe(where, job)
    status = str(described.get("TrainingJobStatus"))
    if status not in TERMINAL_STATUSES:
        raise CliError(
            f"'{job}' is {status}: its report is written when it ends (the in-progress report meanwhile: "
            "docs/processing.md, While a job runs)"
        )
    request = request_id("reanalyze")
    event = reanalysis_event(described, request, datetime.now(UTC))
    result: dict[str, Any] = {"job": job, "status": status, "request": request, "queued": False}
    if args.apply:
        result["message_id"] = send(where, event)
        result["queued"] = True
    result["queue_url"] = queue_url(where)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if not args.apply:
        print(
            f"dry run: would queue re-analysis {request} of '{job}' ({status}) on {result['queue_url']}; "
            "rerun with --apply"
        )
        return 0
    print(
        f"queued re-analysis {request} of '{job}' ({status}). The processor reads the job's owner from its tags and "
        f"rewrites reports/<owner>/{job}/ in a few minutes (no second e-mail); its log lines carry job={job}."
    )
    return 0


# ------------------------------------------------------------------------------------------ backfill


@dataclass
class Candidate:
    job: str
    status: str
    ended: datetime | None
    owner: str  # the tag's value, or "" (the processor decides; this is what the tag claims)
    action: str  # "queue", or why it is skipped
    request: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "ended": self.ended.isoformat() if self.ended else None,
            "owner_tag": self.owner or None,
            "action": self.action,
            "request": self.request or None,
        }


def _statuses(text: str) -> set[str]:
    wanted = {s.strip() for s in text.split(",") if s.strip()}
    unknown = wanted - set(TERMINAL_STATUSES)
    if unknown or not wanted:
        raise CliError(
            f"--status: {', '.join(sorted(unknown)) or '(none)'} is not an end state; choose from "
            f"{','.join(TERMINAL_STATUSES)}"
        )
    return wanted


def _deployed_at(where: Deployment) -> datetime:
    """When the processing stack was created: the first job it processed ended after that."""
    stack = processing_stack(where.prefix)
    cloudformation = _aws.make_client("cloudformation", where.region)
    with aws_errors(f"reading when stack {stack} was created (or pass --until)"):
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    created = stacks[0].get("CreationTime") if stacks else None
    if not isinstance(created, datetime):
        raise CliError(f"stack {stack} has no creation time; pass --until")
    return created if created.tzinfo else created.replace(tzinfo=UTC)


def list_ended_jobs(sagemaker: Any, since: datetime, until: datetime, limit: int) -> Iterator[Mapping[str, Any]]:
    """Training jobs whose TrainingEndTime is in [since, until), newest first, paged (100 a page). A job's last
    change is its end, so LastModifiedTimeAfter bounds the listing; the end time decides."""
    paginator = sagemaker.get_paginator("list_training_jobs")
    seen = 0
    with aws_errors("ListTrainingJobs"):
        pages = paginator.paginate(
            LastModifiedTimeAfter=since,
            SortBy="CreationTime",
            SortOrder="Descending",
            PaginationConfig={"PageSize": PAGE},
        )
        for page in pages:
            for summary in page.get("TrainingJobSummaries", []):
                seen += 1
                if seen > limit:
                    return
                ended = summary.get("TrainingEndTime")
                if isinstance(ended, datetime):
                    ended = ended if ended.tzinfo else ended.replace(tzinfo=UTC)
                    if since <= ended < until:
                        yield summary


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    with aws_errors(f"ListTags {arn}"):
        for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({str(t["Key"]): str(t["Value"]) for t in page.get("Tags", [])})
    return tags


def _reported(s3: Any, bucket: str, owner: str, job: str) -> bool:
    """Whether the job has a summary.json under its owner's (or _unowned's) reports: ListBucket only (an
    administrator may list key names but, by the bucket policy, read no user's reports)."""
    folders = [owner] if layout.is_segment(owner) else []
    for user in [*folders, layout.UNOWNED_USER]:
        key = layout.job_reports_prefix(user, job) + "summary.json"
        with aws_errors(f"listing s3://{bucket}/{key}"):
            found = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("KeyCount", 0)
        if found:
            return True
    return False


def _bucket(args: argparse.Namespace, where: Deployment) -> str:
    from profstack.cli.reports import bucket_from_environment

    bucket = args.bucket or bucket_from_environment()
    if bucket:
        return str(bucket)
    outputs = _aws.stack_outputs(f"{where.prefix}-storage", where.region, hint="or pass --bucket BUCKET")
    if BUCKET_OUTPUT not in outputs:
        raise CliError(f"stack {where.prefix}-storage has no {BUCKET_OUTPUT} output; pass --bucket BUCKET")
    return outputs[BUCKET_OUTPUT]


def _judge(summary: Mapping[str, Any], tags: Mapping[str, str], where: Deployment, reported: bool) -> str:
    """`queue`, or why the job is left alone."""
    tag_filter = where.config.processing.job_tag_filter if where.config else None
    if tag_filter is not None and tags.get(tag_filter.key) != tag_filter.value:
        return f"skip: no tag {tag_filter.key}={tag_filter.value} (processing.job_tag_filter)"
    if reported:
        return "skip: has a report (--include-reported queues it)"
    if not TRAINING_JOB_NAME_RE.fullmatch(str(summary.get("TrainingJobName", ""))):
        return "skip: not a training job name the processor accepts"
    return "queue"


def candidates(args: argparse.Namespace, where: Deployment, since: datetime, until: datetime) -> list[Candidate]:
    statuses = _statuses(args.status)
    s3 = None if args.include_reported else _aws.make_client("s3", where.region)
    bucket = "" if args.include_reported else _bucket(args, where)
    found: list[Candidate] = []
    for summary in list_ended_jobs(where.sagemaker, since, until, args.max_jobs):
        status = str(summary.get("TrainingJobStatus"))
        if status not in statuses:
            continue
        tags = _tags(where.sagemaker, str(summary["TrainingJobArn"]))
        owner = tags.get(where.user_tag_key, "")
        job = str(summary["TrainingJobName"])
        reported = s3 is not None and _reported(s3, bucket, owner, job)
        found.append(
            Candidate(job, status, summary.get("TrainingEndTime"), owner, _judge(summary, tags, where, reported))
        )
    return found


def run_backfill(args: argparse.Namespace) -> int:
    from profstack.cli.reports import parse_since

    if not 0 < args.rate <= 10:
        raise CliError("--rate must be above 0 and at most 10 requests a second")
    if args.max_jobs < 1:
        raise CliError("--max-jobs must be at least 1")
    now = datetime.now(UTC)
    since = parse_since(args.since, now)
    where = deployment(args)
    until = parse_since(args.until, now) if args.until else _deployed_at(where)
    if since >= until:
        raise CliError(f"empty window: --since {since:%Y-%m-%d %H:%M} is not before {until:%Y-%m-%d %H:%M} UTC")
    found = candidates(args, where, since, until)
    queue = [c for c in found if c.action == "queue"]
    if args.apply and queue:
        _queue_all(where, queue, args.rate, quiet=args.json)
    if args.json:
        print(json.dumps({"since": since.isoformat(), "until": until.isoformat(), "applied": args.apply,
                          "jobs": [c.to_json() for c in found]}, indent=2))  # fmt: skip
        return 0
    _print_candidates(found, since, until)
    if not args.apply:
        print(f"dry run: would queue {len(queue)} of {len(found)} job(s); rerun with --apply")
    else:
        print(f"queued {len(queue)} re-analysis request(s); reports appear under reports/<owner>/<job>/ as they run")
    return 0


def _queue_all(where: Deployment, queue: list[Candidate], rate: float, *, quiet: bool) -> None:
    """One request per job, at most `rate` a second (a burst would only wait in the queue, but the processor
    reads SageMaker and S3 for each, and SageMaker's API rates are the account's)."""
    interval = 1.0 / rate
    last = 0.0
    for i, candidate in enumerate(queue, start=1):
        wait = last + interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        last = time.monotonic()
        described = describe(where, candidate.job)  # the status as of now, as the processor will check it
        candidate.request = request_id("backfill")
        send(where, reanalysis_event(described, candidate.request, datetime.now(UTC)))
        if not quiet:
            print(f"[{i}/{len(queue)}] queued {candidate.job} ({candidate.request})", file=sys.stderr)


def _print_candidates(found: list[Candidate], since: datetime, until: datetime) -> None:
    window = f"{since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC"
    if not found:
        print(f"no training job ended {window}")
        return
    print(f"{len(found)} training job(s) ended {window}:")
    width = max(len(c.job) for c in found)
    for c in found:
        ended = f"{c.ended:%Y-%m-%d %H:%M}" if c.ended else "-"
        # the owner tag is whatever the job's creator wrote: printed through the one escaping rule (profstack.escape)
        owner = one_line(c.owner or "-", 64)
        print(f"  {c.job:<{width}}  {c.status:<9}  {ended}  owner tag: {owner:<12}  {one_line(c.action)}")
