"""What a job's report is made of, and where each piece is written (every key is fixed per job, under
JobContext.reports, so a re-delivery overwrites with identical content instead of adding a report):

    summary.json, report.html            publish_report()
    system.json                          publish_report(): the job's CloudWatch instance metrics (system_view.py)
    perfetto/rank-<r>[.<i>].trace.json.gz write_perfetto(): profstack.analysis.perfetto_plan's names
    <TensorBoard folder>/profstack/...   write_tensorboard()
    the e-mail                           notification.notify_once()
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from botocore.exceptions import ClientError

from lambdas.trace_processor.aws import (
    Clients,
    S3Location,
    S3Object,
    S3TraceSource,
    error_code,
    get_json,
    put_bytes,
    put_json,
    upload_fileobj,
)
from lambdas.trace_processor.engine import Engine, raise_read_failures
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.history import HistoryEnv, export_mlflow, job_tags, record_history
from lambdas.trace_processor.job import JobContext, Outcome
from lambdas.trace_processor.notification import notify_once
from lambdas.trace_processor.report_index import update_index
from lambdas.trace_processor.scope import as_folder
from lambdas.trace_processor.summary_tools import job_metrics
from lambdas.trace_processor.system_view import (
    SYSTEM_FILE,
    WARNING_SOURCE,
    SystemView,
    bounded,
    summary_section,
    summary_warnings,
    system_document,
)
from lambdas.trace_processor.tb_scalars import summary_scalars
from lambdas.trace_processor.tfevents import scalar_event_file
from profstack import layout
from profstack.actions import ACTIONS_FILE
from profstack.analysis.engine import SUMMARY_SCHEMA_VERSION
from profstack.analysis.perfetto_plan import PERFETTO_MAX_EVENTS, perfetto_plan
from profstack.analysis.summary import add_findings
from profstack.analysis.xplane import expand
from profstack.jobs import metric_names as m
from profstack.report.index import with_index_link

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_SPOOL_BYTES = 64 << 20


def unreadable_files(summary: Mapping[str, Any]) -> list[str]:
    """Inputs the engine could not read (failed) or read only in part (partial). The engine (and the
    fan-out merge) already put the UnreadableTraceFiles finding first; this only lists them."""
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    return [str(i.get("name")) for i in inputs if i.get("status") in {"failed", "partial"}]


#: a file with more events than this gets no trimmed timeline (its three passes would outlast the analysis)
TRIM_MAX_INPUT_EVENTS = 5_000_000


def _warn(summary: Mapping[str, Any], error_type: str, message: str) -> None:
    """A summary-level warning (the summary is the engine's dict, written after this)."""
    warnings = summary.get("warnings")
    if isinstance(warnings, list):
        warnings.append({"source": "profstack", "error_type": error_type, "message": message, "fatal": False})


def write_perfetto(
    s3: S3Client,
    engine: Engine,
    ctx: JobContext,
    objects: Sequence[S3Object],
    summary: Mapping[str, Any],
    *,
    source_s3: S3Client | None = None,
) -> list[str]:
    """Trimmed per-rank traces (gzip) under reports/.../perfetto/. Spooled to /tmp, never held whole.
    The traces are read with `source_s3` (the job's trace reader; default `s3`), written with `s3`."""
    reader = source_s3 if source_s3 is not None else s3
    by_name: dict[str, Any] = {}
    # the engine names an S3 input by its URI (S3TraceSource.name), and one device of an XSpace by its URI and plane
    for src in expand([S3TraceSource(reader, obj) for obj in objects]):
        by_name.setdefault(str(src.name), src)
    plan = perfetto_plan(summary, by_name)
    written: list[str] = []
    events = {str(i.get("name")): i.get("events") for i in summary.get("inputs") or [] if isinstance(i, Mapping)}
    for out in plan.outputs:
        count = events.get(out.source)
        if isinstance(count, int) and count > TRIM_MAX_INPUT_EVENTS:
            # the trim reads its file three times: beyond this many events it would take longer than the analysis
            # (a 7 MB .json.gz of 31.6 M tiny events: 426 s). The summary says so; the raw trace stays readable.
            _warn(summary, "TimelineNotTrimmed", f"{out.source} has {count:,} events, more than the "
                  f"{TRIM_MAX_INPUT_EVENTS:,} a trimmed timeline is made from: open the raw trace in Perfetto, or "
                  "trim it locally with `profstack analyze --timeline-window A:B`")  # fmt: skip
            continue
        target = ctx.reports.child("perfetto", out.file_name)
        source = by_name[out.source]
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            trimmed = engine.trim(source, cast(BinaryIO, spool), max_events=PERFETTO_MAX_EVENTS)
            raise_read_failures([source])  # a failed read is retried, never a silently missing trace
            if not trimmed:
                continue  # a partial file whose readable part cannot be trimmed: the summary flags it
            spool.seek(0)
            upload_fileobj(s3, target, cast(BinaryIO, spool), content_type="application/json", content_encoding="gzip")
        written.append(target.uri)
    return written


def tensorboard_location(ctx: JobContext) -> S3Location | None:
    """Event file in the job's TensorBoard folder, named after the job's end time so a re-run
    overwrites it. Only inside the owner's tensorboard/<user>/ in the trace bucket (checked again here:
    the fan-out aggregate gets the context from the execution input)."""
    if ctx.tensorboard is None:
        return None
    tb = as_folder(ctx.tensorboard)
    if (
        tb.bucket != ctx.trace_bucket
        or not layout.is_plain_prefix(tb.key)
        or not tb.key.startswith(layout.user_tensorboard_prefix(ctx.user))
    ):
        return None
    return ctx.tensorboard.child("profstack", f"events.out.tfevents.{int(ctx.end_time_s)}.profstack")


def write_tensorboard(
    s3: S3Client, ctx: JobContext, metrics: Mapping[str, float], summary: Mapping[str, Any]
) -> str | None:
    target = tensorboard_location(ctx)
    if target is None:
        return None
    scalars, steps = summary_scalars(summary, metrics)  # one tag style: profstack/<metric>[/rank_<r>]
    data = scalar_event_file(steps, wall_time=ctx.end_time_s, scalars=scalars)
    put_bytes(s3, target, data, content_type="application/octet-stream")
    return target.uri


def no_traces_summary(ctx: JobContext, searched: Sequence[S3Location]) -> dict[str, Any]:
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        # nothing found is a complete answer, unless a place the job named was left out (ctx.warnings)
        "complete": not ctx.warnings,
        "no_traces": True,
        "message": f"No PyTorch profiler traces (*.pt.trace.json[.gz]) were found for job {ctx.job}.",
        "searched": [loc.uri for loc in searched],
        "hint": "Enable torch.profiler with tensorboard_trace_handler writing under the job's "
        "TensorBoard output directory (TensorBoardOutputConfig), or upload the traces to "
        f"s3://{ctx.trace_bucket}/{layout.job_traces_prefix(ctx.user, ctx.job)}",
        "inputs": [],
        "ranks": [],
        "findings": [],
        "warnings": [],
    }


