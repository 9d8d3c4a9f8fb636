"""What the live analysis does for one running job, and which jobs the dispatcher hands it.

analyse_job: DescribeTrainingJob (still InProgress?) + ListTags (live not off, owner verified exactly as the trace
processor verifies it: lambdas/trace_processor/job.py) -> the traces uploaded so far, through the trace reader
(the same per-job session policy as the processor) -> skip objects younger than the settle time (still being
written) -> analyse -> decide each finding's action (profstack/actions.py) -> stop the job where a rule says so and
every opt-in holds -> write the in-progress report at the job's report keys, conditionally -> e-mail what is new.

The final report always wins. It is written only after SageMaker reports a terminal status, so the ETags of
summary.json and report.html read *before* a second DescribeTrainingJob that still says InProgress predate any
final write; the in-progress report is written with IfMatch on those ETags (IfNoneMatch when absent), so a final
report written in between is never overwritten (the run ends as `superseded`).

No job is ever scheduled: the dispatcher (run every `interval_minutes`) asks SageMaker which jobs run now
(`due_jobs`), so a lost or reordered state-change event cannot leave a schedule behind or keep a finished job
analysed; a job without trace objects costs one listing.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from lambdas.live_analysis.aws import Existing, etag_of, existing, marker_names, put_unless_changed, stop_training_job
from lambdas.live_analysis.env import LiveEnv
from lambdas.live_analysis.jobs import RUNNING
from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, S3Location, S3Object, put_bytes, put_json
from lambdas.trace_processor.discovery import trace_prefixes
from lambdas.trace_processor.engine import Engine, analyze_objects
from lambdas.trace_processor.errors import CorruptTracesError, NotOwnedError
from lambdas.trace_processor.events import TrainingJobStateChange
from lambdas.trace_processor.evidence import NAMED_LEFT_OUT, RunWindow, list_traces
from lambdas.trace_processor.history import HistoryEnv
from lambdas.trace_processor.job import JobContext, job_context, s3_path
from lambdas.trace_processor.notification import LIVE_LOCK, LIVE_LOCK_MAX_AGE_S
from lambdas.trace_processor.pipeline import trace_reader
from lambdas.trace_processor.report_index import update_index
from profstack import layout
from profstack.actions import ACTIONS_FILE, Decision, action_lines, decide, live_enabled
from profstack.escape import ascii_line, one_line
from profstack.jobs.events import DETAIL_TYPE, SOURCE
from profstack.jobs.instances import accelerator_count

logger = logging.getLogger(__name__)

# metric names (namespace ProfStack), published by the handler
LIVE_ANALYSES = "LiveAnalyses"
LIVE_JOBS_STOPPED = "LiveJobsStopped"
LIVE_TRACE_FILES = "LiveTraceFiles"
SUBJECT_MAX = 99


@dataclass
class LiveOutcome:
    job: str
    #: analysed | not_running | live_off | no_tensorboard | not_owned | unverified_owner | final_report_exists
    #: | no_traces | no_evidence | not_settled | not_readable_yet | superseded
    action: str
    report: str | None = None
    files: int = 0
    unsettled: int = 0
    stopped: list[str] = field(default_factory=list)  # rule ids that stopped the job
    notified: bool = False
    warnings: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        if self.action not in {"analysed", "superseded"}:
            return {}
        return {LIVE_ANALYSES: 1.0, LIVE_TRACE_FILES: float(self.files), LIVE_JOBS_STOPPED: float(bool(self.stopped))}

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "action": self.action,
            "report": self.report,
            "files": self.files,
            "unsettled": self.unsettled,
            "stopped": self.stopped,
            "notified": self.notified,
            "warnings": self.warnings[:20],
        }


# ------------------------------------------------------------------------------------------------- analyser


def _context(job: str, describe: Mapping[str, Any], tags: Mapping[str, str], env: LiveEnv, now: datetime) -> JobContext:
    """The processor's own JobContext (owner verification, TensorBoard scope) for a job that still runs."""
    event = TrainingJobStateChange.model_validate(
        {
            "id": f"live-{job}",
            "source": SOURCE,
            "detail-type": DETAIL_TYPE,
            "region": env.region,
            "time": now.isoformat(),
            "detail": {"TrainingJobName": job, "TrainingJobStatus": RUNNING},
        }
    )
    return job_context(event, describe, tags, env)


