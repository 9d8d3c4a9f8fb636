"""The legacy audit's (c) IAM and (e) automation, read as one graph and decided by evidence.

Each function, state machine, EventBridge rule, role and customer policy is first judged by its own configuration
(legacy_evidence). Evidence then travels along the account's edges until nothing changes:

- a rule whose pattern selects Profiler rule-evaluation jobs makes its targets Profiler's;
- a function or state machine that is Profiler's makes the rules that target it Profiler's (a rule with other
  targets too is a partial edit: remove only the Profiler targets);
- a role that exists only for Profiler (its policies) makes the functions that run as it Profiler's;
- a role used only by Profiler functions and state machines is Profiler-only, and so is a customer policy attached
  only to Profiler-only roles.

A name is never evidence: a function called `profiler-digest` with nothing Profiler's in its configuration is not
listed at all. AWS clients are injected; each service is read by its own guarded section (legacy_profiler).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from profstack.migrate.legacy_evidence import (
    NEUTRAL_MANAGED_POLICIES,
    Evidence,
    LegacyPaths,
    classify_document,
    match_json,
    wildcard,
)

MAX_ROUNDS = 20  # propagation settles in a few rounds; the bound only guards against a bug


@dataclass
class Node:
    kind: str  # lambda | state-machine | rule | iam-role | iam-policy
    arn: str
    name: str
    evidence: Evidence | None = None
    role: str | None = None  # the role a function or state machine runs as
    targets: list[tuple[str, str]] = field(default_factory=list)  # rule: (target id, target ARN)
    selects_rule_jobs: bool = False  # rule: its pattern selects Profiler rule-evaluation jobs
    profiler_only: bool = False  # role / policy
    debugger_only: bool = False
    neutral_only: bool = False  # policy: only logs, traces and a digest's needs
    policies: list[str] = field(default_factory=list)  # role: customer policy ARNs attached
    managed: list[str] = field(default_factory=list)  # role: AWS-managed policy names attached
    inline: list[tuple[str, Any]] = field(default_factory=list)  # role: (name, document)
    users: list[str] = field(default_factory=list)  # role: ARNs of the functions / machines that run as it
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> str | None:
        return self.evidence.verdict if self.evidence else None


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)

    def add(self, node: Node) -> None:
        self.nodes[node.arn] = node

    def of(self, kind: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def get(self, arn: str) -> Node | None:
        node = self.nodes.get(arn)
        if node is None and arn.count(":") > 6:  # a function ARN with a version or alias
            node = self.nodes.get(arn.rsplit(":", 1)[0])
        return node


# --- reading each service ---------------------------------------------------------------------------------------


def read_functions(lam: Any, graph: Graph, paths: LegacyPaths) -> None:
    for page in lam.get_paginator("list_functions").paginate():
        for function in page.get("Functions", []):
            config = {
                "Environment": (function.get("Environment") or {}).get("Variables", {}),
                "Description": function.get("Description", ""),
            }
            graph.add(
                Node(
                    kind="lambda",
                    arn=function["FunctionArn"],
                    name=function["FunctionName"],
                    evidence=match_json(json.dumps(config), paths),
                    role=function.get("Role"),
                )
            )


def read_state_machines(sfn: Any, graph: Graph, paths: LegacyPaths) -> None:
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page.get("stateMachines", []):
            arn = machine["stateMachineArn"]
            described = sfn.describe_state_machine(stateMachineArn=arn)
            graph.add(
                Node(
                    kind="state-machine",
                    arn=arn,
                    name=machine["name"],
                    evidence=match_json(described["definition"], paths),
                    role=described.get("roleArn"),
                )
            )


def reacts_to_rule_jobs(pattern: Any, jobs: frozenset[str]) -> str | None:
    """An event pattern on processing-job state changes that selects these rule-evaluation jobs."""
    if not isinstance(pattern, dict) or "SageMaker Processing Job State Change" not in pattern.get("detail-type", []):
        return None
    names = (pattern.get("detail") or {}).get("ProcessingJobName")
    if names is None:
        return None  # every processing job: not Profiler's
    for name in names if isinstance(names, list) else [names]:
        if isinstance(name, str) and name.lower() in jobs:
            return f"selects rule-evaluation job {name}"
        if isinstance(name, dict):
            for op in ("prefix", "wildcard", "suffix"):
                value = name.get(op)
                if not isinstance(value, str):
                    continue
                probe = value.lower()
                for job in sorted(jobs):
                    hit = (
                        (op == "prefix" and job.startswith(probe))
                        or (op == "suffix" and job.endswith(probe))
                        or (op == "wildcard" and wildcard(probe).fullmatch(job))
                    )
                    if hit:
                        return f"selects rule-evaluation jobs by {op} {value!r} (e.g. {job})"
    return None


def read_rules(events: Any, graph: Graph, paths: LegacyPaths) -> None:
    for page in events.get_paginator("list_rules").paginate():
        for rule in page.get("Rules", []):
            bus = rule.get("EventBusName", "default")
            targets = events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus).get("Targets", [])
            pattern = json.loads(rule["EventPattern"]) if rule.get("EventPattern") else None
            node = Node(
                kind="rule",
                arn=rule["Arn"],
                name=rule["Name"],
                targets=[(t["Id"], t["Arn"]) for t in targets],
                extra={"EventBusName": bus},
            )
            selects = reacts_to_rule_jobs(pattern, paths.rule_jobs)
            if selects:
                node.evidence, node.selects_rule_jobs = Evidence("profiler", selects), True
            elif reacts_to_rule_jobs(pattern, paths.debugger_rule_jobs):
                node.evidence = Evidence("debugger", "selects Debugger rule-evaluation jobs")
            else:
                text = json.dumps({"pattern": pattern, "targets": targets}, default=str)
                node.evidence = match_json(text, paths)
                node.selects_rule_jobs = node.verdict == "profiler"  # its own configuration names Profiler's
            graph.add(node)


def read_iam(iam: Any, graph: Graph, paths: LegacyPaths) -> None:
    for page in iam.get_paginator("list_policies").paginate(Scope="Local"):
        for policy in page.get("Policies", []):
            arn = policy["Arn"]
            document = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])["PolicyVersion"][
                "Document"
            ]
            verdict = classify_document(document, paths)
            graph.add(
                Node(
                    kind="iam-policy",
                    arn=arn,
                    name=policy["PolicyName"],
                    evidence=verdict.evidence,
                    profiler_only=verdict.profiler_only,
                    debugger_only=verdict.debugger_only,
                    neutral_only=verdict.neutral_only,
                    extra={"DefaultVersionId": policy["DefaultVersionId"]},
                )
            )
    for page in iam.get_paginator("list_roles").paginate():
        for role in page.get("Roles", []):
            name = role["RoleName"]
            node = Node(kind="iam-role", arn=role["Arn"], name=name)
            for policy_name in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
                document = iam.get_role_policy(RoleName=name, PolicyName=policy_name)["PolicyDocument"]
                node.inline.append((policy_name, document))
            for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
                if ":aws:policy/" in attached["PolicyArn"]:
                    node.managed.append(attached["PolicyName"])
                else:
                    node.policies.append(attached["PolicyArn"])
            graph.add(node)


# --- deciding ---------------------------------------------------------------------------------------------------


@dataclass
class _Parts:
    profiler: int = 0
    debugger: int = 0
    other: int = 0
    inline_mentions: bool = False  # an inline policy that does more names Profiler output
    reasons: list[str] = field(default_factory=list)


def _role_parts(role: Node, graph: Graph, paths: LegacyPaths) -> _Parts:
    """Count a role's policies by whose they are; neutral ones (logs, traces, AWS-managed execution) count for none."""
    parts = _Parts()
    for name, document in role.inline:
        verdict = classify_document(document, paths)
        if verdict.profiler_only:
            parts.profiler += 1
            parts.reasons.append(f"inline {name}: {verdict.evidence.reason if verdict.evidence else ''}")
        elif verdict.debugger_only:
            parts.debugger += 1
        elif not verdict.neutral_only:
            parts.other += 1
            parts.inline_mentions |= verdict.evidence is not None and verdict.evidence.verdict == "profiler"
    for arn in role.policies:
        policy = graph.get(arn)
        if policy is not None and policy.profiler_only:
            parts.profiler += 1
            parts.reasons.append(f"attached {policy.name}")
        elif policy is not None and policy.debugger_only:
            parts.debugger += 1
        elif policy is None or not policy.neutral_only:
            parts.other += 1
    parts.other += sum(1 for m in role.managed if m not in NEUTRAL_MANAGED_POLICIES)
    return parts


