"""The optional owner-tag guardrail (processing.owner_tag_guard, issue 11): template assertions, cdk-nag
(synth with the checks on) and cfn-lint over the synthesized processing stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks.lint import lint_templates
from tests.infra.conftest import synthesize

STACK = "profstack-processing"
CREATE = {"sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob"}


def _guarded(example_config: Any, **guard: Any) -> Any:
    from profstack.config import OwnerTagGuard

    processing = example_config.processing.model_copy(update={"owner_tag_guard": OwnerTagGuard(**guard)})
    return example_config.model_copy(update={"processing": processing})


@pytest.fixture(scope="module")
def guarded(example_config: Any) -> dict[str, Any]:
    app = synthesize(_guarded(example_config, enabled=True, role_names=["ml-researchers"]), nag=True)
    return app.templates[STACK]


def _guard_policy(template: dict[str, Any]) -> dict[str, Any]:
    (policy,) = [
        r["Properties"]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::ManagedPolicy" and k.startswith("OwnerTagGuard")
    ]
    return policy


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def test_the_guard_is_off_by_default(synthesized: Any) -> None:
    resources = synthesized.templates[STACK]["Resources"]
    assert not [k for k in resources if k.startswith("OwnerTagGuard")]


def test_create_must_carry_the_callers_own_owner_tag(guarded: dict[str, Any], example_config: Any) -> None:
    key = example_config.tensorboard.user_tag_key
    statements = _guard_policy(guarded)["PolicyDocument"]["Statement"]
    assert all(st["Effect"] == "Deny" for st in statements)
    creates = [st for st in statements if _actions(st) == CREATE]
    conditions = [st["Condition"] for st in creates]
    # THEN a create is denied when the request's owner tag differs from the caller's principal tag ...
    assert {"StringNotEquals": {f"aws:RequestTag/{key}": f"${{aws:PrincipalTag/{key}}}"}} in conditions
    # ... when the caller has no such principal tag (the variable would not resolve) ...
    assert {"Null": {f"aws:PrincipalTag/{key}": "true"}} in conditions
    # ... and when the request's tag keys do not include it
    assert {"ForAllValues:StringNotEquals": {"aws:TagKeys": [key]}} in conditions
    for st in creates:
        resources = json.dumps(st["Resource"])
        assert ":training-job/*" in resources
        assert ":hyper-parameter-tuning-job/*" in resources


def test_the_owner_tag_cannot_be_changed_on_an_existing_job(guarded: dict[str, Any], example_config: Any) -> None:
    key = example_config.tensorboard.user_tag_key
    statements = _guard_policy(guarded)["PolicyDocument"]["Statement"]
    (tags,) = [st for st in statements if st.get("Sid") == "DenyOwnerTagChange"]
    assert _actions(tags) == {"sagemaker:AddTags", "sagemaker:DeleteTags"}
    # AddTags outside a create call (no sagemaker:TaggingAction) and DeleteTags, touching the owner key
    assert tags["Condition"] == {
        "ForAnyValue:StringEquals": {"aws:TagKeys": [key]},
        "Null": {"sagemaker:TaggingAction": "true"},
    }
    assert ":training-job/*" in json.dumps(tags["Resource"])


BOB_JOB = "arn:aws:sagemaker:us-east-1:123456789012:training-job/bob-resnet-1"


@pytest.mark.parametrize("key", ["profstack:actions", "profstack:live", "profstack:family"])
def test_behaviour_tags_change_only_on_the_callers_own_jobs(guarded: dict[str, Any], key: str) -> None:
    from tests.infra.iam_eval import Request, Resolver, is_allowed

    # GIVEN the guard and sagemaker:* (issue 42 item 9: before, only the owner key was guarded, so alice could opt
    # bob's running job into stops, turn its live analysis off or move it to another family)
    statements = [
        *Resolver()(_guard_policy(guarded)["PolicyDocument"])["Statement"],
        {"Effect": "Allow", "Action": "sagemaker:*", "Resource": "*"},
    ]

    def tag(caller: str | None, owner: str | None, action: str = "sagemaker:AddTags", **extra: str) -> bool:
        context: dict[str, Any] = {"aws:TagKeys": [key], **extra}
        if caller is not None:
            context["aws:PrincipalTag/profstack:user"] = caller
        if owner is not None:
            context["aws:ResourceTag/profstack:user"] = owner
        return is_allowed(statements, Request(action, BOB_JOB, context))

    # THEN alice cannot add, change or remove it on bob's job, nor on a job without an owner, nor untagged callers
    assert not tag("alice", "bob")
    assert not tag("alice", "bob", "sagemaker:DeleteTags")
    assert not tag("alice", None)
    assert not tag(None, "bob")
    # AND bob can on his own job; and at create time (TaggingAction set) the create statements judge the tags
    assert tag("bob", "bob")
    assert tag("bob", "bob", "sagemaker:DeleteTags")
    assert tag("alice", None, **{"sagemaker:TaggingAction": "CreateTrainingJob"})


def test_the_guard_is_attached_to_the_configured_roles(guarded: dict[str, Any]) -> None:
    assert _guard_policy(guarded)["Roles"] == ["ml-researchers"]
    outputs = guarded["Outputs"]
    assert any(k.startswith("OwnerTagGuardPolicyArn") for k in outputs)


def test_the_guarded_stack_is_cfn_lint_clean(guarded: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / f"{STACK}.template.json"
    path.write_text(json.dumps(guarded))
    assert lint_templates([path]) == []
