"""The e-mail a job's owner gets (plain text through SNS), at most once per job and status.

A failed (or stopped) job's message starts with its FailureReason (from DescribeTrainingJob, at most 1,024
characters); every message ends with console links to the job, its CloudWatch instance metrics, its ProfStack
alarms and its logs (profstack.jobs.links). Size: SNS takes a Subject of fewer than 100 printable ASCII
characters without line breaks, and a message of at most 262,144 bytes (256 KiB, attributes included);
ProfStack sends a subject of at most SUBJECT_MAX characters and a body of at most MESSAGE_MAX_BYTES bytes,
shortening the middle (findings, warnings) so the failure and the links always survive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, put_bytes
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.summary_tools import findings
from profstack import layout
from profstack.actions import action_lines
from profstack.analysis.errors import NOT_RECORDED
from profstack.escape import one_line
from profstack.history.text import summary_lines
from profstack.jobs import links as job_links
from profstack.report.links import index_command, open_command, s3_folder_console_url, s3_object_console_url

TOP_FINDINGS_IN_NOTIFICATION = 5
TOP_UNREADABLE_IN_NOTIFICATION = 10
SUBJECT_MAX = 99  # SNS: "less than 100 characters"
MESSAGE_MAX_BYTES = 64 * 1024  # a quarter of SNS's 256 KiB: room for the attributes and the e-mail envelope
_TRUNCATED = "... (shortened to fit the notification; the report and summary.json have everything)"


def _subject(text: str) -> str:
    """Printable ASCII, one line, under SNS's 100 characters."""
    cleaned = "".join(ch if " " <= ch <= "~" else " " for ch in text)
    return " ".join(cleaned.split())[:SUBJECT_MAX]


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
