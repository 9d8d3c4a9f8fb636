"""The IAM evaluator (tests/infra/iam_eval.py) must say no where IAM says no, and refuse what it does not model:
every isolation claim of docs/security.md is only as good as this judge. Each case is a small policy whose IAM
outcome the IAM user guide's policy evaluation logic fixes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.iam_eval import (
    Principal,
    Request,
    Resolver,
    UnsupportedPolicyError,
    can_assume,
    decision,
    is_allowed,
    principal_statements,
    same_account_decision,
)

ACCOUNT = "123456789012"
ALICE = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/alice")
OBJECT = "arn:aws:s3:::b/traces/bob/x"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/profstack/users/bob/ReaderRole"
EVERYTHING = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]


def test_not_action_denies_every_action_but_the_listed_ones() -> None:
    # GIVEN a Deny of everything except reads on an object
    deny_writes = {"Effect": "Deny", "NotAction": ["s3:Get*", "s3:List*"], "Resource": "arn:aws:s3:::b/*"}
    policy = [*EVERYTHING, deny_writes]
    # THEN reads pass and every other verb (a future one included) is denied
    assert is_allowed(policy, Request("s3:GetObjectAcl", OBJECT))
    assert is_allowed(policy, Request("s3:ListMultipartUploadParts", OBJECT))
    for action in ("s3:PutObject", "s3:ReplicateObject", "s3:AbortMultipartUpload", "s3:SomeFutureVerb"):
        assert not is_allowed(policy, Request(action, OBJECT)), action
    # AND the Deny does not reach other resources
    assert is_allowed(policy, Request("s3:PutObject", "arn:aws:s3:::other/x"))


def test_a_statement_needs_exactly_one_of_action_and_not_action() -> None:
    both = {"Effect": "Allow", "Action": "s3:*", "NotAction": "s3:Get*", "Resource": "*"}
    neither = {"Effect": "Allow", "Resource": "*"}
    for statement in (both, neither):
        with pytest.raises(UnsupportedPolicyError):
            is_allowed([statement], Request("s3:GetObject", OBJECT))


def test_for_all_values_holds_for_an_absent_key_and_negates_per_value() -> None:
    # GIVEN IAM's "the request's tag keys must include profstack:user" Deny
    deny = {
        "Effect": "Deny",
        "Action": "sagemaker:CreateTrainingJob",
        "Resource": "*",
        "Condition": {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["profstack:user"]}},
    }
    allow = {"Effect": "Allow", "Action": "sagemaker:CreateTrainingJob", "Resource": "*"}

    def create(keys: list[str] | None) -> bool:
        context: dict[str, Any] = {} if keys is None else {"aws:TagKeys": keys}
        return is_allowed([allow, deny], Request("sagemaker:CreateTrainingJob", "arn:job", context))

    # THEN no tags at all (vacuous truth) and tags without the key are denied, a request with it passes
    assert not create(None)
    assert not create([])
    assert not create(["team"])
    assert create(["team", "profstack:user"])


def test_an_allow_that_names_only_the_account_needs_the_identity_policy_too() -> None:
    # GIVEN a resource policy that trusts the account (root) and one that names alice herself
    account = [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "s3:*",
                "Resource": "*"}]  # fmt: skip
    itself = [{"Effect": "Allow", "Principal": {"AWS": ALICE.arn}, "Action": "s3:*", "Resource": "*"}]
    request = Request("s3:GetObject", OBJECT)
    # THEN naming the account delegates to identity policies: without one of alice's own, denied
    assert not same_account_decision([], account, ALICE, request)
    assert same_account_decision(EVERYTHING, account, ALICE, request)
    # AND naming alice suffices inside the account
    assert same_account_decision([], itself, ALICE, request)


def test_a_role_is_assumed_only_when_its_trust_policy_allows_the_caller() -> None:
    assume_all = [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]
    root = {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    trust_account = [{"Effect": "Allow", "Principal": root, "Action": "sts:AssumeRole"}]
    trust_tagged = [
        {
            "Effect": "Allow",
            "Principal": root,
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:PrincipalTag/profstack:user": "bob"}},
        }
    ]
    for trust in (trust_account, trust_tagged):
        for statement in trust:
            statement["Resource"] = ROLE
    # GIVEN a trust policy naming the account: an identity with sts:AssumeRole on * assumes it, one without cannot
    assert can_assume(assume_all, trust_account, ALICE, ROLE)
    assert not can_assume([], trust_account, ALICE, ROLE)
    # AND with the person's tag as condition only the tagged person gets in, whatever their identity allows
    assert not can_assume(assume_all, trust_tagged, ALICE, ROLE, context={"aws:PrincipalTag/profstack:user": "alice"})
    assert not can_assume(assume_all, trust_tagged, ALICE, ROLE)
    assert can_assume(assume_all, trust_tagged, ALICE, ROLE, context={"aws:PrincipalTag/profstack:user": "bob"})
    # AND a trust policy without any matching statement refuses even an identity that allows everything
    assert not can_assume(EVERYTHING, [], ALICE, ROLE)


def test_a_permissions_boundary_and_scps_only_limit() -> None:
    request = Request("iam:PassRole", ROLE)
    deny_bob = [*EVERYTHING, {"Effect": "Deny", "Action": "iam:PassRole", "Resource": ROLE}]
    only_s3 = [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]
    # GIVEN an identity that allows everything
    assert decision(EVERYTHING, ALICE, request)
    # THEN a boundary or an SCP that denies the request wins over it
    assert not decision(EVERYTHING, ALICE, request, boundary=deny_bob)
    assert not decision(EVERYTHING, ALICE, request, scps=[deny_bob])
    # AND a boundary or SCP that does not allow the action blocks it (they grant nothing themselves)
    assert not decision(EVERYTHING, ALICE, request, boundary=only_s3)
    assert not decision(EVERYTHING, ALICE, request, scps=[EVERYTHING, only_s3])
    assert not decision([], ALICE, request, boundary=EVERYTHING, scps=[EVERYTHING])
    assert decision(EVERYTHING, ALICE, request, boundary=EVERYTHING, scps=[EVERYTHING])


def test_managed_policies_of_the_template_count_for_the_roles_they_are_attached_to() -> None:
    deny = {"Effect": "Deny", "Action": "iam:PassRole", "Resource": ROLE}
    template = {
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"ManagedPolicyArns": [{"Ref": "Isolation"}]}},
            "Other": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Isolation": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {"PolicyDocument": {"Statement": [deny]}, "Roles": [{"Ref": "Other"}]},
            },
        }
    }
    found = principal_statements(template, Resolver())
    # THEN both ways of attaching it (the role's ManagedPolicyArns, the policy's Roles) are counted
    assert deny in found["Role"]
    assert deny in found["Other"]
    assert deny in found["Isolation"]
    # AND a managed policy from outside the template (an AWS managed policy) is refused, not ignored
    template["Resources"]["Role"]["Properties"]["ManagedPolicyArns"] = ["arn:aws:iam::aws:policy/AdministratorAccess"]
    with pytest.raises(UnsupportedPolicyError):
        principal_statements(template, Resolver())