def _judge_role(role: Node, graph: Graph, paths: LegacyPaths) -> bool:
    """Decide a role from its policies and its users. True when its verdict changed."""
    before = (role.verdict, role.profiler_only)
    parts = _role_parts(role, graph, paths)
    users = [graph.get(u) for u in role.users]
    profiler_users = [u for u in users if u is not None and u.verdict == "profiler"]
    if parts.profiler and not parts.other and not parts.debugger:
        role.evidence = Evidence("profiler", "exists only for Profiler: " + "; ".join(parts.reasons))
        role.profiler_only = True
    elif users and len(profiler_users) == len(users) and not parts.debugger:
        names = ", ".join(sorted(u.name for u in profiler_users))
        role.evidence = Evidence("profiler", f"used only by Profiler automation ({names})")
        role.profiler_only = True
    elif parts.debugger and not parts.profiler and not parts.other:
        role.evidence = Evidence("debugger", "its policies are Debugger's")
    elif parts.inline_mentions and role.verdict is None:
        # inline Profiler statements in a role that does more: an edit of the role, for a person to review
        role.evidence = Evidence("review", "an inline policy names Profiler output among other permissions")
    return (role.verdict, role.profiler_only) != before


def _promote(node: Node, reason: str) -> bool:
    if node.verdict == "profiler":
        return False
    node.evidence = Evidence("profiler", reason)
    return True


