"""The e-mail a job's owner gets (plain text through SNS), at most once per job and status.

A failed (or stopped) job's message starts with its FailureReason (from DescribeTrainingJob, at most 1,024
characters); every message ends with console links to the job, its CloudWatch instance metrics, its ProfStack
alarms and its logs (profstack.jobs.links). Size: SNS takes a Subject of fewer than 100 printable ASCII
characters without line breaks, and a message of at most 262,144 bytes (256 KiB, attributes included);
ProfStack sends a subject of at most SUBJECT_MAX characters and a body of at most MESSAGE_MAX_BYTES bytes,
shortening the middle (findings, warnings) so the failure and the links always survive.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, S3Location, error_code, put_bytes
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.summary_tools import findings
from profstack import layout
from profstack.actions import action_lines
from profstack.analysis.errors import NOT_RECORDED
from profstack.escape import ascii_line, one_line
from profstack.history.text import summary_lines
from profstack.jobs import links as job_links
from profstack.report.links import index_command, open_command, s3_folder_console_url, s3_object_console_url

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

TOP_FINDINGS_IN_NOTIFICATION = 5
TOP_UNREADABLE_IN_NOTIFICATION = 10
SUBJECT_MAX = 99  # SNS: "less than 100 characters"
MESSAGE_MAX_BYTES = 64 * 1024  # a quarter of SNS's 256 KiB: room for the attributes and the e-mail envelope
_TRUNCATED = "... (shortened to fit the notification; the report and summary.json have everything)"


def _subject(text: str) -> str:
    """Printable ASCII, one line, under SNS's 100 characters (profstack.escape, the one rule)."""
    return ascii_line(text, SUBJECT_MAX)


def _fit(body: Sequence[str], budget: int) -> list[str]:
    """The first lines of `body` that fit `budget` UTF-8 bytes (with a line saying so when cut)."""
    out: list[str] = []
    used = 0
    for line in body:
        size = len(line.encode()) + 1
        if used + size > budget - len(_TRUNCATED) - 1:
            cut = line.encode()[: max(budget - used - len(_TRUNCATED) - 2, 0)].decode(errors="ignore")
            return [*out, *([cut] if cut else []), _TRUNCATED]
        out.append(line)
        used += size
    return out


def _stop_lines(summary: Mapping[str, Any]) -> list[str]:
    stops = action_lines(summary)
    return [*stops, ""] if stops else []


def report_lines(ctx: JobContext, report: str) -> list[str]:
    """Where the report is, as things that open (issue 45): the command that opens it with every link working (a
    local server with the owner's credentials: `profstack reports open`), the same for the index, and the S3
    console's pages, which open for the owner signed in to the console; the s3:// URIs last, for the CLI."""
    index_key = f"{layout.user_reports_prefix(ctx.user)}index.html"
    lines = [
        f"Open the report (every link in it works): {open_command(ctx.user, ctx.job)}",
        f"All your reports: {index_command(ctx.user)}",
        "  (run them where your ProfStack credentials are, e.g. your SageMaker Studio terminal; from your own "
        "machine add --reader: docs/reports.md)",
    ]
    if ctx.region:
        lines += [
            "In the S3 console: "
            f"{s3_object_console_url(ctx.region, ctx.trace_bucket, ctx.reports.child('report.html').key)}",
            f"The job's files (summary.json, Perfetto timelines): "
            f"{s3_folder_console_url(ctx.region, ctx.trace_bucket, ctx.reports.key)}",
            f"Your report index in the S3 console: {s3_object_console_url(ctx.region, ctx.trace_bucket, index_key)}",
        ]
    lines += [f"Report: {report}", f"Summary: {ctx.reports.child('summary.json').uri}"]
    return lines


