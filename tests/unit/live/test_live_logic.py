"""The live analysis' pure parts (lambdas/live_analysis/logic.py, env.py): which jobs are due, how an in-progress
summary is marked, the banner, and the environment's one-line failures."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.live_analysis.env import EnvError, LiveEnv
from lambdas.live_analysis.jobs import due_jobs
from lambdas.live_analysis.logic import live_section, mark_in_progress
from profstack.analysis import summary_schema
from tests.functional.processing_support import processor_environ

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TB = {"S3OutputPath": "s3://profstack-traces-test/tensorboard/alice/"}


class FakeJobs:
    """SageMaker as the dispatcher sees it: ListTrainingJobs may still list a job DescribeTrainingJob calls ended."""

    def __init__(self, listed: list[str], described: dict[str, dict[str, Any]], tags: dict[str, dict[str, str]]):
        self.listed, self.described, self._tags = listed, described, tags

    def in_progress(self) -> Iterable[str]:
        return iter(self.listed)

    def describe(self, job: str) -> Mapping[str, Any] | None:
        return self.described.get(job)

    def tags(self, arn: str) -> dict[str, str]:
        return self._tags.get(arn.rsplit("/", 1)[-1], {})


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
        tags={"a": {"team": "ml"}, "off": {"team": "ml", "profstack:live": "off"}, "no-tb": {"team": "ml"}},
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
