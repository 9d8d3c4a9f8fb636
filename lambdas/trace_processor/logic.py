"""What the processor does for one finished training job. AWS clients and the engine are injected.

process_job(): DescribeTrainingJob -> find traces -> (fan out | analyse here) -> publish_report().
publish_report() is shared with the fan-out aggregate step, so both paths write the same outputs.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from botocore.exceptions import ClientError

from lambdas.trace_processor import metric_names as m
from lambdas.trace_processor.aws import (
    S3Location,
    S3Object,
    S3TraceSource,
    S3UriError,
    error_code,
    list_objects,
    parse_s3_uri,
    put_bytes,
    put_json,
)
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.events import TrainingJobStateChange
from lambdas.trace_processor.summary_tools import findings, job_metrics, step_durations_ms
from lambdas.trace_processor.tfevents import scalar_event_file
from profstack import layout
from profstack.analysis.engine import SUMMARY_SCHEMA_VERSION
from profstack.legacy_tagging import merge_object_tag

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient

# A trimmed Perfetto trace meant for viewing should stay well under 500 MB (docs/platform-facts.md).
PERFETTO_MAX_EVENTS = 1_000_000
TOP_FINDINGS_IN_NOTIFICATION = 5
# Uncompressed/compressed size of Kineto traces: 13.2:1 on bench/generate.py traces, 14.5:1 on the
# hta/trace_filter ranks (docs/processing.md). Thresholds are in uncompressed bytes.
GZIP_RATIO = 15
_SPOOL_BYTES = 64 << 20


class ProcessingError(RuntimeError):
    """A failure worth retrying and, after max receives, dead-lettering. `reason` is a short code."""

    reason = "processing_error"


class JobNotFoundError(ProcessingError):
    reason = "job_not_found"


class CorruptTracesError(ProcessingError):
    reason = "corrupt_trace"


class Engine(Protocol):
    """The slice of profstack.analysis / profstack.report the processor uses (injected for tests)."""

    def analyze(
        self, sources: Sequence[S3TraceSource], *, top_k: int, rule_thresholds: Mapping[str, float]
    ) -> dict[str, Any]: ...

    def trim(self, source: S3TraceSource, out: BinaryIO, *, max_events: int) -> bool:
        """Write a trimmed, gzip-compressed trace; False when the file cannot be trimmed."""
        ...

    def render_html(self, summary: Mapping[str, Any]) -> str: ...

    def cross_rank(
        self, table: list[dict[str, Any]], rule_thresholds: Mapping[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]: ...


class ProfStackEngine:
    """The real engine. Imported lazily: the analysis package is heavy and only needed here."""

    def analyze(
        self, sources: Sequence[S3TraceSource], *, top_k: int, rule_thresholds: Mapping[str, float]
    ) -> dict[str, Any]:
        from profstack.analysis import AnalysisOptions, analyze

        result = analyze(list(sources), AnalysisOptions(top_k=top_k, rule_thresholds=dict(rule_thresholds)))
        return dict(result.summary)

    def cross_rank(
        self, table: list[dict[str, Any]], rule_thresholds: Mapping[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        from profstack.analysis import AnalysisOptions, rules

        th = AnalysisOptions(rule_thresholds=dict(rule_thresholds)).thresholds()
        cross, found = rules.cross_rank(table, th)
        return dict(cross), [dict(f) for f in found]

    def trim(self, source: S3TraceSource, out: BinaryIO, *, max_events: int) -> bool:
        from profstack.analysis import TraceError, trim_trace

        try:
            trim_trace(source, out, steps=None, max_events=max_events, compress=True)
        except TraceError:
            return False  # a truncated/corrupt file: already flagged by the analysis
        return True

    def render_html(self, summary: Mapping[str, Any]) -> str:
        from profstack.report import render_html

        return str(render_html(dict(summary)))


@dataclass
class Clients:
    s3: S3Client
    sagemaker: SageMakerClient
    sns: SNSClient
    sfn: SFNClient | None = None


@dataclass(frozen=True)
class JobContext:
    job: str
    status: str
    user: str
    trace_bucket: str
    end_time_s: float
    tensorboard: S3Location | None  # <TensorBoardOutputConfig.S3OutputPath>/<job>/
    region: str = ""

    @property
    def reports(self) -> S3Location:
        return S3Location(self.trace_bucket, layout.job_reports_prefix(self.user, self.job))

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "user": self.user,
            "trace_bucket": self.trace_bucket,
            "end_time_s": self.end_time_s,
            "tensorboard": self.tensorboard.uri if self.tensorboard else None,
            "region": self.region,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobContext:
        tb = data.get("tensorboard")
        return cls(
            job=str(data["job"]),
            status=str(data["status"]),
            user=str(data["user"]),
            trace_bucket=str(data["trace_bucket"]),
            end_time_s=float(data["end_time_s"]),
            tensorboard=parse_s3_uri(tb) if tb else None,
            region=str(data.get("region") or ""),
        )


@dataclass
class Outcome:
    """What happened, for the structured log and the metrics the handler publishes."""

    job: str
    status: str
    action: str  # reported | no_traces | fanned_out | ignored
    report: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    flagged_files: list[str] = field(default_factory=list)
    tagged_rule_output: int = 0
    notified: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "action": self.action,
            "report": self.report,
            "metrics": self.metrics,
            "flagged_files": self.flagged_files,
            "tagged_rule_output": self.tagged_rule_output,
            "notified": self.notified,
        }


# --- discovery ---------------------------------------------------------------------------------------


def describe_job(sagemaker: SageMakerClient, job: str) -> dict[str, Any]:
    try:
        return dict(sagemaker.describe_training_job(TrainingJobName=job))
    except ClientError as exc:
        message = str(exc.response.get("Error", {}).get("Message", ""))
        lowered = message.lower()
        # AWS: "Requested resource not found."; moto: "Could not find training job ...".
        if error_code(exc) in {"ValidationException", "ResourceNotFound"} and (
            "not found" in lowered or "could not find" in lowered
        ):
            raise JobNotFoundError(f"training job {job!r} not found: {message}") from exc
        raise


def resolve_user(tags: Mapping[str, str], tag_key: str) -> str:
    user = tags.get(tag_key)
    if not user:
        return layout.UNOWNED_USER
    try:
        layout.user_reports_prefix(user)
    except layout.LayoutError:
        return layout.UNOWNED_USER  # an unusable tag value must not break the report
    return user


def _s3_path(describe: Mapping[str, Any], *config: str) -> S3Location | None:
    value: Any = describe
    for part in config:
        value = value.get(part) if isinstance(value, Mapping) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_s3_uri(value)
    except S3UriError:
        return None


def job_context(event: TrainingJobStateChange, describe: Mapping[str, Any], env: ProcessorEnv) -> JobContext:
    job = event.job_name
    tb_root = _s3_path(describe, "TensorBoardOutputConfig", "S3OutputPath")
    end = describe.get("TrainingEndTime") or describe.get("LastModifiedTime")
    if isinstance(end, datetime):
        end_s = end.timestamp()
    elif event.detail.training_end_time:
        end_s = event.detail.training_end_time / 1000.0
    else:
        end_s = time.time()
    return JobContext(
        job=job,
        status=event.status,
        user=resolve_user(event.detail.tags, env.user_tag_key),
        trace_bucket=env.trace_bucket,
        end_time_s=end_s,
        tensorboard=tb_root.child(job) if tb_root else None,
        region=event.region,
    )


def readable(loc: S3Location, env: ProcessorEnv) -> bool:
    """Inside what the role may read: the trace bucket's trace prefixes, or an extra prefix."""
    if loc.bucket == env.trace_bucket and loc.key.startswith((layout.TRACES_PREFIX, layout.TENSORBOARD_PREFIX)):
        return True
    return any(loc.uri.startswith(extra.rstrip("/") + "/") for extra in env.extra_trace_prefixes)