class RenderHtml(Protocol):
    def __call__(self, summary: Mapping[str, Any], *, sections: Sequence[str] = ()) -> str: ...


def _page(summary: Mapping[str, Any], job: str, render_html: RenderHtml, system: SystemView | None) -> str:
    from profstack.report.system import system_panel, system_report

    unavailable = system.reason if system is not None and system.status == "unavailable" else None
    if summary.get("no_traces"):
        from profstack.report import render_no_traces_html
        from profstack.report.no_traces import no_traces_section

        if system is None:
            return render_no_traces_html(summary)
        # a job without traces still gets its CPU, GPU, memory and disk over time per host
        return system_report(
            system.metrics,
            findings=system.findings,
            links=system.links,
            title=f"No traces: {job}",
            message="No profiler traces: this page shows the job's CloudWatch instance metrics and system rules.",
            preface=no_traces_section(summary),
            unavailable=unavailable,
        )
    sections = [system_panel(system.metrics, links=system.links, unavailable=unavailable)] if system is not None else []
    # The renderer titles the page with job_name; summary.json itself keeps its schema.
    return render_html({**summary, "job_name": job}, sections=sections)


def _is_system_finding(finding: Mapping[str, Any]) -> bool:
    evidence = finding.get("evidence")
    return isinstance(evidence, Mapping) and evidence.get("source") == WARNING_SOURCE