def notification_text(
    ctx: JobContext,
    summary: Mapping[str, Any],
    report: str,
    *,
    describe: Mapping[str, Any] | None = None,
    links: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """(subject, body): a failed job's FailureReason first, then the top findings, then where the report and
    summary are, then the console links (job_links.notification_text)."""
    top = findings(summary)[:TOP_FINDINGS_IN_NOTIFICATION]
    job = {"TrainingJobName": ctx.job, "TrainingJobStatus": ctx.status, **(describe or {})}
    failed = bool(job_links.failure_lines(job))  # those lines say how the job ended
    if summary.get("no_traces"):
        subject = f"ProfStack: {ctx.job} {ctx.status}, no traces found"
        lines = [str(summary.get("message", "")), "", "Searched:", *[f"  {u}" for u in summary.get("searched", [])]]
    else:
        unreadable = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping) and i.get("status") != "ok"]
        partial = ", partial report" if unreadable else ""
        subject = f"ProfStack: {ctx.job} {ctx.status}, {len(findings(summary))} findings{partial}"
        lines = [] if failed else [f"Training job {ctx.job} ended with status {ctx.status}.", ""]
        if unreadable:
            # read whole, but the profiler did not record everything (profstack.analysis.errors.NOT_RECORDED)
            gaps = all((i.get("error") or {}).get("error_type") in NOT_RECORDED for i in unreadable)
            how = (
                "did not record everything (each line says how to record it)"
                if gaps
                else "could not be read completely"
            )
            lines.append(f"Incomplete: {len(unreadable)} trace file(s) {how}:")
            for item in unreadable[:TOP_UNREADABLE_IN_NOTIFICATION]:
                reason = (item.get("error") or {}).get("message") or item.get("status")
                lines.append(f"  {item.get('name')} ({item.get('status')}): {str(reason)[:200]}")
            if len(unreadable) > TOP_UNREADABLE_IN_NOTIFICATION:
                lines.append(f"  ... and {len(unreadable) - TOP_UNREADABLE_IN_NOTIFICATION} more (see summary.json)")
            lines.append("")
        if top:
            lines.append("Top findings:")
            for f in top:
                lines.append(f"  [{f.get('severity')}] {f.get('rule_id')}: {f.get('message')}")
                if f.get("recommendation"):
                    lines.append(f"      -> {f.get('recommendation')}")
        else:
            lines.append("No findings.")
        lines += summary_lines(summary)  # regression against the family, GPU cost (profstack.history)
    lines = [*_stop_lines(summary), *lines]  # issue 36: a stop the live analysis took while the job ran
    if ctx.warnings:
        lines += ["", "Warnings:", *[f"  {w.get('message')}" for w in ctx.warnings]]
    system = summary.get("system")
    if isinstance(system, Mapping) and system.get("status") not in (None, "ok"):
        lines += ["", f"System metrics: {system.get('status')}: {str(system.get('reason') or '')[:500]}"]
    tail = report_lines(ctx, report)
    links = dict(links or {})
    fixed = job_links.notification_text(job, links, tail)[1]  # the failure, the locations, the links
    # every line is one line: file, kernel and host names come from traces anyone may write, and a newline in
    # one must not add a line of its own (a fake "Report:" link) to the message
    body = _fit([one_line(line) for line in lines], MESSAGE_MAX_BYTES - len(fixed.encode()) - 2)
    _, message = job_links.notification_text(job, links, [*body, "", *tail])
    reason = job_links.failure_reason(job)
    if reason:
        subject = f"{subject}: {reason.splitlines()[0]}"
    return _subject(subject), message.encode()[:MESSAGE_MAX_BYTES].decode(errors="ignore")


#: held by the live analysis while it checks for the final e-mail and sends its own (lambdas/live_analysis), so the
#: final e-mail never goes out before a live one that began earlier: `.notified-*`, like the markers (same grants)
LIVE_LOCK = ".notified-live-lock"
#: a live lock older than this is a run that died holding it: the final e-mail stops waiting for it
LIVE_LOCK_MAX_AGE_S = 120
LIVE_LOCK_POLL_S = 1.0


def wait_for_live_notification(
    s3: S3Client,
    reports: S3Location,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> float:
    """Wait while a live run holds the job's live lock (its e-mail is going out), at most until the lock is
    LIVE_LOCK_MAX_AGE_S old; the seconds waited. With the final marker written first, this makes "no live e-mail
    after the final one" hold: a live run that checks for the final marker after it was written sends nothing, and
    one that checked before holds the lock, so the final e-mail goes after its e-mail (#42 item 12)."""
    lock = reports.child(LIVE_LOCK)
    waited = 0.0
    while True:
        try:
            modified = s3.head_object(Bucket=lock.bucket, Key=lock.key)["LastModified"]
        except ClientError as exc:
            if error_code(exc) in {"404", "NoSuchKey", "NotFound"}:
                return waited
            raise
        if clock() - modified.timestamp() > LIVE_LOCK_MAX_AGE_S:
            return waited
        sleep(LIVE_LOCK_POLL_S)
        waited += LIVE_LOCK_POLL_S


def notify_once(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    summary: Mapping[str, Any],
    report: str,
    *,
    describe: Mapping[str, Any] | None = None,
    links: Mapping[str, str] | None = None,
) -> bool:
    """At most one e-mail per job and status: a conditional-create marker goes first. If the publish
    call fails, the marker is removed again so the retry sends it; only a process killed between
    the two calls can lose the e-mail (the report is in S3 either way)."""
    marker = ctx.reports.child(f".notified-{ctx.status}")
    if not put_bytes(clients.s3, marker, b"", content_type="text/plain", only_if_absent=True):
        return False
    wait_for_live_notification(clients.s3, ctx.reports)  # a live e-mail already going out goes first
    subject, body = notification_text(ctx, summary, report, describe=describe, links=links)
    try:
        aws.publish(
            clients.sns,
            topic_arn=env.topic_arn,
            subject=subject,
            message=body,
            attributes={"job": ctx.job, "status": ctx.status},
        )
    except BaseException:
        aws.delete_object(clients.s3, marker)
        raise
    return True