def trace_prefixes(ctx: JobContext, env: ProcessorEnv) -> list[S3Location]:
    """Where a job's traces may be: its TensorBoard output, the ProfStack layout, extra prefixes.
    A TensorBoard output outside the role's read grant is left out (listing it would only fail with
    AccessDenied on every retry); add it to processing.extra_trace_prefixes to include it."""
    found: list[S3Location] = []
    if ctx.tensorboard is not None and readable(ctx.tensorboard.child(""), env):
        found.append(ctx.tensorboard.child(""))
    found.append(S3Location(ctx.trace_bucket, layout.job_traces_prefix(ctx.user, ctx.job)))
    for extra in env.extra_trace_prefixes:
        found.append(parse_s3_uri(extra).child(ctx.job, ""))
    unique: dict[tuple[str, str], S3Location] = {}
    for loc in found:
        unique.setdefault((loc.bucket, loc.key), loc)
    return list(unique.values())


def find_traces(s3: S3Client, prefixes: Sequence[S3Location]) -> list[S3Object]:
    objects: dict[tuple[str, str], S3Object] = {}
    for prefix in prefixes:
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if layout.is_trace_key(obj.key):
                objects.setdefault((obj.bucket, obj.key), obj)
    return sorted(objects.values(), key=lambda o: (o.bucket, o.key))