def _when(obj: S3Object) -> datetime:
    return obj.modified or datetime.max.replace(tzinfo=UTC)


def _choose(settled: Sequence[S3Object], env: LiveEnv) -> tuple[list[S3Object], list[dict[str, Any]]]:
    """The newest files (what the job does now), at most env.max_files and, in all, at most the single-Lambda byte
    budget; in key order (the engine's order for the final report)."""
    chosen: list[S3Object] = []
    total = 0
    for item in sorted(settled, key=lambda t: (_when(t), t.key), reverse=True)[: env.max_files]:
        if total + item.size > env.fanout_bytes_threshold:
            continue
        chosen.append(item)
        total += item.size
    chosen.sort(key=lambda t: (t.bucket, t.key))
    warnings: list[dict[str, Any]] = []
    if len(chosen) < len(settled):
        warnings.append(
            {
                "source": "profstack",
                "error_type": "LiveFilesLeftOut",
                "message": f"{len(settled) - len(chosen)} of {len(settled)} trace files (the oldest) were left out "
                f"of this in-progress analysis (at most the newest {env.max_files} files, processing.live.max_files, "
                f"and {env.fanout_bytes_threshold:,} bytes per run); the final report reads every file",
                "fatal": False,
            }
        )
    return chosen, warnings


def _evidence_warnings(rejected: Sequence[tuple[S3Object, str]], cut: bool, seen: int) -> list[dict[str, Any]]:
    """The summary warnings for files that are not this run's evidence, and for a listing cut short."""
    warnings: list[dict[str, Any]] = []
    if rejected:
        named = ", ".join(f"{o.uri} ({why})" for o, why in rejected[:NAMED_LEFT_OUT])
        more = len(rejected) - NAMED_LEFT_OUT
        warnings.append(
            {
                "source": "profstack",
                "error_type": "LiveFilesNotEvidence",
                "message": f"{len(rejected)} file(s) in this job's folders cannot have been written by this run, so "
                f"they were not analysed and no action rests on them: {named}"
                + (f" and {more} more" if more > 0 else ""),
                "fatal": False,
            }
        )
    if cut:
        warnings.append(
            {
                "source": "profstack",
                "error_type": "TraceListingCut",
                "message": f"this job's folders hold more than {seen:,} objects; only those were listed",
                "fatal": False,
            }
        )
    return warnings


def mark_in_progress(
    summary: dict[str, Any],
    *,
    now: datetime,
    files: int,
    unsettled: int,
    interval_minutes: int,
    extra_warnings: Sequence[Mapping[str, Any]] = (),
) -> None:
    """The summary of a job that still runs (schema 1.5 `in_progress`, `live`). A file the engine could not read in
    full is most likely still being written: it is stated as such, not as a corrupt file (the final report judges
    it), so its UnreadableTraceFiles finding is dropped here."""
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    unread = [str(i.get("name")) for i in inputs if i.get("status") in {"failed", "partial"}]
    warnings = [w for w in summary.get("warnings") or [] if isinstance(w, Mapping)]
    warnings += [dict(w) for w in extra_warnings]
    if unread:
        summary["findings"] = [
            f
            for f in summary.get("findings") or []
            if not (isinstance(f, Mapping) and f.get("rule_id") == "UnreadableTraceFiles")
        ]
        warnings.append(
            {
                "source": "profstack",
                "error_type": "LiveInputIncomplete",
                "message": f"{len(unread)} trace file(s) could not be read in full yet, most likely still being "
                f"written ({', '.join(unread[:5])}{', ...' if len(unread) > 5 else ''}); the next run reads them "
                "again and the final report judges them",
                "fatal": False,
            }
        )
    summary["warnings"] = warnings
    summary["complete"] = False
    summary["in_progress"] = True
    summary["live"] = {
        "analysed_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "trace_files": files,
        "unsettled_files": unsettled,
        "incomplete_files": len(unread),
        "interval_minutes": interval_minutes,
    }


