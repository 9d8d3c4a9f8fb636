"""What a job's report is made of, and where each piece is written (every key is fixed per job, under
JobContext.reports, so a re-delivery overwrites with identical content instead of adding a report):

    summary.json, report.html            publish_report()
    perfetto/rank-<r>[-<n>].trace.json.gz write_perfetto()
    <TensorBoard folder>/profstack/...   write_tensorboard()
    the e-mail                           notification.notify_once()
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from lambdas.trace_processor.aws import (
    Clients,
    S3Location,
    S3Object,
    S3TraceSource,
    put_bytes,
    put_json,
    upload_fileobj,
)
from lambdas.trace_processor.engine import Engine
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext, Outcome
from lambdas.trace_processor.notification import notify_once
from lambdas.trace_processor.summary_tools import job_metrics
from lambdas.trace_processor.tb_scalars import summary_scalars
from lambdas.trace_processor.tfevents import scalar_event_file
from profstack import layout
from profstack import metric_names as m
from profstack.analysis.engine import SUMMARY_SCHEMA_VERSION
from profstack.analysis.perfetto_plan import PERFETTO_MAX_EVENTS

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_SPOOL_BYTES = 64 << 20


def flag_unreadable(summary: dict[str, Any]) -> list[str]:
    """Files the engine could not read (failed) or read only in part (partial). Adds a finding so
    the report says so up front. (To be produced by the engine itself, so `profstack analyze` reports
    it too; this function then goes.)"""
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    bad = [str(i.get("name")) for i in inputs if i.get("status") in {"failed", "partial"}]
    existing = {f.get("rule_id") for f in summary.get("findings") or [] if isinstance(f, Mapping)}
    if bad and "UnreadableTraceFiles" not in existing:
        reasons = {
            str(i.get("name")): str((i.get("error") or {}).get("message", i.get("status")))
            for i in inputs
            if i.get("status") in {"failed", "partial"}
        }
        summary.setdefault("findings", []).insert(
            0,
            {
                "rule_id": "UnreadableTraceFiles",
                "severity": "warning",
                "message": f"{len(bad)} of {len(inputs)} trace files could not be read completely; "
                "the report covers what could be read",
                "evidence": {"files": reasons},
                "recommendation": "Check that the profiler finished writing these files (a job stopped "
                "mid-write leaves truncated JSON), then re-run `profstack analyze` on them.",
                "ranks": [],
            },
        )
    return bad


def _rank_names(summary: Mapping[str, Any]) -> dict[str, str]:
    """Source name -> perfetto file stem (rank-<r>, or rank-<r>-<n> when a rank has several files)."""
    names: dict[str, str] = {}
    seen: dict[str, int] = {}
    for item in summary.get("inputs") or []:
        if not isinstance(item, Mapping) or item.get("status") in {"failed", "partial"}:
            continue
        rank = item.get("rank")
        stem = f"rank-{rank}" if isinstance(rank, int) else "rank-unknown"
        count = seen.get(stem, 0)
        seen[stem] = count + 1
        names[str(item.get("name"))] = stem if count == 0 else f"{stem}-{count}"
    return names


def write_perfetto(
    s3: S3Client, engine: Engine, ctx: JobContext, objects: Sequence[S3Object], summary: Mapping[str, Any]
) -> list[str]:
    """Trimmed per-rank traces (gzip) under reports/.../perfetto/. Spooled to /tmp, never held whole."""
    names = _rank_names(summary)
    written: list[str] = []
    for obj in objects:
        stem = names.get(obj.uri) or names.get(obj.key.rsplit("/", 1)[-1])
        if stem is None:
            continue  # unreadable file: nothing to trim
        target = ctx.reports.child("perfetto", f"{stem}.trace.json.gz")
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            if not engine.trim(S3TraceSource(s3, obj), cast(BinaryIO, spool), max_events=PERFETTO_MAX_EVENTS):
                continue
            spool.seek(0)
            upload_fileobj(s3, target, cast(BinaryIO, spool), content_type="application/json", content_encoding="gzip")
        written.append(target.uri)
    return written


def tensorboard_location(ctx: JobContext) -> S3Location | None:
    """Event file in the job's TensorBoard folder, named after the job's end time so a re-run
    overwrites it. Only inside the trace bucket's tensorboard/ prefix: the role may write nowhere else."""
    if ctx.tensorboard is None:
        return None
    if ctx.tensorboard.bucket != ctx.trace_bucket or not ctx.tensorboard.key.startswith(layout.TENSORBOARD_PREFIX):
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
        "complete": True,
        "no_traces": True,
        "message": f"No PyTorch profiler traces (*.pt.trace.json[.gz]) were found for job {ctx.job}.",
        "searched": [loc.uri for loc in searched],
        "hint": "Enable torch.profiler with tensorboard_trace_handler writing under the job's "
        "TensorBoard output directory (TensorBoardOutputConfig), or upload the traces to "
        f"s3://{ctx.trace_bucket}/{layout.job_traces_prefix(ctx.user, ctx.job)}",
        "inputs": [],
        "ranks": [],
        "findings": [],
    }


def _page(summary: Mapping[str, Any], job: str, render_html: Callable[[Mapping[str, Any]], str]) -> str:
    if summary.get("no_traces"):
        from profstack.report import render_no_traces_html

        return render_no_traces_html(summary)
    # The renderer titles the page with job_name; summary.json itself keeps its schema.
    return render_html({**summary, "job_name": job})


def publish_report(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    summary: dict[str, Any],
    *,
    render_html: Callable[[Mapping[str, Any]], str],
    trace_bytes: int,
) -> Outcome:
    """summary.json, report.html, TensorBoard scalars, SNS. Shared by the one-Lambda path and the
    fan-out aggregate step, so both write the same outputs."""
    flagged = flag_unreadable(summary)
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
    put_json(clients.s3, reports.child("summary.json"), summary)
    page = _page(summary, ctx.job, render_html)
    put_bytes(clients.s3, reports.child("report.html"), page.encode(), content_type="text/html; charset=utf-8")
    write_tensorboard(clients.s3, ctx, metrics, summary)
    report_uri = reports.child("report.html").uri
    notified = notify_once(clients, env, ctx, summary, report_uri)
    action = "no_traces" if summary.get("no_traces") else "reported"
    return Outcome(ctx.job, ctx.status, action, report_uri, metrics, flagged, notified=notified)
