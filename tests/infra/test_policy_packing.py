"""Per-user Denies grow with the number of users (another user's profile and apps are named by ARN): they are packed
into managed policies under IAM's 6,144 characters (stacks/components/iam.py, managed_policies), each reference
measured at the longest text it can resolve to, so a big team deploys instead of failing at CloudFormation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from profstack.guardrails import MANAGED_POLICY_MAX_CHARS, Scope, isolation_statements
from tests.infra.iam_eval import Resolver

DOMAIN_ID_WORST = "d-" + "x" * 12


def _policies(users: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(statements given, synthesized AWS::IAM::ManagedPolicy documents) for `users` users, alice's view."""
    import aws_cdk as cdk
    from aws_cdk import aws_sagemaker as sagemaker
    from aws_cdk.assertions import Template

    from stacks.components.iam import managed_policies

    stack = cdk.Stack(cdk.App(), "Packing")
    domain = sagemaker.CfnDomain(
        stack,
        "Domain",
        auth_mode="IAM",
        default_user_settings=sagemaker.CfnDomain.UserSettingsProperty(
            execution_role="arn:aws:iam::123456789012:role/x"
        ),
        domain_name="d",
        subnet_ids=["subnet-0a1b2c3d"],
        vpc_id="vpc-0a1b2c3d",
    )
    names = ("alice", *(f"user-{i:03d}" for i in range(users - 1)))
    scope = Scope(
        prefix="profstack",
        users=names,
        user_tag_key="profstack:user",
        behaviour_tags=("profstack:actions", "profstack:family", "profstack:live"),
        partition=stack.partition,
        region=stack.region,
        account=stack.account,
        domain_id=domain.attr_domain_id,
    )
    statements = isolation_statements(scope, "alice")
    managed_policies(stack, "Isolation", statements, description="test")
    template = Template.from_stack(stack).to_json()
    resolve = Resolver(get_att={"Domain.DomainId": DOMAIN_ID_WORST})
    documents = [
        resolve(r["Properties"]["PolicyDocument"])
        for k, r in sorted(template["Resources"].items())
        if r["Type"] == "AWS::IAM::ManagedPolicy"
    ]
    return [stack.resolve(s) for s in statements], documents


def _worst_case_chars(document: dict[str, Any]) -> int:
    """The document in the longest partition and region names IAM could count."""
    text = json.dumps(document, separators=(",", ":"))
    return len(text.replace("arn:aws:", "arn:aws-us-gov:").replace("us-east-1", "ap-southeast-5"))


@pytest.mark.parametrize(("users", "parts"), [(2, 1), (20, 1), (60, 3), (200, 6)])
def test_denies_are_packed_under_iams_limit_without_losing_any(users: int, parts: int) -> None:
    # GIVEN a team of `users` users WHEN alice's Denies are synthesized
    statements, documents = _policies(users)
    # THEN they come in as few policies as fit, each within IAM's limit in the longest partition and region
    assert len(documents) == parts
    assert all(_worst_case_chars(d) <= MANAGED_POLICY_MAX_CHARS for d in documents)
    # AND every statement is in exactly one of them, and every other user's profile is named once
    sids = [st["Sid"] for d in documents for st in d["Statement"]]
    assert sorted(sids) == sorted(st["Sid"] for st in statements)
    rendered = json.dumps(documents)
    for i in range(users - 1):
        assert rendered.count(f'user-profile/{DOMAIN_ID_WORST}/user-{i:03d}"') == 1
    # AND her own profile is not among the denied ones
    denied = [st for d in documents for st in d["Statement"] if st["Sid"].startswith("OtherUsersProfilesAndApps")]
    assert not [r for st in denied for r in st["Resource"] if r.endswith(("/alice", "/alice/*"))]