def live_section(summary: Mapping[str, Any]) -> str:
    """The banner of an in-progress report (ProfStack's own HTML; every value escaped)."""
    live = summary.get("live") or {}
    lines = [
        '<section class="notice" id="in-progress"><h2>In progress</h2>',
        f"<p>This job was still running when ProfStack analysed the traces uploaded so far "
        f"({html.escape(str(live.get('trace_files')))} file(s), at {html.escape(str(live.get('analysed_at')))}). "
        f"It is analysed again every {html.escape(str(live.get('interval_minutes')))} minutes; the final report "
        "replaces this page when the job ends.</p>",
    ]
    lines += [f"<p><strong>{html.escape(line)}</strong></p>" for line in action_lines(summary)]
    lines.append("</section>")
    return "".join(lines)


def _record_stop(clients: Clients, ctx: JobContext, taken: Sequence[Mapping[str, Any]]) -> None:
    """actions.json beside the report: the final report and e-mail state the stop from it (outputs.py)."""
    put_json(clients.s3, ctx.reports.child(ACTIONS_FILE), {"job": ctx.job, "actions": list(taken)})


def _act(
    clients: Clients, ctx: JobContext, decisions: Sequence[Decision], now: datetime
) -> tuple[list[dict[str, Any]], list[str]]:
    taken: list[dict[str, Any]] = []
    stopped: list[str] = []
    for decision in decisions:
        entry = {**decision.to_json(), "at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "result": None}
        if decision.action == "stop":
            result = stop_training_job(clients.sagemaker, ctx.job)
            entry["result"] = result
            if result == "stopped":
                stopped.append(decision.rule_id)
            logger.warning(
                "live analysis stopped a training job",
                extra={"job": ctx.job, "user": ctx.user, "rule": decision.rule_id, "result": result},
            )
        taken.append(entry)
    if stopped:
        _record_stop(clients, ctx, [t for t in taken if t["action"] == "stop"])
    return taken, stopped


#: a terminal status's e-mail marker (lambdas/trace_processor/notification.notify_once): the final e-mail is out or
#: going out, so no "is running" e-mail may follow
FINAL_MARKERS = frozenset({".notified-Completed", ".notified-Failed", ".notified-Stopped"})


def _overtaken(clients: Clients, ctx: JobContext, summary_etag: str) -> bool:
    """Whether the final report overtook this run: summary.json is no longer the in-progress one it wrote, or the
    final e-mail's marker is there."""
    if etag_of(clients.s3, ctx.reports.child("summary.json")) != summary_etag:
        return True
    return bool(marker_names(clients.s3, ctx.reports) & FINAL_MARKERS)


def _take_lock(clients: Clients, ctx: JobContext, now: datetime) -> bool:
    """The job's live lock (notification.LIVE_LOCK), by conditional create; a lock older than LIVE_LOCK_MAX_AGE_S
    is a run that died holding it, and is replaced once."""
    lock = ctx.reports.child(LIVE_LOCK)
    for _ in range(2):
        if put_bytes(clients.s3, lock, b"", content_type="text/plain", only_if_absent=True):
            return True
        try:
            held = clients.s3.head_object(Bucket=lock.bucket, Key=lock.key)["LastModified"]
        except ClientError as exc:
            if aws.error_code(exc) in {"404", "NoSuchKey", "NotFound"}:
                continue  # released meanwhile
            raise
        if (now - held).total_seconds() <= LIVE_LOCK_MAX_AGE_S:
            return False  # another live run of this job is e-mailing now
        aws.delete_object(clients.s3, lock)
    return False


def _notify(
    clients: Clients,
    env: LiveEnv,
    ctx: JobContext,
    taken: Sequence[Mapping[str, Any]],
    *,
    summary_etag: str,
    now: datetime,
) -> bool:
    """One e-mail for what is new since the job's last e-mail: each rule is e-mailed once per job (a conditional
    marker per rule), a stop always. A failed publish removes the markers, so the next run sends it.

    Never after the final e-mail (#42 item 12): under the job's live lock, the run checks that summary.json is still
    the in-progress one it wrote and that no final e-mail marker exists, and only then publishes; the final e-mail
    (notification.notify_once) writes its marker first and then waits while the lock is held. A run that is
    overtaken sends nothing: the final report and its e-mail state everything, the stop included."""
    new: list[tuple[Mapping[str, Any], S3Location]] = []
    for entry in taken:
        marker = ctx.reports.child(f".notified-live-{entry['action']}-{entry['rule_id']}")
        if put_bytes(clients.s3, marker, b"", content_type="text/plain", only_if_absent=True):
            new.append((entry, marker))
    if not new:
        return False

    def retract() -> None:
        for _, marker in new:
            aws.delete_object(clients.s3, marker)

    if not _take_lock(clients, ctx, now):
        retract()  # another run is e-mailing this job: the next run sends these
        return False
    try:
        if _overtaken(clients, ctx, summary_etag):
            return False
        stops = [str(e["rule_id"]) for e, _ in new if e.get("result") == "stopped"]
        subject = (
            f"ProfStack stopped {ctx.job} ({', '.join(stops)})"
            if stops
            else f"ProfStack: {ctx.job} is running, {len(new)} new finding(s)"
        )
        report = ctx.reports.child("report.html").uri
        lines = [
            f"Training job {ctx.job} is still running. ProfStack analysed the traces uploaded so far.",
            "",
            *action_lines({"actions": [e for e, _ in new]}),
            "",
            *[f"[{e.get('severity')}] {e.get('rule_id')}: {e.get('message')}" for e, _ in new],
            "",
            f"In-progress report: {report}",
            "The final report replaces it when the job ends.",
        ]
        try:
            aws.publish(
                clients.sns,
                topic_arn=env.topic_arn,
                subject=ascii_line(subject, SUBJECT_MAX),
                message="\n".join(one_line(line) for line in lines),
                attributes={"job": ctx.job, "status": RUNNING},
            )
        except BaseException:
            retract()
            raise
    finally:
        aws.delete_object(clients.s3, ctx.reports.child(LIVE_LOCK))
    return True


def _describe(clients: Clients, job: str) -> dict[str, Any] | None:
    try:
        return aws.describe_training_job(clients.sagemaker, job)
    except aws.NotFoundError:
        return None


def _running_job(
    job: str, *, env: LiveEnv, clients: Clients, now: datetime
) -> tuple[JobContext, dict[str, str], dict[str, Any]] | LiveOutcome:
    """The job's context and tags when it runs, has a TensorBoard output, keeps live analysis on and has a verified
    owner; else the outcome that says which of these it lacks."""
    describe = _describe(clients, job)
    if describe is None or describe.get("TrainingJobStatus") != RUNNING:
        return LiveOutcome(job, "not_running")
    tags = aws.list_tags(clients.sagemaker, str(describe.get("TrainingJobArn") or ""))
    if not live_enabled(tags):
        return LiveOutcome(job, "live_off")
    if s3_path(describe, "TensorBoardOutputConfig", "S3OutputPath") is None:
        return LiveOutcome(job, "no_tensorboard")
    try:
        ctx = _context(job, describe, tags, env, now)
    except NotOwnedError as exc:
        return LiveOutcome(job, "not_owned", warnings=[str(exc)])
    if ctx.user == layout.UNOWNED_USER:
        # no in-progress report, e-mail or action for a claim nothing confirms; the final report files it for an
        # administrator (docs/security.md)
        return LiveOutcome(job, "unverified_owner", warnings=[str(w.get("message")) for w in ctx.warnings])
    return ctx, tags, describe


def analyse_job(
    job: str, *, env: LiveEnv, clients: Clients, engine: Engine, now: datetime | None = None
) -> LiveOutcome:
    """One live run for one job (module docstring). Never raises for an ordinary state of the job; raises for AWS
    faults (the next run retries: nothing is stored as final)."""
    now = now or datetime.now(UTC)
    running = _running_job(job, env=env, clients=clients, now=now)
    if isinstance(running, LiveOutcome):
        return running
    ctx, tags, describe = running
    prefixes = trace_prefixes(ctx, env)
    reader = trace_reader(clients, env, ctx, prefixes)
    listing = list_traces(reader, prefixes)
    if not listing.objects:
        return LiveOutcome(job, "no_traces")  # a job without traces costs this listing, nothing more
    # only what this run can have written is evidence (evidence.py): never a file from before its training started
    window = RunWindow.of(describe, running=True)
    rejected = [(o, why) for o in listing.objects if (why := window.action_problem(o, now))]
    evidence = [o for o in listing.objects if not window.action_problem(o, now)]
    extra = _evidence_warnings(rejected, listing.cut, listing.keys_seen)
    if not evidence:
        return LiveOutcome(job, "no_evidence", warnings=[str(w["message"]) for w in extra])
    settled = [
        t for t in evidence if t.modified is not None and (now - t.modified).total_seconds() >= env.settle_seconds
    ]
    unsettled = len(evidence) - len(settled)
    if not settled:
        return LiveOutcome(job, "not_settled", unsettled=unsettled)
    summary_loc, html_loc = ctx.reports.child("summary.json"), ctx.reports.child("report.html")
    before_summary = existing(clients.s3, summary_loc, summary=True)
    if before_summary.etag is not None and not before_summary.in_progress:
        return LiveOutcome(job, "final_report_exists")
    before_html: Existing = existing(clients.s3, html_loc)
    # read after the ETags: a job still running now had no final report written before they were read
    again = _describe(clients, job)
    if again is None or again.get("TrainingJobStatus") != RUNNING:
        return LiveOutcome(job, "not_running")
    chosen, left_out = _choose(settled, env)
    extra += left_out
    try:
        summary = analyze_objects(reader, engine, env, chosen)
    except CorruptTracesError as exc:
        return LiveOutcome(job, "not_readable_yet", files=len(chosen), unsettled=unsettled, warnings=[str(exc)])
    mark_in_progress(
        summary,
        now=now,
        files=len(chosen),
        unsettled=unsettled,
        interval_minutes=env.interval_minutes,
        extra_warnings=[*ctx.warnings, *extra],
    )
    decisions = decide(summary, env.policy(), tags, ranks_possible=accelerator_count(describe.get("ResourceConfig")))
    taken, stopped = _act(clients, ctx, decisions, now)
    summary["actions"] = taken
    page = engine.render_html({**summary, "job_name": ctx.job}, sections=[live_section(summary)])
    outcome = LiveOutcome(job, "analysed", html_loc.uri, len(chosen), unsettled, stopped)
    written = put_unless_changed(
        clients.s3, html_loc, page.encode(), content_type="text/html; charset=utf-8", etag=before_html.etag
    )
    if written is not None:
        written = put_unless_changed(
            clients.s3,
            summary_loc,
            json.dumps(summary, indent=2, sort_keys=True, default=str).encode(),
            content_type="application/json",
            etag=before_summary.etag,
        )
    if written is None:
        outcome.action = "superseded"  # the final report arrived meanwhile: it stays, and its e-mail says it all
        return outcome
    # the owner's report index lists the running job (a finished job's row is never replaced by it)
    update_index(clients.s3, ctx, summary, describe=again, rules=HistoryEnv.from_environ().rules(), row_file=False)
    outcome.notified = _notify(clients, env, ctx, taken, summary_etag=written, now=now)
    return outcome
