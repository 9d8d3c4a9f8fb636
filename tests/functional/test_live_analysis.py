"""Live analysis and rule actions end to end through moto (issue 36): the dispatcher's view of which jobs run, the
analyser on real sample traces (the real engine), StopTrainingJob, the in-progress report, the e-mails, and the
final report of the trace processor that replaces it.

moto has no StopTrainingJob: `emulate_stop` answers it the way SageMaker does (a running job becomes Stopped, any
other is a ValidationException), through botocore's before-call hook on the real client. moto's Lambda needs
Docker, so the dispatcher's asynchronous invocations are recorded and delivered to the analyser's handler
in-process, as Lambda would.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from moto import mock_aws

from demo.lambda_harness import ACCOUNT, REGION, LambdaContext, patched_environ
from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.trace_processor import report_index
from profstack import layout
from profstack.analysis import summary_schema
from profstack.report import index as idx
from tests.functional.processing_support import (
    TRACE_BUCKET,
    USER,
    DataPlane,
    backdate,
    create_data_plane,
    emulate_run,
    job_event,
    processor_environ,
    register_training_job,
)
from tests.functional.test_trace_processor import drain, put_event

IDLE = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"  # LowGPUUtilization critical
BUSY = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # no GPU-idle finding
STOP_POLICY = {"stop_enabled": True, "rules": {"LowGPUUtilization": "stop"}, "stop_min_severity": "critical"}


def live_environ(topic_arn: str, **overrides: str) -> dict[str, str]:
    live = {
        "LIVE_SETTLE_SECONDS": "0",
        "LIVE_INTERVAL_MINUTES": "15",
        "ACTIONS": json.dumps(STOP_POLICY),
        "ANALYSER_FUNCTION": "profstack-live-analyser",
        "POWERTOOLS_SERVICE_NAME": "profstack-live-analysis",
    }
    return processor_environ(topic_arn, **{**live, **overrides})


def _backend_job(name: str) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT][REGION].training_jobs.get(name)


def emulate_stop(client: Any, stopped: list[str]) -> None:
    """SageMaker's StopTrainingJob on a moto client: InProgress -> Stopped; otherwise ValidationException."""

    def stop(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        name = json.loads(params["body"])["TrainingJobName"]  # the serialized request, as SageMaker receives it
        job = _backend_job(name)
        if job is None or job.training_job_status != "InProgress":
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": f"The job {name} is not in progress"}},
                "StopTrainingJob",
            )
        job.training_job_status = "Stopped"
        stopped.append(name)
        return AWSResponse("", 200, HTTPHeaders(), None), {"ResponseMetadata": {"HTTPStatusCode": 200}}

    client.meta.events.register("before-call.sagemaker.StopTrainingJob", stop)


