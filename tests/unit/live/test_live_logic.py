"""The live analysis' pure parts (lambdas/live_analysis/logic.py, env.py): which jobs are due, how an in-progress
summary is marked, the banner, and the environment's one-line failures."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from botocore.exceptions import ClientError

from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.live_analysis.env import EnvError, LiveEnv
from lambdas.live_analysis.jobs import Budget, DispatchError, DispatchState, OwnerRules, run
from lambdas.live_analysis.logic import _choose, live_section, mark_in_progress
from lambdas.trace_processor.aws import S3Object
from profstack.analysis import summary_schema
from tests.functional.processing_support import processor_environ

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TB = {"S3OutputPath": "s3://profstack-traces-test/tensorboard/alice/"}


class FakeJobs:
    """SageMaker as the dispatcher sees it: ListTrainingJobs may still list a job DescribeTrainingJob calls ended."""

    def __init__(self, listed: list[str], described: dict[str, dict[str, Any]], tags: dict[str, dict[str, str]]):
        self.listed, self.described, self._tags = listed, described, tags

    def running_page(self, token: str | None) -> tuple[list[str], str | None]:
        start = int(token or 0)
        return self.listed[start : start + 2], (str(start + 2) if start + 2 < len(self.listed) else None)

    def describe(self, job: str) -> Mapping[str, Any] | None:
        return self.described.get(job)

    def tags(self, arn: str) -> dict[str, str]:
        return self._tags.get(arn.rsplit("/", 1)[-1], {"profstack:user": "alice"})


RULES = OwnerRules(users=frozenset({"alice", "bob"}), ownership="tag")


def due_jobs(jobs: FakeJobs, tag_filter: tuple[str, str] | None, failures: list[str] | None = None) -> list[str]:
    result = run(
        jobs, lambda _: None, rules=RULES, tag_filter=tag_filter, state=DispatchState(), budget=Budget(60, lambda: 0.0)
    )
    if failures is not None:
        failures.extend(result.failures)
    return result.invoked


def _job(name: str, status: str = "InProgress", tb: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"TrainingJobName": name, "TrainingJobStatus": status, "TrainingJobArn": f"arn:x/{name}"}
    if tb:
        d["TensorBoardOutputConfig"] = TB
    return d


def test_due_jobs_trust_describe_over_the_listing_and_apply_every_opt_out() -> None:
    jobs = FakeJobs(
        listed=["a", "a", "ended-since-listing", "gone", "off", "no-tb", "unfiltered"],
        described={
            "a": _job("a"),
            "ended-since-listing": _job("ended-since-listing", "Completed"),
            "off": _job("off"),
            "no-tb": _job("no-tb", tb=False),
            "unfiltered": _job("unfiltered"),
        },
        tags={
            "a": {"team": "ml", "profstack:user": "alice"},
            "off": {"team": "ml", "profstack:user": "alice", "profstack:live": "off"},
            "no-tb": {"team": "ml", "profstack:user": "alice"},
        },
    )
    assert due_jobs(jobs, ("team", "ml")) == ["a"]
    assert due_jobs(jobs, None) == ["a", "unfiltered"]


def test_an_in_progress_summary_validates_against_the_schema_and_says_what_it_covers() -> None:
    summary: dict[str, Any] = json.loads((FIXTURES / "summary_example.json").read_text())
    mark_in_progress(summary, now=datetime(2026, 12, 4, 5, 0, tzinfo=UTC), files=3, unsettled=1, interval_minutes=15)
    summary["actions"] = [
        {"rule_id": "LowGPUUtilization", "action": "stop", "severity": "critical", "message": "m", "reason": None,
         "at": "2026-12-04T05:00:00Z", "result": "stopped"}
    ]  # fmt: skip
    jsonschema.Draft202012Validator(summary_schema()).validate(summary)
    assert summary["in_progress"] is True
    assert summary["complete"] is False
    # the fixture's corrupt file is stated as still being written, and its finding is not reported live
    assert not [f for f in summary["findings"] if f["rule_id"] == "UnreadableTraceFiles"]
    assert [w["error_type"] for w in summary["warnings"] if w.get("error_type") == "LiveInputIncomplete"] == [
        "LiveInputIncomplete"
    ]
    assert summary["live"] == {
        "analysed_at": "2026-12-04T05:00:00Z",
        "trace_files": 3,
        "unsettled_files": 1,
        "incomplete_files": 1,
        "interval_minutes": 15,
    }


def test_the_banner_escapes_whatever_a_finding_says() -> None:
    summary = {
        "live": {"trace_files": 1, "analysed_at": "<now>", "interval_minutes": 15},
        "actions": [{"rule_id": "<script>", "action": "stop", "result": "stopped"}],
    }
    html = live_section(summary)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_environments_fail_in_one_line_at_cold_start() -> None:
    base = processor_environ("arn:aws:sns:us-east-1:123456789012:t")
    with pytest.raises(EnvError, match="notify or stop"):
        LiveEnv.from_environ({**base, "ACTIONS": json.dumps({"rules": {"LowGPUUtilization": "reboot"}})})
    with pytest.raises(EnvError, match="LIVE_SETTLE_SECONDS"):
        LiveEnv.from_environ({**base, "LIVE_SETTLE_SECONDS": "-1"})
    assert LiveEnv.from_environ(base).policy().stop_enabled is False  # no ACTIONS: nothing stops
    with pytest.raises(EnvError, match="TAG_FILTER"):
        DispatchEnv.from_environ({"ANALYSER_FUNCTION": "f", "TAG_FILTER_KEY": "team"})


class DeniedFor(FakeJobs):
    def __init__(self, denied: str, *args: Any) -> None:
        super().__init__(*args)
        self.denied = denied

    def describe(self, job: str) -> Mapping[str, Any] | None:
        if job == self.denied:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeTrainingJob")
        return super().describe(job)


def test_a_job_that_cannot_be_judged_never_keeps_the_others_from_being_dispatched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANALYSER_FUNCTION", "live-analyser")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    from lambdas.live_analysis import dispatch

    jobs = DeniedFor("b", ["a", "b", "c"], {"a": _job("a"), "c": _job("c")}, {})
    failures: list[str] = []
    assert due_jobs(jobs, None, failures=failures) == ["a", "c"]
    assert failures == ["b: AccessDeniedException"]

    invoked: list[str] = []

    class Lambda:
        def invoke(self, **kwargs: Any) -> dict[str, Any]:
            invoked.append(json.loads(kwargs["Payload"])["job"])
            return {"StatusCode": 202}

    monkeypatch.setattr(dispatch, "TrainingJobs", lambda _client: jobs)
    # WHEN the dispatcher runs THEN a and c are invoked, and then the run fails naming b (the Errors alarm fires)
    env = DispatchEnv.from_environ({"ANALYSER_FUNCTION": "f", "USERS": '["alice"]', "OWNERSHIP": "tag"})
    with pytest.raises(DispatchError, match="b: AccessDeniedException"):
        dispatch.dispatch(sagemaker=None, lambda_client=Lambda(), env=env)  # type: ignore[arg-type]
    assert sorted(invoked) == ["a", "c"]


def test_a_run_analyses_the_newest_files_within_its_caps() -> None:
    env = LiveEnv.from_environ(
        processor_environ("arn:aws:sns:us-east-1:123456789012:t", LIVE_MAX_FILES="2", FANOUT_BYTES_THRESHOLD="250")
    )
    t0 = datetime(2026, 12, 4, 5, 0, tzinfo=UTC)
    files = [
        S3Object("b", f"k{i}", size, modified=t0 + timedelta(minutes=i)) for i, size in enumerate([100, 100, 200, 100])
    ]
    chosen, warnings = _choose(files, env)
    # the newest two are k3 (100) and k2 (200): both would exceed the 250-byte budget, so k2 is left out too
    assert [c.key for c in chosen] == ["k3"]
    assert warnings[0]["error_type"] == "LiveFilesLeftOut"
    assert "3 of 4" in warnings[0]["message"]
