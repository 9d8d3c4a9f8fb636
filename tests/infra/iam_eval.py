"""A small IAM policy evaluator for synthesized templates (identity and resource policies).

Enough of IAM's logic to prove isolation between users: explicit Deny wins, then any
Allow; `Action` with `*`/`?` wildcards (case-insensitive), `Resource` ARNs with wildcards
(case-sensitive), `NotAction`/`NotResource` refused, and the condition operators ProfStack
uses (StringEquals, StringLike, StringNotEquals, StringNotLike, ArnEquals, ArnLike, ArnNotEquals,
ArnNotLike, Bool; the ...IfExists forms are refused). A negated operator holds when its key is
absent, as in IAM. An operator it does not know raises, so a policy it cannot judge never passes
silently.

Resource policies (bucket and queue policies): `same_account_decision` combines a principal's
identity statements with a resource policy the way IAM does inside one account: an explicit Deny
in either wins, otherwise an Allow in either suffices.

Intrinsics are resolved to concrete text first: pseudo parameters, `Fn::Join`, `Fn::GetAtt`
and `Fn::ImportValue` are replaced by the values the test supplies (an unlisted same-template
reference becomes an opaque unique text; an unlisted import raises).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
}


class UnsupportedPolicyError(ValueError):
    """The evaluator met a construct it does not model; the test must not pass by accident."""


@dataclass
class Resolver:
    """Turns CloudFormation intrinsics into strings. `get_att`/`imports` map to concrete values."""

    get_att: Mapping[str, str] = field(default_factory=dict)  # "LogicalId.Attr" -> value
    imports: Mapping[str, str] = field(default_factory=dict)  # export-name regex -> value
    refs: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, node: Any) -> Any:
        if isinstance(node, str):
            return node
        if isinstance(node, list):
            return [self(item) for item in node]
        if isinstance(node, dict):
            if "Ref" in node:
                name = node["Ref"]
                if name in PSEUDO:
                    return PSEUDO[name]
                # A resource of the same template: an opaque, unique name.
                return self.refs.get(name, f"<ref:{name}>")
            if "Fn::Join" in node:
                delimiter, items = node["Fn::Join"]
                return str(delimiter).join(str(self(item)) for item in items)
            if "Fn::GetAtt" in node:
                key = ".".join(node["Fn::GetAtt"])
                return self.get_att.get(key, f"<getatt:{key}>")
            if "Fn::ImportValue" in node:
                export = self(node["Fn::ImportValue"])
                for pattern, value in self.imports.items():
                    if re.search(pattern, export):
                        return value
                raise UnsupportedPolicyError(f"unresolved import {export}")
            return {key: self(value) for key, value in node.items()}
        return node


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _action_matches(pattern: str, action: str) -> bool:
    return fnmatch.fnmatchcase(action.lower(), pattern.lower())


def _resource_matches(pattern: str, resource: str) -> bool:
    # IAM ARN wildcards: '*' any run of characters (including '/' and ':'), '?' one character.
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, resource) is not None


def _positive(operator: str, actual: str, values: list[str]) -> bool:
    if operator in {"StringEquals", "ArnEquals"}:
        return actual in values
    if operator in {"StringLike", "ArnLike"}:
        return any(_resource_matches(v, actual) for v in values)
    if operator == "Bool":
        return actual.lower() in {v.lower() for v in values}
    raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")


_KNOWN = frozenset({"StringEquals", "StringLike", "ArnEquals", "ArnLike", "Bool"})
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _condition_holds(conditions: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    for operator, clauses in conditions.items():
        for key, expected in clauses.items():
            values = [str(v) for v in _as_list(expected)]
            actual = context.get(key)
            if operator == "Null":
                # "true": the key must be absent; "false": present
                if (actual is None) is not (values[0].lower() == "true"):
                    return False
                continue
            if operator.startswith("ForAnyValue:"):
                # a multivalued key (a list in the context): true when any of its values matches; false when absent
                inner = operator.removeprefix("ForAnyValue:")
                if inner not in _KNOWN:
                    raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")
                if not any(_positive(inner, str(a), values) for a in _as_list(actual or [])):
                    return False
                continue
            if _NEGATED.get(operator, operator) not in _KNOWN:
                raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")
            if operator in _NEGATED:
                # IAM: a negated operator matches when the key is missing from the request
                ok = actual is None or not _positive(_NEGATED[operator], actual, values)
            else:
                ok = actual is not None and _positive(operator, actual, values)
            if not ok:
                return False
    return True


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, Any] = field(default_factory=dict)


_VARIABLE = re.compile(r"\$\{\s*([^},']+?)\s*(?:,\s*'([^']*)'\s*)?\}")


def substitute(text: str, context: Mapping[str, str]) -> str:
    """IAM policy variables: `${key}` or `${key, 'default'}` replaced from the request context.
    A missing key without a default may invalidate the whole statement in IAM: refused here."""

    def value(match: re.Match[str]) -> str:
        key, default = match.group(1), match.group(2)
        if key in context:
            return context[key]
        if default is None:
            raise UnsupportedPolicyError(f"policy variable {key} is not in the request and has no default")
        return default

    return _VARIABLE.sub(value, text)


def _substituted(values: Any, context: Mapping[str, str]) -> list[str]:
    return [substitute(str(v), context) for v in _as_list(values)]


def _statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "NotAction" in statement or "NotPrincipal" in statement:
        raise UnsupportedPolicyError("NotAction/NotPrincipal are not modelled")
    if ("Resource" in statement) == ("NotResource" in statement):
        raise UnsupportedPolicyError("a statement needs exactly one of Resource and NotResource")
    if not any(_action_matches(a, request.action) for a in _as_list(statement["Action"])):
        return False
    if "Resource" in statement:
        if not any(
            _resource_matches(r, request.resource) for r in _substituted(statement["Resource"], request.context)
        ):
            return False
    elif any(_resource_matches(r, request.resource) for r in _substituted(statement["NotResource"], request.context)):
        return False
    conditions = {
        operator: {key: _substituted(values, request.context) for key, values in clauses.items()}
        for operator, clauses in statement.get("Condition", {}).items()
    }
    return _condition_holds(conditions, request.context)


def is_allowed(statements: Iterable[Mapping[str, Any]], request: Request) -> bool:
    """IAM's identity-policy decision for one principal: explicit Deny > Allow > implicit deny."""
    allowed = False
    for statement in statements:
        if not _statement_applies(statement, request):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


