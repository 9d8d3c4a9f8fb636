"""The e-mail a job's owner gets (plain text through SNS), at most once per job and status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, put_bytes
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.summary_tools import findings
from profstack.history.text import summary_lines

TOP_FINDINGS_IN_NOTIFICATION = 5
TOP_UNREADABLE_IN_NOTIFICATION = 10


def notification_text(ctx: JobContext, summary: Mapping[str, Any], report: str) -> tuple[str, str]:
    """(subject, body): the top findings first, then where the report, summary and console page are."""
    top = findings(summary)[:TOP_FINDINGS_IN_NOTIFICATION]
    if summary.get("no_traces"):
        subject = f"ProfStack: {ctx.job} {ctx.status}, no traces found"
        lines = [str(summary.get("message", "")), "", "Searched:", *[f"  {u}" for u in summary.get("searched", [])]]
    else:
        unreadable = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping) and i.get("status") != "ok"]
        partial = ", partial report" if unreadable else ""
        subject = f"ProfStack: {ctx.job} {ctx.status}, {len(findings(summary))} findings{partial}"
        lines = [f"Training job {ctx.job} ended with status {ctx.status}.", ""]
        if unreadable:
            lines.append(f"Incomplete: {len(unreadable)} trace file(s) could not be read completely:")
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
    if ctx.warnings:
        lines += ["", "Warnings:", *[f"  {w.get('message')}" for w in ctx.warnings]]
    lines += ["", f"Report: {report}", f"Summary: {ctx.reports.child('summary.json').uri}"]
    if ctx.region:
        lines.append(
            f"Console: https://{ctx.region}.console.aws.amazon.com/s3/object/{ctx.trace_bucket}"
            f"?prefix={ctx.reports.child('report.html').key}"
        )
    return subject[:100], "\n".join(lines)


def notify_once(clients: Clients, env: ProcessorEnv, ctx: JobContext, summary: Mapping[str, Any], report: str) -> bool:
    """At most one e-mail per job and status: a conditional-create marker goes first. If the publish
    call fails, the marker is removed again so the retry sends it; only a process killed between
    the two calls can lose the e-mail (the report is in S3 either way)."""
    marker = ctx.reports.child(f".notified-{ctx.status}")
    if not put_bytes(clients.s3, marker, b"", content_type="text/plain", only_if_absent=True):
        return False
    subject, body = notification_text(ctx, summary, report)
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
