"""Acknowledge cdk-nag's granular IAM5 findings of one policy, each matched against an allow-list.

cdk-nag 3 wants the exact finding id (`AwsSolutions-IAM5[Resource::<flattened ARN>]`). ARNs that
name another stack's bucket flatten to their export name, which exists only after CDK resolves
cross-stack references, so the ids are computed during validation (after references resolve),
with the same flattening cdk-nag uses (utils/flatten-cfn-reference.js). Every wildcard must match
one of the given patterns, so a new, unexpected wildcard still fails synth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from constructs import IConstruct, IValidation

from stacks.components.nag import acknowledge


def flatten_cfn_reference(node: Any) -> str:
    """Python port of cdk-nag's flattenCfnReference."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, Mapping):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(flatten_cfn_reference(i) for i in items)
        if "Fn::Sub" in node:
            return flatten_cfn_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_cfn_reference(resource)}.{flatten_cfn_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_cfn_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_cfn_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def wildcard_finding_ids(document: Mapping[str, Any]) -> list[str]:
    ids: list[str] = []
    for statement in document.get("Statement", []):
        actions = statement.get("Action", [])
        for action in [actions] if isinstance(actions, str) else actions:
            if "*" in action:
                ids.append(f"AwsSolutions-IAM5[Action::{action}]")
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            flat = flatten_cfn_reference(resource)
            if "*" in flat:
                ids.append(f"AwsSolutions-IAM5[Resource::{flat}]")
    return sorted(set(ids))


class UnexpectedWildcardError(ValueError):
    """A wildcard permission that no allow-list pattern covers."""


@jsii.implements(IValidation)
class _AcknowledgeWildcards:
    def __init__(self, policy: iam.Policy, allowed: Mapping[str, str]) -> None:
        self._policy = policy
        self._allowed = dict(allowed)

    def validate(self) -> list[str]:
        document = cdk.Stack.of(self._policy).resolve(self._policy.document.to_json())
        errors: list[str] = []
        for finding in wildcard_finding_ids(document):
            reason = next((why for pattern, why in self._allowed.items() if re.fullmatch(pattern, finding)), None)
            if reason is None:
                errors.append(f"unexpected wildcard permission {finding}: scope it or allow it with a reason")
            else:
                acknowledge(self._policy, finding, reason)
        return errors


def acknowledge_wildcards(policy: IConstruct | None, allowed: Mapping[str, str]) -> None:
    """`allowed` maps regular expressions over finding ids to the reason that makes them safe, e.g.
    {r"AwsSolutions-IAM5\\[Resource::.*/traces/\\*\\]": "objects are per user and job under traces/"}.
    Pass a role's `DefaultPolicy` child or any iam.Policy."""
    for pattern, reason in allowed.items():
        if len(reason.strip()) < 20:
            raise ValueError(f"pattern {pattern} needs a real reason")
    if not isinstance(policy, iam.Policy):
        raise UnexpectedWildcardError(f"expected an iam.Policy, got {policy!r}")
    policy.node.add_validation(_AcknowledgeWildcards(policy, allowed))


def default_policy(role: iam.IRole) -> IConstruct | None:
    return role.node.try_find_child("DefaultPolicy")