def _principal_matches(principal: Any, caller: Principal) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, Mapping):
        raise UnsupportedPolicyError(f"principal {principal!r} is not modelled")
    for kind, values in principal.items():
        for value in _as_list(values):
            if kind == "AWS" and (value == "*" or value in {caller.arn, caller.account_root}):
                return True
            if kind == "Service" and value == caller.service:
                return True
            if kind not in {"AWS", "Service"}:
                raise UnsupportedPolicyError(f"principal type {kind} is not modelled")
    return False


@dataclass(frozen=True)
class Principal:
    """Who calls: an IAM role/user ARN (`aws:PrincipalArn` is set from it) or an AWS service."""

    arn: str = ""
    service: str = ""
    account: str = PSEUDO["AWS::AccountId"]

    @property
    def account_root(self) -> str:
        return f"arn:aws:iam::{self.account}:root"


def resource_policy_decision(
    statements: Iterable[Mapping[str, Any]], caller: Principal, request: Request
) -> str | None:
    """ "Deny", "Allow" or None (no statement applies) for `caller` under a resource policy."""
    context = dict(request.context)
    if caller.arn:
        context.setdefault("aws:PrincipalArn", caller.arn)
        context.setdefault("aws:PrincipalAccount", caller.account)
    scoped = Request(request.action, request.resource, context)
    decision: str | None = None
    for statement in statements:
        if "Principal" not in statement or not _principal_matches(statement["Principal"], caller):
            continue
        if not _statement_applies(statement, scoped):
            continue
        if statement["Effect"] == "Deny":
            return "Deny"
        decision = "Allow"
    return decision


def same_account_decision(
    identity: Iterable[Mapping[str, Any]],
    resource_policy: Iterable[Mapping[str, Any]],
    caller: Principal,
    request: Request,
) -> bool:
    """IAM inside one account: an explicit Deny anywhere wins; else an Allow in either policy."""
    context = dict(request.context)
    if caller.arn:
        context.setdefault("aws:PrincipalArn", caller.arn)
    scoped = Request(request.action, request.resource, context)
    identity = list(identity)
    if any(s["Effect"] == "Deny" and _statement_applies(s, scoped) for s in identity):
        return False
    resource = resource_policy_decision(resource_policy, caller, scoped)
    if resource == "Deny":
        return False
    return resource == "Allow" or is_allowed(identity, scoped)


def principal_statements(template: Mapping[str, Any], resolve: Resolver) -> dict[str, list[dict[str, Any]]]:
    """Resolved statements per principal: each role (inline + attached AWS::IAM::Policy) and each
    customer-managed policy on its own (it is attached to a person outside the stack)."""
    resources = template["Resources"]
    found: dict[str, list[dict[str, Any]]] = {}
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            if props.get("ManagedPolicyArns"):
                raise UnsupportedPolicyError(f"{logical_id} has managed policies; not modelled")
            statements = found.setdefault(logical_id, [])
            for policy in props.get("Policies", []):
                statements.extend(resolve(policy["PolicyDocument"])["Statement"])
        elif resource["Type"] == "AWS::IAM::ManagedPolicy":
            found.setdefault(logical_id, []).extend(resolve(props["PolicyDocument"])["Statement"])
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        props = resource["Properties"]
        statements = resolve(props["PolicyDocument"])["Statement"]
        for role in props.get("Roles", []):
            found.setdefault(role["Ref"], []).extend(statements)
    return found
