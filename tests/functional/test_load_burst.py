"""A burst of 100 job-end events (a tenth delivered twice, shuffled, with late InProgress events) through
EventBridge, SQS and the real handler in moto: no report lost, none duplicated, one e-mail per job.
The 1,000-event version is `python -m bench.load_burst 1000` (docs/processing.md has its numbers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from bench.load_burst import run_burst
from demo.lambda_harness import patched_environ
from tests.functional.processing_support import DataPlane, create_data_plane, processor_environ


@pytest.fixture
def plane(aws_credentials: None) -> Iterator[DataPlane]:
    with mock_aws():
        plane = create_data_plane(max_receive_count=5)
        with patched_environ(processor_environ(plane.topic_arn)):
            from lambdas.trace_processor import runtime

            runtime.reset()
            yield plane
            runtime.reset()


@pytest.mark.slow
def test_a_burst_of_job_end_events_gives_one_report_and_one_email_per_job(plane: DataPlane, capsys: Any) -> None:
    # GIVEN 100 jobs ending at once, 10 of their events repeated, all shuffled, 2 late InProgress events
    result = run_burst(plane, 100)
    # THEN every event that passed the rule was received (110 Completed; InProgress never reaches the queue)
    assert result.events_sent == 112
    assert result.invocations - result.record_failures == 110
    # AND every job has exactly one summary and one report (fixed keys: a repeat overwrites, never adds)
    assert len(result.reports) == 100
    assert set(result.reports.values()) == {1}
    assert set(result.summaries.values()) == {1}
    # AND exactly one e-mail per job, and nothing dead-lettered
    assert len(result.emails) == 100
    assert set(result.emails.values()) == {1}
    assert result.dead_lettered == 0
    with capsys.disabled():
        print(f"\n100-job burst: {result.to_json(reserved_concurrency=5)}")


def test_the_bench_entry_point_runs_end_to_end(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from bench.load_burst import main

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(var, "x")  # main() sets these for moto; monkeypatch restores them afterwards

    # GIVEN `python -m bench.load_burst N` (before: it crashed on a handler attribute that no longer exists)
    # WHEN run for a few jobs THEN it drains them all and prints its JSON line
    assert main(["6"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["jobs_with_one_report"] == result["jobs_with_one_email"] == 6
    assert result["dead_lettered"] == 0