# --- routing -----------------------------------------------------------------------------------------


def estimated_json_bytes(obj: S3Object) -> int:
    """What the engine will parse. Work scales with uncompressed JSON, so .gz sizes are scaled by
    GZIP_RATIO (Kineto traces compress ~13-15:1; the larger ratio errs towards fanning out)."""
    return obj.size * GZIP_RATIO if obj.key.endswith(".gz") else obj.size


def route_for(obj: S3Object, env: ProcessorEnv) -> str:
    return "processing" if estimated_json_bytes(obj) > env.single_lambda_max_file_bytes else "lambda"


def needs_fanout(objects: Sequence[S3Object], env: ProcessorEnv) -> bool:
    return (
        len(objects) > env.fanout_file_threshold
        or sum(estimated_json_bytes(o) for o in objects) > env.fanout_bytes_threshold
        or any(route_for(o, env) == "processing" for o in objects)
    )


def execution_name(job: str, status: str) -> str:
    """Deterministic: a duplicate event cannot start a second execution (ExecutionAlreadyExists)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{job}-{status}")[:80]


def manifest_location(ctx: JobContext) -> S3Location:
    return ctx.reports.child("partials", "manifest.json")


def partial_location(ctx: JobContext, index: int) -> S3Location:
    return ctx.reports.child("partials", f"{index:05d}", "summary.json")


PROCESSING_INPUT_MANIFEST = "input.manifest"


def processing_input_manifest(obj: S3Object) -> list[Any]:
    """A SageMaker Processing `ManifestFile` input naming exactly `obj`: an `S3Prefix` input would also pull
    every key that starts with it (`x.pt.trace.json` would bring `x.pt.trace.json.gz` along)."""
    directory, _, name = obj.key.rpartition("/")
    return [{"prefix": f"s3://{obj.bucket}/{directory}/" if directory else f"s3://{obj.bucket}/"}, name]


def start_fanout(clients: Clients, env: ProcessorEnv, ctx: JobContext, objects: Sequence[S3Object]) -> bool:
    """Write the item manifest (a JSON array the Distributed Map reads) and start the execution.
    Returns False when an execution for this job and status already exists."""
    if clients.sfn is None or not env.state_machine_arn:
        raise ProcessingError("fan-out needed but no state machine is configured")
    items = [
        {
            "index": i,
            "bucket": o.bucket,
            "key": o.key,
            "size": o.size,
            "route": route_for(o, env),
            # The SageMaker Processing path writes its summary.json here (ASL cannot zero-pad).
            "partial_prefix": partial_location(ctx, i).key.rsplit("/", 1)[0] + "/",
        }
        for i, o in enumerate(objects)
    ]
    for item, obj in zip(items, objects, strict=True):
        if item["route"] == "processing":  # the Processing job's exact input (fanout_workflow.py)
            target = S3Location(ctx.trace_bucket, str(item["partial_prefix"]) + PROCESSING_INPUT_MANIFEST)
            put_json(clients.s3, target, processing_input_manifest(obj))
    manifest = manifest_location(ctx)
    put_json(clients.s3, manifest, items)
    payload = {
        "context": ctx.to_json(),
        "manifest": {"bucket": manifest.bucket, "key": manifest.key},
        "partials": {"bucket": ctx.trace_bucket, "prefix": ctx.reports.child("partials", "").key},
    }
    try:
        clients.sfn.start_execution(
            stateMachineArn=env.state_machine_arn,
            name=execution_name(ctx.job, ctx.status),
            input=json.dumps(payload),
        )
    except ClientError as exc:
        if error_code(exc) == "ExecutionAlreadyExists":
            return False
        raise
    return True


# --- analysis and outputs ------------------------------------------------------------------------


def _flag_unreadable(summary: dict[str, Any]) -> list[str]:
    """Files the engine could not read (failed) or read only in part (partial). Adds a finding so
    the report says so up front."""
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


def analyze_objects(s3: S3Client, engine: Engine, env: ProcessorEnv, objects: Sequence[S3Object]) -> dict[str, Any]:
    sources = [S3TraceSource(s3, o) for o in objects]
    summary = engine.analyze(sources, top_k=env.top_k, rule_thresholds=env.rule_thresholds)
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    if inputs and all(i.get("status") == "failed" for i in inputs):
        reasons = "; ".join(str((i.get("error") or {}).get("message", i.get("name"))) for i in inputs)
        raise CorruptTracesError(f"no trace file could be analysed: {reasons}"[:1000])
    return summary


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
            s3.upload_fileobj(
                spool,
                target.bucket,
                target.key,
                ExtraArgs={"ContentType": "application/json", "ContentEncoding": "gzip"},
            )
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
    scalars = {f"profstack/{name}": value for name, value in sorted(metrics.items())}
    steps = {step: {"profstack/step_time_ms": ms} for step, ms in step_durations_ms(summary).items()}
    data = scalar_event_file(steps, wall_time=ctx.end_time_s, scalars=scalars)
    put_bytes(s3, target, data, content_type="application/octet-stream")
    return target.uri


def _no_traces_summary(ctx: JobContext, searched: Sequence[S3Location]) -> dict[str, Any]:
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


def _no_traces_html(summary: Mapping[str, Any]) -> str:
    items = "".join(f"<li><code>{html.escape(str(u))}</code></li>" for u in summary.get("searched", []))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>ProfStack: no traces</title></head>"
        f"<body><h1>No traces</h1><p>{html.escape(str(summary['message']))}</p>"
        f"<p>Searched:</p><ul>{items}</ul><p>{html.escape(str(summary['hint']))}</p></body></html>"
    )


def notification_text(ctx: JobContext, summary: Mapping[str, Any], report: str) -> tuple[str, str]:
    top = findings(summary)[:TOP_FINDINGS_IN_NOTIFICATION]
    if summary.get("no_traces"):
        subject = f"ProfStack: {ctx.job} {ctx.status}, no traces found"
        lines = [str(summary.get("message", "")), "", "Searched:", *[f"  {u}" for u in summary.get("searched", [])]]
    else:
        subject = f"ProfStack: {ctx.job} {ctx.status}, {len(findings(summary))} findings"
        lines = [f"Training job {ctx.job} ended with status {ctx.status}.", ""]
        if top:
            lines.append("Top findings:")
            for f in top:
                lines.append(f"  [{f.get('severity')}] {f.get('rule_id')}: {f.get('message')}")
                if f.get("recommendation"):
                    lines.append(f"      -> {f.get('recommendation')}")
        else:
            lines.append("No findings.")
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
        clients.sns.publish(
            TopicArn=env.topic_arn,
            Subject=subject,
            Message=body,
            MessageAttributes={
                "job": {"DataType": "String", "StringValue": ctx.job},
                "status": {"DataType": "String", "StringValue": ctx.status},
            },
        )
    except BaseException:
        clients.s3.delete_object(Bucket=marker.bucket, Key=marker.key)
        raise
    return True


def publish_report(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    summary: dict[str, Any],
    *,
    render_html: Callable[[Mapping[str, Any]], str],
    trace_bytes: int,
) -> Outcome:
    """summary.json, report.html, TensorBoard scalars, SNS. Every key is fixed per job, so a
    re-delivery overwrites with identical content instead of adding a second report."""
    flagged = _flag_unreadable(summary)
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
    # The renderer titles the page with job_name; summary.json itself keeps its schema.
    page = _no_traces_html(summary) if summary.get("no_traces") else render_html({**summary, "job_name": ctx.job})
    put_bytes(clients.s3, reports.child("report.html"), page.encode(), content_type="text/html; charset=utf-8")
    write_tensorboard(clients.s3, ctx, metrics, summary)
    report_uri = reports.child("report.html").uri
    notified = notify_once(clients, env, ctx, summary, report_uri)
    action = "no_traces" if summary.get("no_traces") else "reported"
    return Outcome(ctx.job, ctx.status, action, report_uri, metrics, flagged, notified=notified)


# --- legacy rule-output tagging (docs/platform-facts.md A6/A7) --------------------------------------------------------


def rule_output_prefixes(describe: Mapping[str, Any], job: str) -> list[S3Location]:
    roots = [
        _s3_path(describe, "OutputDataConfig", "S3OutputPath"),
        _s3_path(describe, "ProfilerConfig", "S3OutputPath"),
        _s3_path(describe, "DebugHookConfig", "S3OutputPath"),
    ]
    unique: dict[tuple[str, str], S3Location] = {}
    for root in roots:
        if root is not None:
            loc = root.child(job, "rule-output", "")
            unique.setdefault((loc.bucket, loc.key), loc)
    return list(unique.values())


def tag_rule_output(s3: S3Client, prefixes: Sequence[S3Location], allowed_buckets: set[str]) -> int:
    """Tag legacy rule-output objects so the StorageStack's tag-based expiry applies.
    Buckets outside ProfStack's grant are skipped (the role may not touch them)."""
    key, value = layout.LEGACY_RULE_OUTPUT_TAG
    tagged = 0
    for prefix in prefixes:
        if prefix.bucket not in allowed_buckets:
            continue
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if merge_object_tag(s3, obj.bucket, obj.key, key, value):
                tagged += 1
    return tagged


