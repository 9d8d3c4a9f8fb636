"""Optional IAM guardrail (config processing.owner_tag_guard, off by default): a user can create training
and tuning jobs only tagged with *their own* owner tag, and cannot add, change or remove that tag later; and every
other tag that changes what ProfStack does with a job (`profstack:actions`, `profstack:live`, the family tag, the
job filter's key: profstack.guardrails.behaviour_tag_keys) may be added, changed or removed only by the job's owner
(or break-glass), on the owner's own job (issue 42 item 9).

The trace processor takes a job's owner from its tag (lambdas/trace_processor/job.py); this makes the tag
trustworthy. Attach the managed policy to every principal that launches training jobs (the configured
roles, or by hand: its ARN is a stack output); each principal must carry the principal tag
`<user_tag_key>=<user>` (an IAM role/user tag or an STS session tag). All statements are Deny, so the
policy only narrows what the principal's other policies allow. See docs/security.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from profstack.guardrails import UNTAGGED

CREATE_ACTIONS = ("sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob")
TAG_ACTIONS = ("sagemaker:AddTags", "sagemaker:DeleteTags")


def owner_tag_statements(
    user_tag_key: str,
    resources: Sequence[str],
    *,
    behaviour_tags: Sequence[str] = (),
    break_glass: Sequence[str] = (),
) -> list[iam.PolicyStatement]:
    """The guardrail's Deny statements for the owner tag `user_tag_key` and the behaviour tags on these job ARN
    patterns; `break_glass` (exact principal ARNs) may change behaviour tags on anyone's job."""
    principal_tag = f"aws:PrincipalTag/{user_tag_key}"
    create = list(CREATE_ACTIONS)
    spared: dict[str, Any] = {"ArnNotEquals": {"aws:PrincipalArn": list(break_glass)}} if break_glass else {}
    behaviour = [
        iam.PolicyStatement(
            sid="DenyBehaviourTagChangeByOthers",
            effect=iam.Effect.DENY,
            actions=list(TAG_ACTIONS),
            resources=list(resources),
            # a standalone AddTags/DeleteTags of a behaviour tag on a job whose owner is not the caller (a job
            # without an owner tag is nobody's: denied too); a caller without the tag resolves to a name no job has
            conditions={
                "ForAnyValue:StringEquals": {"aws:TagKeys": sorted(behaviour_tags)},
                "Null": {"sagemaker:TaggingAction": "true"},
                "StringNotEquals": {f"aws:ResourceTag/{user_tag_key}": f"${{{principal_tag}, '{UNTAGGED}'}}"},
                **spared,
            },
        )
    ]
    return [*(behaviour if behaviour_tags else []), *_owner_statements(user_tag_key, resources, create)]


def _owner_statements(user_tag_key: str, resources: Sequence[str], create: list[str]) -> list[iam.PolicyStatement]:
    principal_tag = f"aws:PrincipalTag/{user_tag_key}"
    return [
        iam.PolicyStatement(
            sid="DenyCreateWithAnotherOwner",
            effect=iam.Effect.DENY,
            actions=create,
            resources=list(resources),
            # also true when the request carries no such tag (a negated operator on a missing key)
            conditions={"StringNotEquals": {f"aws:RequestTag/{user_tag_key}": f"${{{principal_tag}}}"}},
        ),
        iam.PolicyStatement(
            sid="DenyCreateWithoutOwnPrincipalTag",
            effect=iam.Effect.DENY,
            actions=create,
            resources=list(resources),
            # without the principal tag the variable above does not resolve and that statement is skipped
            conditions={"Null": {principal_tag: "true"}},
        ),
        iam.PolicyStatement(
            sid="DenyCreateWithoutOwnerTagKey",
            effect=iam.Effect.DENY,
            actions=create,
            resources=list(resources),
            conditions={"ForAllValues:StringNotEquals": {"aws:TagKeys": [user_tag_key]}},
        ),
        iam.PolicyStatement(
            sid="DenyOwnerTagChange",
            effect=iam.Effect.DENY,
            actions=list(TAG_ACTIONS),
            resources=list(resources),
            # sagemaker:TaggingAction is present only when AddTags is authorised as part of a Create call,
            # whose tags the statements above check; a standalone AddTags/DeleteTags of the key is denied.
            conditions={
                "ForAnyValue:StringEquals": {"aws:TagKeys": [user_tag_key]},
                "Null": {"sagemaker:TaggingAction": "true"},
            },
        ),
    ]


class OwnerTagGuard(Construct):
    """A customer-managed policy with the guardrail, attached to the named roles of this account."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        user_tag_key: str,
        role_names: Sequence[str],
        behaviour_tags: Sequence[str] = (),
        break_glass: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        resources = [
            stack.format_arn(service="sagemaker", resource="training-job", resource_name="*"),
            stack.format_arn(service="sagemaker", resource="hyper-parameter-tuning-job", resource_name="*"),
        ]
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            description="ProfStack: training/tuning jobs only with the caller's own owner tag, never changed later",
            statements=owner_tag_statements(
                user_tag_key, resources, behaviour_tags=behaviour_tags, break_glass=break_glass
            ),
            roles=[iam.Role.from_role_name(self, f"Role{i}", name) for i, name in enumerate(role_names)],
        )
        cdk.CfnOutput(stack, "OwnerTagGuardPolicyArn", value=self.policy.managed_policy_arn)