class RecordingLambda:
    """The dispatcher's Lambda client: asynchronous invocations, recorded for delivery."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        assert kwargs["InvocationType"] == "Event"
        self.payloads.append(json.loads(kwargs["Payload"]))
        return {"StatusCode": 202}


@pytest.fixture
def plane(aws_credentials: None) -> Iterator[DataPlane]:
    with mock_aws():
        data_plane = create_data_plane()
        with patched_environ(live_environ(data_plane.topic_arn)):
            from lambdas.live_analysis import handler
            from lambdas.trace_processor import runtime

            handler._clients.cache_clear()
            runtime.reset()
            yield data_plane
            handler._clients.cache_clear()
            runtime.reset()


@pytest.fixture
def stopped() -> list[str]:
    from lambdas.live_analysis import handler

    calls: list[str] = []
    emulate_stop(handler._clients().sagemaker, calls)
    return calls


def start_job(
    plane: DataPlane,
    name: str,
    *,
    tags: dict[str, str] | None = None,
    tensorboard: bool = True,
    role_arn: str | None = None,
) -> None:
    """A training job that SageMaker reports as InProgress (moto creates jobs Completed)."""
    register_training_job(plane, name, tensorboard=tensorboard)
    job = _backend_job(name)
    job.training_job_status = "InProgress"
    job.secondary_status = "Training"
    if role_arn is not None:
        job.role_arn = role_arn
    if tags:
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
        plane.sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])


def upload_trace(plane: DataPlane, traces_dir: Path, rel: str, job: str, name: str = "worker0.pt.trace.json.gz") -> str:
    key = f"{layout.job_tensorboard_prefix(USER, job)}{name}"
    plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)
    return key


def run_dispatch_and_deliver(plane: DataPlane) -> tuple[list[str], list[dict[str, Any]]]:
    """One scheduled run: the dispatcher, then each asynchronous invocation delivered to the analyser."""
    from lambdas.live_analysis import dispatch, handler

    recorder = RecordingLambda()
    # the function's environment as deployed here (dispatch.ENV is whichever environment first imported the module)
    env = DispatchEnv.from_environ()
    result = dispatch.dispatch(sagemaker=plane.sagemaker, lambda_client=recorder, env=env)  # type: ignore[arg-type]
    outcomes = [handler.handler(payload, LambdaContext()) for payload in recorder.payloads]
    return result.invoked, outcomes


def report_of(plane: DataPlane, job: str, name: str = "summary.json") -> Any:
    body = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, job)}{name}")["Body"].read()
    return json.loads(body) if name.endswith(".json") else body.decode()


def index_rows(plane: DataPlane) -> dict[str, str]:
    """job -> status in the owner's report index (reports/<user>/index.json, profstack reports list reads it)."""
    body = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.user_reports_prefix(USER)}index.json")["Body"].read()
    return {row["job"]: row["status"] for row in json.loads(body)["jobs"]}


def keys(plane: DataPlane, prefix: str) -> list[str]:
    return plane.list_keys(prefix)