def allowed_buckets(env: ProcessorEnv) -> set[str]:
    return {env.trace_bucket, *(parse_s3_uri(p).bucket for p in env.extra_trace_prefixes)}


# --- the whole job -----------------------------------------------------------------------------------


def process_job(event: TrainingJobStateChange, *, env: ProcessorEnv, clients: Clients, engine: Engine) -> Outcome:
    if not event.is_terminal:
        return Outcome(event.job_name, event.status, "ignored")
    describe = describe_job(clients.sagemaker, event.job_name)
    ctx = job_context(event, describe, env)
    tagged = 0
    if env.legacy_tagging:
        tagged = tag_rule_output(clients.s3, rule_output_prefixes(describe, ctx.job), allowed_buckets(env))
    prefixes = trace_prefixes(ctx, env)
    objects = find_traces(clients.s3, prefixes)
    if not objects:
        outcome = publish_report(
            clients, env, ctx, _no_traces_summary(ctx, prefixes), render_html=engine.render_html, trace_bytes=0
        )
    elif needs_fanout(objects, env):
        started = start_fanout(clients, env, ctx, objects)
        outcome = Outcome(
            ctx.job,
            ctx.status,
            "fanned_out" if started else "fanout_already_started",
            ctx.reports.child("report.html").uri,
            {m.JOBS_FANNED_OUT: 1.0, m.TRACE_FILES: float(len(objects))},
        )
    else:
        summary = analyze_objects(clients.s3, engine, env, objects)
        write_perfetto(clients.s3, engine, ctx, objects, summary)
        outcome = publish_report(
            clients,
            env,
            ctx,
            summary,
            render_html=engine.render_html,
            trace_bytes=sum(o.size for o in objects),
        )
    outcome.tagged_rule_output = tagged
    return outcome
