"""What one job may touch (lambdas/trace_processor/scope.py, profstack/layout.py): owner folders, path
tricks, extra prefix templates, the session policy, and full-match name patterns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lambdas.trace_processor.aws import S3Location
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.events import EventError, parse_event
from lambdas.trace_processor.scope import SESSION_POLICY_MAX_CHARS, owned_tensorboard, read_prefixes, session_policy
from profstack import layout
from tests.infra.iam_eval import Request, is_allowed

BUCKET = "traces-bucket"


def _env(**overrides: str) -> ProcessorEnv:
    values = {
        "TRACE_BUCKET": BUCKET,
        "IDEMPOTENCY_TABLE": "t",
        "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:t",
        "USERS": '["alice", "bob", "alice2"]',
    }
    values.update(overrides)
    return ProcessorEnv.from_environ(values)


@pytest.mark.parametrize(
    "path",
    [
        f"s3://{BUCKET}/traces/",
        f"s3://{BUCKET}/tensorboard/",
        f"s3://{BUCKET}/tensorboard/bob/",
        f"s3://{BUCKET}/tensorboard/alice2/",  # a prefix of the name is not the user
        f"s3://{BUCKET}/tensorboard/alice",  # no trailing slash: tensorboard/alice/<job>/ would be ok ...
        f"s3://{BUCKET}/tensorboard/alice/../bob/",
        f"s3://{BUCKET}/tensorboard/alice/./x/",
        f"s3://{BUCKET}/tensorboard/alice/%2e%2e/bob/",
        f"s3://{BUCKET}/tensorboard/alice//x/",
        f"s3://{BUCKET}/tensorboard/alice/x\n/",
        f"s3://{BUCKET}/reports/alice/",
        "s3://other-bucket/tensorboard/alice/",
        "https://example.com/tensorboard/alice/",
    ],
)
def test_tensorboard_outputs_outside_the_owners_space_are_ignored_with_a_warning(path: str) -> None:
    folder, warnings = owned_tensorboard(path, "alice", "j1", _env())
    if path == f"s3://{BUCKET}/tensorboard/alice":
        # ... because child() joins: s3://bucket/tensorboard/alice + j1 -> tensorboard/alice/j1/
        assert folder is not None
        assert folder.key == "tensorboard/alice/j1/"
        return
    assert folder is None
    (warning,) = warnings
    assert warning["error_type"] == "TensorBoardOutputOutsideOwner"
    assert warning["fatal"] is False
    assert "tensorboard/alice/" in warning["message"]


@pytest.mark.parametrize("path", [f"s3://{BUCKET}/tensorboard/alice/", f"s3://{BUCKET}/tensorboard/alice/exp/"])
def test_tensorboard_outputs_in_the_owners_space_are_kept(path: str) -> None:
    folder, warnings = owned_tensorboard(path, "alice", "j1", _env())
    assert folder is not None
    assert folder.uri == f"{path}j1/"
    assert warnings == []


@given(st.text(alphabet=st.sampled_from("ab./%-_\n"), max_size=20))
def test_no_tensorboard_path_escapes_the_owners_folder(tail: str) -> None:
    # GIVEN any path under alice's TensorBoard prefix, made of dots, slashes and odd characters
    folder, _ = owned_tensorboard(f"s3://{BUCKET}/tensorboard/alice/{tail}", "alice", "j1", _env())
    # THEN a kept folder is plain (no dot segment, no empty segment) and inside tensorboard/alice/
    if folder is not None:
        assert folder.key.startswith("tensorboard/alice/")
        assert layout.is_plain_prefix(folder.key)
        assert "/../" not in f"/{folder.key}"
        assert "//" not in folder.key


def test_read_prefixes_are_the_owners_job_folders_only() -> None:
    env = _env(EXTRA_TRACE_PREFIXES='["s3://team/runs/{user}/{job}/", "s3://team/x/{user}/y/{job}/"]')
    tb = S3Location(BUCKET, "tensorboard/alice/exp/j1/")
    assert [p.uri for p in read_prefixes("alice", "j1", tb, env)] == [
        f"s3://{BUCKET}/tensorboard/alice/exp/j1/",
        f"s3://{BUCKET}/traces/alice/j1/",
        f"s3://{BUCKET}/tensorboard/alice/j1/",
        "s3://team/runs/alice/j1/",
        "s3://team/x/alice/y/j1/",
    ]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("s3://team/profiles", "must contain"),
        ("s3://team/profiles/{user}/", "must contain"),
        ("s3://team/profiles/{job}/", "must contain"),
        ("s3://team/{job}/{user}/", "before"),
        ("s3://team/p-{user}/{job}/", "must contain"),  # placeholders are whole segments
        ("s3://team/{user}/{user}/{job}/", "must contain"),
        ("s3://team/../{user}/{job}/", "not a plain"),
        ("s3://team/a//{user}/{job}/", "empty"),
        ("s3://team/{owner}/{user}/{job}/", "not a plain"),
    ],
)
def test_extra_prefix_templates_are_validated(template: str, problem: str) -> None:
    with pytest.raises(layout.LayoutError, match=problem):
        layout.check_prefix_template(template)


def test_extra_prefix_templates_are_validated_in_the_config(example_config: Any) -> None:
    from profstack.config import ConfigError, parse_config

    data = json.loads(example_config.model_dump_json())
    data["processing"]["extra_trace_prefixes"] = ["s3://team-bucket/profiles"]
    with pytest.raises(ConfigError, match=r"processing\.extra_trace_prefixes"):
        parse_config(data)
    data["processing"]["extra_trace_prefixes"] = ["s3://team-bucket/profiles/{user}/{job}"]
    assert parse_config(data).processing.extra_trace_prefixes == ["s3://team-bucket/profiles/{user}/{job}/"]


def test_template_expansion_fills_whole_segments_and_refuses_odd_names() -> None:
    template = "s3://team/runs/{user}/{job}/"
    assert layout.expand_prefix_template(template, user="alice", job="j1") == "s3://team/runs/alice/j1/"
    assert layout.expand_prefix_template(template, user="alice", job=None) == "s3://team/runs/alice/"
    for user in ("..", "a/b", "bob\n", ""):
        with pytest.raises(layout.LayoutError):
            layout.expand_prefix_template(template, user=user, job="j1")


def test_session_policy_is_compact_and_exact() -> None:
    prefixes = [S3Location(BUCKET, "traces/alice/j1/"), S3Location("team", "runs/alice/j1/")]
    statements = json.loads(session_policy(prefixes, key_arn="arn:aws:kms:us-east-1:1:key/k"))["Statement"]
    assert is_allowed(statements, Request("s3:GetObject", "arn:aws:s3:::team/runs/alice/j1/x.pt.trace.json"))
    assert not is_allowed(statements, Request("s3:GetObject", "arn:aws:s3:::team/runs/alice/j10/x"))
    assert not is_allowed(statements, Request("s3:ListBucket", "arn:aws:s3:::team", {"s3:prefix": "traces/alice/j1/"}))
    assert is_allowed(statements, Request("s3:ListBucket", f"arn:aws:s3:::{BUCKET}", {"s3:prefix": "traces/alice/j1/"}))
    # AND a folder that is not plain never widens the policy
    with pytest.raises(ValueError, match="plain"):
        session_policy([S3Location(BUCKET, "traces/../")], key_arn=None)
    # AND a longest case (63-character names, a deep TensorBoard folder) falls back to the owner's spaces,
    # which fit AssumeRole's limit and still keep every other user out
    from lambdas.trace_processor.scope import owner_read_spaces

    user, job = "u" * 63, "j" * 63
    env = _env(
        USERS=json.dumps([user]), EXTRA_TRACE_PREFIXES=json.dumps([f"s3://{'b' * 63}/{'p' * 40}/{{user}}/{{job}}/"])
    )
    longest = read_prefixes(user, job, S3Location(BUCKET, f"tensorboard/{user}/{'e' * 120}/{'f' * 120}/{job}/"), env)
    key = "arn:aws:kms:us-east-1:123456789012:key/" + "0" * 36
    policy = session_policy(longest, key_arn=key, owner_spaces=owner_read_spaces(user, env))
    assert len(policy) <= SESSION_POLICY_MAX_CHARS
    wide = json.loads(policy)["Statement"]
    assert is_allowed(wide, Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/tensorboard/{user}/x"))
    assert not is_allowed(wide, Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/tensorboard/bob/x"))
    assert not is_allowed(wide, Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/tensorboard/{user}x/y"))
    # AND a typical job gets the exact folders
    typical = read_prefixes("alice", "j1", S3Location(BUCKET, "tensorboard/alice/j1/"), _env())
    exact = json.loads(session_policy(typical, key_arn=key, owner_spaces=owner_read_spaces("alice", _env())))
    assert not is_allowed(exact["Statement"], Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/traces/alice/j2/x"))


@pytest.mark.parametrize("name", ["bob\n", "alice\n"])
def test_user_names_with_a_trailing_newline_are_refused(name: str) -> None:
    from lambdas.common.env import EnvError

    with pytest.raises(EnvError):
        _env(USERS=json.dumps([name]))
    assert not layout.is_segment(name)
    with pytest.raises(layout.LayoutError):
        layout.user_reports_prefix(name)


def test_name_patterns_are_full_matches(example_config: Any) -> None:
    from profstack.config import ConfigError, parse_config
    from profstack.tensorboard.names import StudioNameError, job_state

    # GIVEN names valid but for a trailing newline THEN every check refuses them
    with pytest.raises(StudioNameError):
        job_state("job\n")
    assert not layout.is_trace_key("x.pt.trace.json\n")
    data = json.loads(example_config.model_dump_json())
    # the config strips surrounding whitespace first (str_strip_whitespace), so no newline survives ...
    data["users"][0]["name"] = data["users"][0]["name"] + "\n"
    data["domain"] = {"mode": "import", "domain_id": "d-abcdef123456\n"}
    parsed = parse_config(data)
    assert "\n" not in parsed.users[0].name
    assert parsed.domain.mode == "import"
    assert parsed.domain.domain_id == "d-abcdef123456"
    # ... and an embedded one is refused
    data["users"][0]["email"] = "bob@example.com\nx"
    with pytest.raises(ConfigError, match="email"):
        parse_config(data)


def test_event_job_names_must_be_sagemaker_names() -> None:
    from tests.functional.processing_support import job_event

    for bad in ("evil\n", "../x", "a.b", "a/b", "-x", "x" * 64):
        with pytest.raises(EventError, match="TrainingJobName"):
            parse_event(job_event(bad))
    assert parse_event(job_event("ok-job-1")).job_name == "ok-job-1"


def test_legacy_rule_output_is_tagged_only_outside_other_users_folders() -> None:
    # GIVEN alice's job whose output paths point into bob's folders (the expiry tag deletes objects)
    from lambdas.trace_processor.legacy_rule_output import owned_rule_output, rule_output_prefixes

    describe = {
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/tensorboard/bob/"},
        "ProfilerConfig": {"S3OutputPath": f"s3://{BUCKET}/output/../reports/bob/"},
        "DebugHookConfig": {"S3OutputPath": f"s3://{BUCKET}/traces/alice/"},
    }
    prefixes = rule_output_prefixes(describe, "j1")
    # WHEN filtered for alice THEN only her own folder is left
    assert [p.uri for p in owned_rule_output(prefixes, "alice", _env())] == [
        f"s3://{BUCKET}/traces/alice/j1/rule-output/"
    ]
    # AND an ordinary shared output folder stays
    shared = rule_output_prefixes({"OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"}}, "j1")
    assert owned_rule_output(shared, "alice", _env()) == shared