def test_whole_path_the_job_that_idles_its_gpus_is_stopped_and_the_busy_one_is_left_alone(
    plane: DataPlane,
    traces_dir: Path,
    stopped: list[str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN a deployment that stops on LowGPUUtilization, and two running jobs that both opted in to stopping:
    # one idles its GPUs (alexnet sample, GPU busy ~7%), the other keeps them busy
    start_job(plane, "idle-job", tags={"profstack:actions": "stop"})
    start_job(plane, "busy-job", tags={"profstack:actions": "stop"})
    upload_trace(plane, traces_dir, IDLE, "idle-job")
    upload_trace(plane, traces_dir, BUSY, "busy-job")
    # WHEN the scheduled run dispatches and the analyser handles each job
    due, outcomes = run_dispatch_and_deliver(plane)
    assert due == ["busy-job", "idle-job"]
    by_job = {o["job"]: o for o in outcomes}
    # THEN the idle job is stopped by its rule, and only it
    assert stopped == ["idle-job"]
    assert by_job["idle-job"]["action"] == "analysed"
    assert by_job["idle-job"]["stopped"] == ["LowGPUUtilization"]
    assert by_job["busy-job"]["action"] == "analysed"
    assert by_job["busy-job"]["stopped"] == []
    assert plane.sagemaker.describe_training_job(TrainingJobName="busy-job")["TrainingJobStatus"] == "InProgress"
    # AND both got an in-progress report at the job's report keys, marked in_progress
    idle, busy = report_of(plane, "idle-job"), report_of(plane, "busy-job")
    for summary in (idle, busy):
        jsonschema.Draft202012Validator(summary_schema()).validate(summary)  # schema 1.5
    assert idle["in_progress"] is True
    assert busy["in_progress"] is True
    assert idle["complete"] is False
    assert idle["live"]["trace_files"] == 1
    (stop,) = [a for a in idle["actions"] if a["action"] == "stop"]
    assert stop["rule_id"] == "LowGPUUtilization"
    assert stop["result"] == "stopped"
    assert not [a for a in busy["actions"] if a["action"] == "stop"]
    assert "ProfStack stopped this training job: LowGPUUtilization" in report_of(plane, "idle-job", "report.html")
    assert "In progress" in report_of(plane, "busy-job", "report.html")
    # AND the owner's report index lists both as running (profstack reports list, index.html)
    assert index_rows(plane) == {"idle-job": "InProgress", "busy-job": "InProgress"}
    # AND the stop is logged and published as a metric
    assert any(
        r.getMessage() == "training job stopped by a rule action" and getattr(r, "rules", None) == ["LowGPUUtilization"]
        for r in caplog.records
    )
    out = capsys.readouterr().out
    emf = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]
    assert any(doc.get("LiveJobsStopped") == [1.0] or doc.get("LiveJobsStopped") == 1.0 for doc in emf)
    # AND e-mailed: the stop for the idle job
    mails = plane.notifications()
    subjects = sorted(m["Subject"] for m in mails)
    assert "ProfStack stopped idle-job (LowGPUUtilization)" in subjects
    assert not any("stopped busy-job" in s for s in subjects)

    # WHEN SageMaker reports the stopped job's end and the trace processor writes the final report
    now = datetime.now(UTC)
    emulate_run("idle-job", start=now - timedelta(hours=1), end=now, status="Stopped")
    put_event(plane, job_event("idle-job", "Stopped"))
    drain(plane)
    # THEN the final report replaced the in-progress one, and it and its e-mail state the stop
    final = report_of(plane, "idle-job")
    jsonschema.Draft202012Validator(summary_schema()).validate(final)
    assert "in_progress" not in final
    assert [a["result"] for a in final["actions"] if a["action"] == "stop"] == ["stopped"]
    # AND its index row is the final one, and a live run that lost the race afterwards cannot bring it back
    assert index_rows(plane)["idle-job"] == "Stopped"
    late = idx.index_row(final, job="idle-job", status=idx.RUNNING, ended_at=now)
    report_index.commit_row(plane.s3, TRACE_BUCKET, USER, late)
    assert index_rows(plane)["idle-job"] == "Stopped"
    (final_mail,) = [m for m in plane.notifications() if "Stopped" in m["Subject"]]
    assert "ProfStack stopped this training job: LowGPUUtilization" in final_mail["Message"]


def test_a_stop_rule_without_the_jobs_own_opt_in_only_notifies_and_says_why(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    # GIVEN an idle job that does not carry profstack:actions=stop
    start_job(plane, "idle-untagged")
    upload_trace(plane, traces_dir, IDLE, "idle-untagged")
    # WHEN analysed twice (two scheduled runs)
    run_dispatch_and_deliver(plane)
    run_dispatch_and_deliver(plane)
    # THEN it runs on; the report says the rule would have stopped it and why not
    assert stopped == []
    assert plane.sagemaker.describe_training_job(TrainingJobName="idle-untagged")["TrainingJobStatus"] == "InProgress"
    summary = report_of(plane, "idle-untagged")
    (low,) = [a for a in summary["actions"] if a["rule_id"] == "LowGPUUtilization"]
    assert low["action"] == "notify"
    assert "profstack:actions=stop" in low["reason"]
    assert "would stop this job" in report_of(plane, "idle-untagged", "report.html")
    # AND the findings were e-mailed once, not once per run
    mails = plane.notifications()
    assert len(mails) == 1
    assert "idle-untagged is running" in mails[0]["Subject"]


def test_only_jobs_sagemaker_reports_running_are_analysed_whatever_the_events_said(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    from lambdas.live_analysis import handler

    # GIVEN a running job whose InProgress event was lost (nothing ever told ProfStack it started) ...
    start_job(plane, "lost-event")
    # ... a finished job whose InProgress event arrives after its Completed one (reordered) ...
    register_training_job(plane, "finished")
    # ... a running job that turned live analysis off, and one without a TensorBoard output
    start_job(plane, "opted-out", tags={"profstack:live": "OFF "})
    start_job(plane, "no-tb", tensorboard=False)
    for job in ("lost-event", "finished", "opted-out", "no-tb"):
        upload_trace(plane, traces_dir, IDLE, job)
    # WHEN the scheduled run dispatches
    due, outcomes = run_dispatch_and_deliver(plane)
    # THEN only the running, eligible job is analysed: the lost event changes nothing
    assert due == ["lost-event"]
    assert [o["action"] for o in outcomes] == ["analysed"]
    # AND the late InProgress of the finished job (delivered to the analyser as if due) is refused from SageMaker's
    # view, before anything is read or written; so are the opted-out and TensorBoard-less jobs
    env, clients, engine = handler.ENV, handler._clients(), handler._engine()
    from lambdas.live_analysis.logic import analyse_job

    assert analyse_job("finished", env=env, clients=clients, engine=engine).action == "not_running"
    assert analyse_job("opted-out", env=env, clients=clients, engine=engine).action == "live_off"
    assert analyse_job("no-tb", env=env, clients=clients, engine=engine).action == "no_tensorboard"
    assert analyse_job("never-existed", env=env, clients=clients, engine=engine).action == "not_running"
    for job in ("finished", "opted-out", "no-tb"):
        assert keys(plane, layout.job_reports_prefix(USER, job)) == []
    # AND an input that is not a job name is refused in one line
    with pytest.raises(handler.BadInputError, match="training job name"):
        handler.handler({"job": "../bob"}, LambdaContext())


def test_a_running_job_without_trace_objects_costs_a_listing_and_writes_nothing(
    plane: DataPlane, stopped: list[str]
) -> None:
    start_job(plane, "no-traces-yet")
    _, outcomes = run_dispatch_and_deliver(plane)
    assert [o["action"] for o in outcomes] == ["no_traces"]
    assert keys(plane, "reports/") == []
    assert plane.notifications() == []


def test_files_still_being_written_are_skipped_not_reported_as_corrupt(
    plane: DataPlane, traces_dir: Path, stopped: list[str], tmp_path: Path
) -> None:
    from lambdas.live_analysis import handler
    from lambdas.live_analysis.env import LiveEnv
    from lambdas.live_analysis.logic import analyse_job

    start_job(plane, "writing", tags={"profstack:actions": "stop"})
    env = LiveEnv.from_environ(live_environ(plane.topic_arn, LIVE_SETTLE_SECONDS="120"))
    clients, engine = handler._clients(), handler._engine()
    # GIVEN only a file uploaded just now (younger than the settle time)
    upload_trace(plane, traces_dir, BUSY, "writing", "worker0.pt.trace.json.gz")
    now = datetime.now(UTC)
    # THEN nothing is analysed yet
    outcome = analyse_job("writing", env=env, clients=clients, engine=engine, now=now)
    assert (outcome.action, outcome.unsettled) == ("not_settled", 1)
    assert keys(plane, layout.job_reports_prefix(USER, "writing")) == []
    # GIVEN later, a second rank whose gzip has not been finished (cut mid-stream)
    whole = (traces_dir / IDLE).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    plane.s3.upload_file(
        str(cut), TRACE_BUCKET, f"{layout.job_tensorboard_prefix(USER, 'writing')}worker1.pt.trace.json.gz"
    )
    later = now + timedelta(minutes=5)
    outcome = analyse_job("writing", env=env, clients=clients, engine=engine, now=later)
    # THEN the settled files are analysed; the cut one is stated as still being written, not as corrupt
    assert outcome.action == "analysed"
    summary = report_of(plane, "writing")
    assert not [f for f in summary["findings"] if f["rule_id"] == "UnreadableTraceFiles"]
    (warning,) = [w for w in summary["warnings"] if w.get("error_type") == "LiveInputIncomplete"]
    assert "worker1.pt.trace.json.gz" in warning["message"]
    assert summary["live"]["incomplete_files"] == 1
    # AND a stop never rests on a file that was not read in full: the cut idle rank looks idle, yet the job runs on
    assert stopped == []
    low = [a for a in summary["actions"] if a["rule_id"] == "LowGPUUtilization"]
    assert low
    assert all(a["action"] == "notify" and "not read in full" in a["reason"] for a in low)


def test_the_final_report_is_never_overwritten_by_an_in_progress_one(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    from lambdas.live_analysis import handler
    from lambdas.live_analysis.logic import analyse_job

    env, clients = handler.ENV, handler._clients()
    start_job(plane, "racing")
    upload_trace(plane, traces_dir, BUSY, "racing")
    final_key = f"{layout.job_reports_prefix(USER, 'racing')}summary.json"

    class FinishingEngine:
        """The real engine; while it analyses, the job ends and the processor writes the final report."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def analyze(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            result: dict[str, Any] = self._inner.analyze(*args, **kwargs)
            plane.s3.put_object(Bucket=TRACE_BUCKET, Key=final_key, Body=b'{"final": true}')
            return result

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    # WHEN the final report lands while an in-progress analysis runs
    outcome = analyse_job("racing", env=env, clients=clients, engine=FinishingEngine(handler._engine()))
    # THEN the in-progress report gives way
    assert outcome.action == "superseded"
    assert report_of(plane, "racing") == {"final": True}
    # AND a later run sees the final report and writes nothing
    assert analyse_job("racing", env=env, clients=clients, engine=handler._engine()).action == "final_report_exists"
    assert report_of(plane, "racing") == {"final": True}


def test_a_job_whose_owner_nothing_confirms_gets_no_live_report_and_no_action(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    # GIVEN an idle job that claims alice by tag and opts in to stopping, but runs as a role that is not hers
    start_job(
        plane,
        "claimed",
        tags={"profstack:actions": "stop"},
        role_arn=f"arn:aws:iam::{ACCOUNT}:role/SomeTeamRole",
    )
    upload_trace(plane, traces_dir, IDLE, "claimed")
    due, outcomes = run_dispatch_and_deliver(plane)
    # THEN the dispatcher does not even invoke the analyser for it (it is no one's: it cannot take alice's turns)
    assert (due, outcomes) == ([], [])
    # AND the analyser, invoked anyway, analyses, writes, e-mails and stops nothing (the final report goes to
    # _unowned, docs/security.md)
    from lambdas.live_analysis import handler

    assert handler.handler({"job": "claimed"}, LambdaContext())["action"] == "unverified_owner"
    assert stopped == []
    assert keys(plane, "reports/") == []
    assert plane.notifications() == []


# --- evidence: only what this run wrote may decide a stop (#42 item 7) -------------------------------------------


def test_traces_planted_before_the_job_or_its_training_started_stop_nothing_and_are_named(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    """Before: the stop acted on any object in the job's folder, newest first: one planted idle trace stopped it."""
    # GIVEN a running job that opted in to stopping, created two hours ago, training for the last 30 minutes
    start_job(plane, "planted-run", tags={"profstack:actions": "stop"})
    now = datetime.now(UTC)
    job = _backend_job("planted-run")
    job.creation_time = now - timedelta(hours=2)
    job.training_start_time = now - timedelta(minutes=30)
    # AND two idle traces in its folder, named to sort last (newest first): one planted before the job existed,
    # one after it was created but before its training started; and the job's own busy trace
    before_job = upload_trace(plane, traces_dir, IDLE, "planted-run", "zz-before-job.pt.trace.json.gz")
    backdate(before_job, now - timedelta(hours=3))
    before_training = upload_trace(plane, traces_dir, IDLE, "planted-run", "zz-before-training.pt.trace.json.gz")
    backdate(before_training, now - timedelta(hours=1))
    upload_trace(plane, traces_dir, BUSY, "planted-run", "algo-1.pt.trace.json.gz")
    # WHEN the scheduled run analyses it
    _, (outcome,) = run_dispatch_and_deliver(plane)
    # THEN it runs on: its own trace is analysed, the planted ones are not, and no action rests on them
    assert stopped == []
    assert outcome["action"] == "analysed"
    assert plane.sagemaker.describe_training_job(TrainingJobName="planted-run")["TrainingJobStatus"] == "InProgress"
    summary = report_of(plane, "planted-run")
    assert [i["name"].rsplit("/", 1)[-1] for i in summary["inputs"]] == ["algo-1.pt.trace.json.gz"]
    assert not [a for a in summary["actions"] if a["action"] == "stop"]
    (warning,) = [w for w in summary["warnings"] if w.get("error_type") == "LiveFilesNotEvidence"]
    assert f"s3://{TRACE_BUCKET}/{before_job} (written before the job was created)" in warning["message"]
    assert f"s3://{TRACE_BUCKET}/{before_training} (written before the job's training started)" in warning["message"]


def test_a_trace_claiming_a_rank_the_job_cannot_have_stops_nothing(
    plane: DataPlane, traces_dir: Path, stopped: list[str], tmp_path: Path
) -> None:
    # GIVEN a running job on 2 x ml.p4d.24xlarge (16 GPUs: ranks 0-15) that opted in to stopping
    start_job(plane, "rank-claim", tags={"profstack:actions": "stop"})
    # AND an idle trace written while it runs that says it is rank 63 (distributedInfo)
    doc = json.loads(gzip.decompress((traces_dir / IDLE).read_bytes()))
    doc["distributedInfo"] = {"rank": 63, "world_size": 64}
    forged = tmp_path / "rank63.pt.trace.json.gz"
    forged.write_bytes(gzip.compress(json.dumps(doc).encode()))
    plane.s3.upload_file(
        str(forged), TRACE_BUCKET, f"{layout.job_tensorboard_prefix(USER, 'rank-claim')}r63.pt.trace.json.gz"
    )
    # WHEN analysed
    _, (outcome,) = run_dispatch_and_deliver(plane)
    # THEN the idle finding is reported, but it stops nothing: rank 63 is not one this job can have
    assert outcome["action"] == "analysed"
    assert stopped == []
    (low,) = [a for a in report_of(plane, "rank-claim")["actions"] if a["rule_id"] == "LowGPUUtilization"]
    assert low["action"] == "notify"
    assert "rank 63 behind the finding is beyond the job's 16 GPUs" in low["reason"]


# --- no live e-mail after the final one (#42 item 12) ----------------------------------------------------------


def _finish(plane: DataPlane, job: str) -> None:
    """SageMaker ends the job; its event reaches the trace processor, which writes the final report and e-mail."""
    now = datetime.now(UTC)
    emulate_run(job, start=now - timedelta(hours=1), end=now, status="Completed")
    put_event(plane, job_event(job, "Completed"))
    drain(plane)


def test_a_live_run_overtaken_after_writing_its_report_sends_no_email_after_the_final_one(
    plane: DataPlane, traces_dir: Path, stopped: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.live_analysis import logic

    # GIVEN a running job whose GPUs idle (a new LowGPUUtilization finding: a live e-mail is due)
    start_job(plane, "overtaken")
    upload_trace(plane, traces_dir, IDLE, "overtaken")
    real_update_index = logic.update_index

    def index_then_job_ends(*args: Any, **kwargs: Any) -> Any:
        # WHEN, after the live run wrote its in-progress report and before it e-mails, the job ends and the final
        # report and its e-mail go out
        result = real_update_index(*args, **kwargs)
        _finish(plane, "overtaken")
        return result

    monkeypatch.setattr(logic, "update_index", index_then_job_ends)
    _, (outcome,) = run_dispatch_and_deliver(plane)
    # THEN the only e-mail is the final one: no "is running, 1 new finding(s)" after it (before: there was)
    mails = plane.notifications()
    assert [m["Subject"] for m in mails] == [m["Subject"] for m in mails if "Completed" in m["Subject"]]
    assert len(mails) == 1
    assert outcome["notified"] is False
    assert "in_progress" not in report_of(plane, "overtaken")  # the final report stands


def test_a_live_run_superseded_while_it_analyses_sends_no_email(
    plane: DataPlane, traces_dir: Path, stopped: list[str]
) -> None:
    from lambdas.live_analysis import handler
    from lambdas.live_analysis.logic import analyse_job

    start_job(plane, "superseded")
    upload_trace(plane, traces_dir, IDLE, "superseded")

    class FinishingEngine:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def analyze(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            result: dict[str, Any] = self._inner.analyze(*args, **kwargs)
            _finish(plane, "superseded")  # the final report and e-mail land while this run analyses
            return result

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    outcome = analyse_job(
        "superseded", env=handler.ENV, clients=handler._clients(), engine=FinishingEngine(handler._engine())
    )
    # THEN the run gives way and e-mails nothing (before: "is running, N new finding(s)" after the final e-mail)
    assert outcome.action == "superseded"
    assert outcome.notified is False
    (final,) = plane.notifications()
    assert final["Subject"].startswith("ProfStack: superseded Completed")


def test_a_final_email_waits_for_a_live_email_already_going_out(
    plane: DataPlane, traces_dir: Path, stopped: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from lambdas.trace_processor import aws as tp_aws

    # GIVEN a running job with a new finding, and a live run that is publishing its e-mail (slowly) when the job
    # ends and the final report's e-mail is sent
    start_job(plane, "photo-finish")
    upload_trace(plane, traces_dir, IDLE, "photo-finish")
    real_publish = tp_aws.publish
    order: list[str] = []
    finisher: list[threading.Thread] = []

    def publish(sns: Any, **kwargs: Any) -> None:
        if kwargs["attributes"]["status"] == "InProgress" and not finisher:
            thread = threading.Thread(target=_finish, args=(plane, "photo-finish"))
            finisher.append(thread)
            thread.start()
            thread.join(timeout=3)  # the final e-mail has every chance to overtake this one
        order.append(kwargs["attributes"]["status"])
        real_publish(sns, **kwargs)

    monkeypatch.setattr(tp_aws, "publish", publish)
    run_dispatch_and_deliver(plane)
    finisher[0].join(timeout=30)
    # THEN the final e-mail went out after the live one (it waited for the live lock), never before it
    assert order == ["InProgress", "Completed"]
    subjects = [m["Subject"] for m in plane.notifications()]
    assert len(subjects) == 2
    assert plane.list_keys(f"{layout.job_reports_prefix(USER, 'photo-finish')}.notified-live-lock") == []


def test_a_lock_left_by_a_dead_live_run_delays_the_final_email_at_most_its_age_limit(plane: DataPlane) -> None:
    from lambdas.trace_processor.aws import S3Location
    from lambdas.trace_processor.notification import LIVE_LOCK, LIVE_LOCK_MAX_AGE_S, wait_for_live_notification

    folder = S3Location(TRACE_BUCKET, layout.job_reports_prefix(USER, "dead-run"))
    # GIVEN no lock: no wait
    assert wait_for_live_notification(plane.s3, folder, sleep=lambda _: None) == 0
    # GIVEN a lock a live run took and never released (it died)
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=folder.child(LIVE_LOCK).key, Body=b"")
    now = [datetime.now(UTC).timestamp()]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    # WHEN the final e-mail checks it THEN it waits until the lock is LIVE_LOCK_MAX_AGE_S old, then goes
    waited = wait_for_live_notification(plane.s3, folder, sleep=sleep, clock=lambda: now[0])
    assert LIVE_LOCK_MAX_AGE_S - 2 <= waited <= LIVE_LOCK_MAX_AGE_S + 2