def _rules_round(graph: Graph) -> bool:
    changed = False
    for rule in graph.of("rule"):
        if rule.verdict == "profiler" and rule.selects_rule_jobs:
            for _, target in rule.targets:
                node = graph.get(target)
                if node is not None and node.kind in {"lambda", "state-machine"}:
                    changed |= _promote(node, f"target of EventBridge rule {rule.name}")
        elif rule.verdict != "debugger":
            hits = [graph.get(t) for _, t in rule.targets]
            profiler = [n for n in hits if n is not None and n.verdict == "profiler"]
            if profiler:
                changed |= _promote(rule, "targets Profiler automation: " + ", ".join(sorted(n.name for n in profiler)))
    return changed


def _roles_round(graph: Graph, paths: LegacyPaths) -> bool:
    changed = False
    runners = [n for n in graph.nodes.values() if n.kind in {"lambda", "state-machine"}]
    for role in graph.of("iam-role"):
        role.users = sorted(n.arn for n in runners if n.role == role.arn)
        changed |= _judge_role(role, graph, paths)
    for node in runners:
        runs_as = graph.get(node.role) if node.role else None
        if runs_as is None or node.verdict == "profiler" or not runs_as.profiler_only or runs_as.evidence is None:
            continue
        if "used only by" not in runs_as.evidence.reason:  # its own policies, not its users, make it Profiler's
            changed |= _promote(node, f"runs as {runs_as.name}, a role that exists only for Profiler")
    for policy in graph.of("iam-policy"):
        holders = [r for r in graph.of("iam-role") if policy.arn in r.policies]
        if holders and all(r.profiler_only for r in holders) and not policy.profiler_only and not policy.debugger_only:
            names = ", ".join(sorted(r.name for r in holders))
            policy.evidence = Evidence("profiler", f"attached only to Profiler-only {names}")
            policy.profiler_only = changed = True
    return changed


def _round(graph: Graph, paths: LegacyPaths) -> bool:
    rules = _rules_round(graph)
    return _roles_round(graph, paths) or rules


def resolve(graph: Graph, paths: LegacyPaths) -> None:
    for _ in range(MAX_ROUNDS):
        if not _round(graph, paths):
            return


def other_targets(rule: Node, graph: Graph) -> list[tuple[str, str]]:
    """A Profiler rule's targets that are not Profiler's (so the rule is a partial edit, not a removal)."""
    if rule.selects_rule_jobs:
        return []
    out = []
    for target_id, arn in rule.targets:
        node = graph.get(arn)
        if node is None or node.verdict != "profiler":
            out.append((target_id, arn))
    return out
