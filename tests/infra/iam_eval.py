"""A small IAM policy evaluator for synthesized templates (identity and resource policies).

Enough of IAM's logic to prove isolation between users: explicit Deny wins, then any
Allow; `Action`/`NotAction` with `*`/`?` wildcards (case-insensitive), `Resource`/`NotResource` ARNs with
wildcards (case-sensitive), `NotPrincipal` refused, and the condition operators ProfStack uses (StringEquals,
StringLike, StringNotEquals, StringNotLike, ArnEquals, ArnLike, ArnNotEquals, ArnNotLike (the Arn operators match
each of an ARN's six parts with wildcards, ArnEquals as ArnLike, as in IAM), Bool, Null, and the
`ForAnyValue:`/`ForAllValues:` set forms; the ...IfExists forms are refused). A negated operator holds when its
key is absent, as in IAM; `ForAllValues:` holds when the key is absent or empty. An operator it does not know
raises, so a policy it cannot judge never passes silently.

Resource policies (bucket, queue, key and trust policies): `same_account_decision` combines a principal's
identity statements with a resource policy the way IAM does inside one account: an explicit Deny in either
wins; otherwise an Allow in the resource policy that names the caller itself (its ARN, or a service) suffices,
an Allow that names only the account (`:root` or the account id) delegates to the account's identity policies,
so the identity policy must allow too, and an Allow in the identity policy suffices.

Guardrails outside the account's identity policies (`decision`): a permissions boundary and service control
policies only limit: the request must be allowed by every one of them (and denied by none) as well.

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


def _arn_matches(pattern: str, arn: str) -> bool:
    """IAM's ARN condition operators (ArnEquals and ArnLike alike): each of the six colon-separated parts is
    matched on its own, with `*` and `?` wildcards; a value that is not an ARN of six parts matches nothing."""
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    if len(wanted) != 6 or len(actual) != 6:
        return False
    return all(_resource_matches(w, a) for w, a in zip(wanted, actual, strict=True))


def _positive(operator: str, actual: str, values: list[str]) -> bool:
    if operator == "StringEquals":
        return actual in values
    if operator == "StringLike":
        return any(_resource_matches(v, actual) for v in values)
    if operator in {"ArnEquals", "ArnLike"}:
        return any(_arn_matches(v, actual) for v in values)
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


def _set_operator_holds(operator: str, actual: Any, values: list[str]) -> bool:
    """`ForAnyValue:` (any of the request's values matches; false when absent) and `ForAllValues:` (every value
    matches, vacuously true when absent or empty; a negated inner operator: every value matches none)."""
    qualifier, _, inner = operator.partition(":")
    if qualifier == "ForAnyValue":
        if inner not in _KNOWN:
            raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")
        return any(_positive(inner, str(a), values) for a in _as_list(actual or []))
    positive = _NEGATED.get(inner, inner)
    if positive not in _KNOWN:
        raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")
    negated = inner in _NEGATED
    return all(_positive(positive, str(value), values) is not negated for value in _as_list(actual or []))


def _operator_holds(operator: str, actual: Any, values: list[str]) -> bool:
    if operator == "Null":
        # "true": the key must be absent; "false": present
        return (actual is None) is (values[0].lower() == "true")
    if operator.startswith(("ForAnyValue:", "ForAllValues:")):
        return _set_operator_holds(operator, actual, values)
    if _NEGATED.get(operator, operator) not in _KNOWN:
        raise UnsupportedPolicyError(f"condition operator {operator} is not modelled")
    if operator in _NEGATED:
        # IAM: a negated operator matches when the key is missing from the request
        return actual is None or not _positive(_NEGATED[operator], actual, values)
    return actual is not None and _positive(operator, actual, values)


def _condition_holds(conditions: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    for operator, clauses in conditions.items():
        for key, expected in clauses.items():
            if not _operator_holds(operator, context.get(key), [str(v) for v in _as_list(expected)]):
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
    if "NotPrincipal" in statement:
        raise UnsupportedPolicyError("NotPrincipal is not modelled")
    if ("Resource" in statement) == ("NotResource" in statement):
        raise UnsupportedPolicyError("a statement needs exactly one of Resource and NotResource")
    if ("Action" in statement) == ("NotAction" in statement):
        raise UnsupportedPolicyError("a statement needs exactly one of Action and NotAction")
    if "Action" in statement:
        if not any(_action_matches(a, request.action) for a in _as_list(statement["Action"])):
            return False
    elif any(_action_matches(a, request.action) for a in _as_list(statement["NotAction"])):
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


#: how a resource policy's Principal names the caller: itself (its ARN, a service, or everyone) or only its account
_ITSELF = "itself"
_ACCOUNT = "account"


def _principal_matches(principal: Any, caller: Principal) -> str | None:
    if principal == "*":
        return _ITSELF
    if not isinstance(principal, Mapping):
        raise UnsupportedPolicyError(f"principal {principal!r} is not modelled")
    found: str | None = None
    for kind, values in principal.items():
        if kind not in {"AWS", "Service"}:
            raise UnsupportedPolicyError(f"principal type {kind} is not modelled")
        for value in _as_list(values):
            if kind == "AWS" and (value == "*" or (caller.arn and value == caller.arn)):
                return _ITSELF  # {"AWS": "*"} is everyone, as "*" is (services included)
            if kind == "Service" and caller.service and value == caller.service:
                return _ITSELF
            if kind == "AWS" and caller.arn and value in {caller.account_root, caller.account}:
                found = _ACCOUNT
    return found


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
    """ "Deny", "Allow" (a statement names the caller itself), "AllowAccount" (a statement names only the caller's
    account: the account's identity policies must allow too) or None (no statement applies)."""
    context = dict(request.context)
    if caller.arn:
        context.setdefault("aws:PrincipalArn", caller.arn)
        context.setdefault("aws:PrincipalAccount", caller.account)
    scoped = Request(request.action, request.resource, context)
    verdict: str | None = None
    for statement in statements:
        if "Principal" not in statement:
            continue
        named = _principal_matches(statement["Principal"], caller)
        if named is None or not _statement_applies(statement, scoped):
            continue
        if statement["Effect"] == "Deny":
            return "Deny"
        if named == _ITSELF:
            verdict = "Allow"
        elif verdict is None:
            verdict = "AllowAccount"
    return verdict


def same_account_decision(
    identity: Iterable[Mapping[str, Any]],
    resource_policy: Iterable[Mapping[str, Any]],
    caller: Principal,
    request: Request,
) -> bool:
    """IAM inside one account: an explicit Deny anywhere wins; else an Allow in the resource policy that names the
    caller, or an Allow in the identity policy (an Allow naming only the account needs the identity's too)."""
    return decision(identity, caller, request, resource_policy=resource_policy)


def _layer_allows(statements: list[Mapping[str, Any]], request: Request) -> bool:
    """A guardrail layer (permissions boundary, one SCP): it must Allow the request and Deny nothing of it."""
    return is_allowed(statements, request)


def decision(
    identity: Iterable[Mapping[str, Any]],
    caller: Principal,
    request: Request,
    *,
    resource_policy: Iterable[Mapping[str, Any]] | None = None,
    boundary: Iterable[Mapping[str, Any]] | None = None,
    scps: Iterable[Iterable[Mapping[str, Any]]] = (),
) -> bool:
    """The whole same-account decision: SCPs (each must allow), the permissions boundary (must allow), explicit
    Denies anywhere, then the resource policy's and identity policy's Allows."""
    context = dict(request.context)
    if caller.arn:
        context.setdefault("aws:PrincipalArn", caller.arn)
        context.setdefault("aws:PrincipalAccount", caller.account)
    scoped = Request(request.action, request.resource, context)
    identity = list(identity)
    for scp in scps:
        if not _layer_allows(list(scp), scoped):
            return False
    if boundary is not None and not _layer_allows(list(boundary), scoped):
        return False
    if any(s["Effect"] == "Deny" and _statement_applies(s, scoped) for s in identity):
        return False
    resource = resource_policy_decision(resource_policy or [], caller, scoped)
    if resource == "Deny":
        return False
    if resource == "Allow":
        return True
    return is_allowed(identity, scoped)


def can_assume(
    identity: Iterable[Mapping[str, Any]],
    trust: Iterable[Mapping[str, Any]],
    caller: Principal,
    role_arn: str,
    *,
    context: Mapping[str, Any] | None = None,
    boundary: Iterable[Mapping[str, Any]] | None = None,
    scps: Iterable[Iterable[Mapping[str, Any]]] = (),
) -> bool:
    """sts:AssumeRole of `role_arn` inside one account. Unlike other resource policies a trust policy is required:
    without a statement that allows the caller, no identity policy helps; one that names only the account (root)
    needs the caller's identity policy to allow sts:AssumeRole on the role as well; and explicit Denies, the
    boundary and SCPs apply as everywhere."""
    request = Request("sts:AssumeRole", role_arn, dict(context or {}))
    full = dict(request.context)
    if caller.arn:
        full.setdefault("aws:PrincipalArn", caller.arn)
        full.setdefault("aws:PrincipalAccount", caller.account)
    scoped = Request(request.action, request.resource, full)
    trusted = resource_policy_decision(trust, caller, scoped)
    if trusted not in {"Allow", "AllowAccount"}:
        return False
    identity = list(identity)
    if not decision(identity, caller, scoped, boundary=boundary, scps=scps, resource_policy=trust):
        return False
    return trusted == "Allow" or is_allowed(identity, scoped)


def _managed_policy_id(arn: Any, resources: Mapping[str, Any], role: str) -> str:
    """The logical id of a customer-managed policy of this template that a role's ManagedPolicyArns names."""
    if (
        isinstance(arn, Mapping)
        and set(arn) == {"Ref"}
        and resources.get(arn["Ref"], {}).get("Type") == ("AWS::IAM::ManagedPolicy")
    ):
        return str(arn["Ref"])
    raise UnsupportedPolicyError(f"{role} has a managed policy from outside the template ({arn!r}); not modelled")


def _managed_statements(resources: Mapping[str, Any], resolve: Resolver) -> dict[str, list[dict[str, Any]]]:
    return {
        logical_id: list(resolve(resource["Properties"]["PolicyDocument"])["Statement"])
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::IAM::ManagedPolicy"
    }


def _role_statements(
    logical_id: str,
    props: Mapping[str, Any],
    resources: Mapping[str, Any],
    managed: Mapping[str, list[Any]],
    resolve: Resolver,
) -> list[dict[str, Any]]:
    """A role's inline policies and the template's managed policies its ManagedPolicyArns name."""
    statements: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        statements.extend(resolve(policy["PolicyDocument"])["Statement"])
    for arn in props.get("ManagedPolicyArns", []):
        statements.extend(managed[_managed_policy_id(arn, resources, logical_id)])
    return statements


def principal_statements(template: Mapping[str, Any], resolve: Resolver) -> dict[str, list[dict[str, Any]]]:
    """Resolved statements per principal: each role (inline, attached AWS::IAM::Policy and customer-managed
    policies of the template attached to it) and each customer-managed policy on its own (it may also be
    attached to a person outside the stack)."""
    resources = template["Resources"]
    managed = _managed_statements(resources, resolve)
    found: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in managed.items()}
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            props = resource.get("Properties", {})
            found.setdefault(logical_id, []).extend(_role_statements(logical_id, props, resources, managed, resolve))
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            attached, statements = props.get("Roles", []), managed[logical_id]
        elif resource["Type"] == "AWS::IAM::Policy":
            attached, statements = props.get("Roles", []), resolve(props["PolicyDocument"])["Statement"]
        else:
            continue
        for role in attached:
            if isinstance(role, Mapping) and "Ref" in role:
                found.setdefault(role["Ref"], []).extend(statements)
    return found


def trust_statements(template: Mapping[str, Any], role: str, resolve: Resolver) -> list[dict[str, Any]]:
    """A role's trust policy (AssumeRolePolicyDocument), resolved. A trust policy has no Resource element (it is
    about the role it is attached to): each statement gets `Resource: "*"` so that the evaluator can judge it."""
    document = template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]
    statements: list[dict[str, Any]] = resolve(document)["Statement"]
    for statement in statements:
        if "Resource" in statement or "NotResource" in statement:
            raise UnsupportedPolicyError(f"{role}: a trust policy statement with a Resource element")
        statement["Resource"] = "*"
    return statements