def add_system_view(s3: S3Client, ctx: JobContext, summary: dict[str, Any], system: SystemView) -> str:
    """system.json next to the report, and the system view into the summary: its findings (the one
    assembler, summary.add_findings), its warnings and its `system` section (schema 1.3). Idempotent: a
    re-delivered job replaces what an earlier delivery added."""
    metrics, downsampled = bounded(system.metrics) if system.metrics is not None else (None, False)
    target = ctx.reports.child(SYSTEM_FILE)
    put_json(s3, target, system_document(system, metrics, downsampled=downsampled))
    add_findings(summary, system.findings, replace=_is_system_finding)
    warnings = summary.get("warnings") or []
    others = [w for w in warnings if not (isinstance(w, Mapping) and w.get("source") == WARNING_SOURCE)]
    summary["warnings"] = [*others, *summary_warnings(system)]
    summary["system"] = summary_section(system, downsampled=downsampled)
    return target.uri


def add_live_actions(s3: S3Client, ctx: JobContext, summary: dict[str, Any]) -> None:
    """Issue 36: the stops the live analysis took while the job ran (reports/<user>/<job>/actions.json, written by
    lambdas/live_analysis) go into the final summary's `actions` (schema 1.5), so the report and e-mail state them."""
    try:
        recorded = get_json(s3, ctx.reports.child(ACTIONS_FILE))
    except ClientError as exc:
        if error_code(exc) in {"NoSuchKey", "404", "NotFound"}:
            return
        if error_code(exc) == "AccessDenied":  # a deployment without live analysis: the report is never lost for it
            _warn(summary, "LiveActionsUnreadable", f"{ACTIONS_FILE} of this job could not be read (access denied)")
            return
        raise
    actions = recorded.get("actions") if isinstance(recorded, Mapping) else None
    if isinstance(actions, list):
        summary["actions"] = [a for a in actions if isinstance(a, Mapping)][:20]


def publish_report(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    summary: dict[str, Any],
    *,
    render_html: RenderHtml,
    trace_bytes: int,
    system: SystemView | None = None,
    describe: Mapping[str, Any] | None = None,
) -> Outcome:
    """system.json, report.html, then summary.json (the commit marker), TensorBoard scalars, SNS. Shared by the
    one-Lambda path and
    the fan-out aggregate step, so both write the same outputs. The job's own warnings (ctx.warnings, e.g.
    an ignored TensorBoard output) are added to the summary's `warnings`; so is the system view's state
    (system_view.py). `describe`: the job's description, for a failed job's FailureReason in the e-mail."""
    job_warnings = [dict(w) for w in ctx.warnings]
    if job_warnings:
        summary["warnings"] = [*job_warnings, *[w for w in summary.get("warnings") or [] if w not in job_warnings]]
    if system is not None:
        add_system_view(clients.s3, ctx, summary, system)
    flagged = unreadable_files(summary)
    add_live_actions(clients.s3, ctx, summary)  # issue 36 (live analysis): a stop taken while the job ran
    summary = record_history(clients, ctx, summary)  # cost, Regression finding, history/ rows (history.py)
    metrics = (
        job_metrics(summary, trace_bytes=trace_bytes)
        if not summary.get("no_traces")
        else {
            m.TRACE_BYTES: 0.0,
            m.TRACE_FILES: 0.0,
            m.JOBS_WITHOUT_TRACES: 1.0,
        }
    )
    reports = ctx.reports
    page = with_index_link(_page(summary, ctx.job, render_html, system))  # issue 36: link to the owner's index
    put_bytes(clients.s3, reports.child("report.html"), page.encode(), content_type="text/html; charset=utf-8")
    # summary.json last: it is the delivery's commit marker. A reader (an index, a listing, a user) that finds it
    # finds the report of the same delivery beside it; a report.html without it is a delivery still under way.
    put_json(clients.s3, reports.child("summary.json"), summary)
    # issue 36 item 2: the owner's report index (reports/<user>/index.json and index.html), before the e-mail
    # that links it; conditional writes, so concurrent reports lose no row (report_index.py)
    henv = HistoryEnv.from_environ()
    tags = (lambda arn: job_tags(clients.sagemaker, arn)) if henv.enabled else None  # the family as history's
    update_index(clients.s3, ctx, summary, describe=describe, rules=henv.rules(), tags=tags)
    write_tensorboard(clients.s3, ctx, metrics, summary)
    report_uri = reports.child("report.html").uri
    notified = notify_once(
        clients, env, ctx, summary, report_uri, describe=describe, links=system.links if system is not None else None
    )
    export_mlflow(clients, ctx, summary, page)  # optional MLflow run (history.py)
    action = "no_traces" if summary.get("no_traces") else "reported"
    return Outcome(ctx.job, ctx.status, action, report_uri, metrics, flagged, notified=notified)
