"""The EventBridge rule pattern and the event model, against the real-shaped fixtures in tests/events."""

from __future__ import annotations

import json

import pytest
from moto.events.models import EventPattern

from lambdas.trace_processor.events import EventError, parse_event
from profstack.config import JobTagFilter
from stacks.components.job_events import training_job_event_pattern
from tests.functional.processing_support import load_event

MATCHING = [
    "sagemaker_training_job_completed.json",
    "sagemaker_training_job_failed.json",
    "sagemaker_training_job_stopped.json",
    "sagemaker_training_job_completed_untagged.json",
]
NOT_MATCHING = [
    "sagemaker_training_job_in_progress.json",
    "sagemaker_processing_job_completed.json",
    "ec2_instance_state_change.json",
]


def _matches(pattern: dict[str, object], event: dict[str, object]) -> bool:
    return bool(EventPattern.load(json.dumps(pattern)).matches_event(event))


@pytest.mark.parametrize("fixture", MATCHING)
def test_rule_matches_finished_training_jobs(fixture: str) -> None:
    # GIVEN the rule pattern without a tag filter WHEN a finished-job event arrives THEN it matches
    assert _matches(training_job_event_pattern(None), load_event(fixture))


@pytest.mark.parametrize("fixture", NOT_MATCHING)
def test_rule_ignores_other_events(fixture: str) -> None:
    # GIVEN the rule pattern WHEN a running job, another SageMaker event or another service's event arrives
    # THEN it does not match
    assert not _matches(training_job_event_pattern(None), load_event(fixture))


def test_tag_filter_selects_only_tagged_jobs() -> None:
    # GIVEN a rule that only wants jobs tagged team=vision
    pattern = training_job_event_pattern(JobTagFilter(key="team", value="vision"))
    tagged = load_event("sagemaker_training_job_completed.json")
    untagged = load_event("sagemaker_training_job_completed_untagged.json")
    other_team = load_event("sagemaker_training_job_completed.json")
    other_team["detail"]["Tags"]["team"] = "nlp"
    # WHEN / THEN only the job with the matching tag value matches
    assert _matches(pattern, tagged)
    assert not _matches(pattern, untagged)
    assert not _matches(pattern, other_team)


def test_event_model_reads_the_fields_the_processor_needs() -> None:
    # GIVEN the Completed fixture WHEN parsed THEN name, status, owner tag and end time are typed
    event = parse_event(json.dumps(load_event("sagemaker_training_job_completed.json")))
    assert event.job_name == "resnet-ddp-2026-11-29-13-10-05-123"
    assert event.status == "Completed"
    assert event.is_terminal
    assert event.detail.tags["profstack:user"] == "alice"
    assert event.detail.training_end_time == 1796565600000
    assert event.detail.output_data_config is not None
    assert event.detail.output_data_config.s3_output_path == "s3://example-models/output"


def test_in_progress_event_parses_but_is_not_terminal() -> None:
    # GIVEN an InProgress event (the rule filters it, but SQS could still carry one) THEN it is not terminal
    assert not parse_event(load_event("sagemaker_training_job_in_progress.json")).is_terminal


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "not JSON"),
        (json.dumps({"hello": "world"}), "not a training-job state-change event"),
        (json.dumps(load_event("ec2_instance_state_change.json")), "source"),
    ],
)
def test_malformed_bodies_raise_one_line_errors(body: str, message: str) -> None:
    # GIVEN a body that is not a training-job event WHEN parsed THEN a one-line EventError says why
    with pytest.raises(EventError, match=message) as info:
        parse_event(body)
    assert "\n" not in str(info.value)
