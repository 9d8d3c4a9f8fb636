"""The legacy audit's (c) IAM and (e) automation, read as one graph and decided by evidence.

Each function, state machine, EventBridge rule, role and customer policy is first judged by its own configuration
(legacy_evidence). Evidence then travels along the account's edges until nothing changes:

- a rule whose pattern selects Profiler rule-evaluation jobs makes its targets Profiler's;
- a function or state machine that is Profiler's makes the rules that target it Profiler's (a rule with other
  targets too is a partial edit: remove only the Profiler targets);
- a role that exists only for Profiler (its policies) makes the functions that run as it Profiler's;
- a policy statement that grants only on Profiler automation (invoke a Profiler function, start a Profiler state
  machine) is a Profiler statement;
- a role used only by Profiler functions, state machines and rules is Profiler-only, and so is a customer policy
  attached only to Profiler-only roles (and to no user or group).

IAM is global, so a role's users are read in every region enabled for the account; a role used by a SageMaker
pipeline or a training job (they do more than the Profiler), or by anything in a region that could not be read, or
trusted by a service whose users the audit does not list, is never Profiler-only by its users. A launcher (a
pipeline, a state machine that creates profiled training jobs) is an edit: its evidence does not travel.

A name is never evidence: a function called `profiler-digest` with nothing Profiler's in its configuration is not
listed at all. AWS clients are injected; each service is read by its own guarded section (legacy_profiler).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from profstack.migrate.legacy_evidence import (
    NEUTRAL_MANAGED_POLICIES,
    Automation,
    Evidence,
    LegacyPaths,
    classify_document,
    match_json,
    wildcard,
)
from profstack.migrate.legacy_pipelines import pipeline_evidence, pipeline_roles

MAX_ROUNDS = 20  # propagation settles in a few rounds; the bound only guards against a bug
MAX_BUS_PAGES = 100  # ListEventBuses has no paginator: NextToken by hand, bounded
#: the runners whose users the audit lists (functions, state machines, EventBridge rules); a role that another
#: service may assume (ec2, sagemaker, a person) may have users the audit cannot see
LISTED_PRINCIPALS = ("lambda.amazonaws.com", "states.amazonaws.com", "events.amazonaws.com")
#: users that do more than the Profiler: a role they run as is never Profiler-only
NEVER_PROFILER_ONLY = frozenset({"pipeline", "training-job"})
RUNNERS = frozenset({"lambda", "state-machine"})
AUTOMATION = frozenset({"lambda", "state-machine", "rule"})


@dataclass
class Node:
    kind: str  # lambda | state-machine | rule | pipeline | training-job | iam-role | iam-policy
    arn: str
    name: str
    evidence: Evidence | None = None
    roles: list[str] = field(default_factory=list)  # the roles it runs as (a rule: its own and its targets')
    region: str = ""
    targets: list[tuple[str, str]] = field(default_factory=list)  # rule: (target id, target ARN)
    selects_rule_jobs: bool = False  # rule: its pattern selects Profiler rule-evaluation jobs
    profiler_only: bool = False  # role / policy
    policy_only: bool = False  # role: every permission it has is Profiler's (its users are Profiler automation)
    debugger_only: bool = False
    neutral_only: bool = False  # policy: only logs, traces and a digest's needs
    held_only_by_profiler: bool = False  # policy: attached only to Profiler-only roles
    policies: list[str] = field(default_factory=list)  # role: customer policy ARNs attached
    managed: list[str] = field(default_factory=list)  # role: AWS-managed policy names attached
    inline: list[tuple[str, Any]] = field(default_factory=list)  # role: (name, document)
    users: list[str] = field(default_factory=list)  # role: ARNs of what runs as it
    document: Any = None  # policy: its default version's document
    attachments: int | None = None  # policy: AttachmentCount (roles, users and groups together)
    trusts: tuple[str, ...] = ()  # role: the principals its trust policy lets assume it
    env: tuple[tuple[str, str], ...] = ()  # function: its environment (a metric namespace it publishes to, ...)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> str | None:
        return self.evidence.verdict if self.evidence else None

    @property
    def is_profiler_automation(self) -> bool:
        """Profiler's, and removable with the Profiler (not a launcher to edit)."""
        return self.evidence is not None and self.evidence.verdict == "profiler" and not self.evidence.edit


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    #: every region's role users were read; when not, no role is Profiler-only by its users
    users_complete: bool = True

    def add(self, node: Node) -> None:
        self.nodes[node.arn] = node

    def of(self, kind: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def get(self, arn: str) -> Node | None:
        node = self.nodes.get(arn)
        if node is None and arn.count(":") > 6:  # a function ARN with a version or alias
            node = self.nodes.get(arn.rsplit(":", 1)[0])
        return node

    def automation(self) -> Automation:
        nodes = [n for n in self.nodes.values() if n.kind in AUTOMATION]
        return Automation(
            profiler=frozenset(n.arn for n in nodes if n.is_profiler_automation),
            others=frozenset(n.arn for n in nodes if not n.is_profiler_automation),
        )


# --- reading each service ---------------------------------------------------------------------------------------


def read_functions(lam: Any, graph: Graph, paths: LegacyPaths, region: str = "") -> None:
    for page in lam.get_paginator("list_functions").paginate():
        for function in page.get("Functions", []):
            variables = (function.get("Environment") or {}).get("Variables", {})
            config = {"Environment": variables, "Description": function.get("Description", "")}
            graph.add(
                Node(
                    kind="lambda",
                    arn=function["FunctionArn"],
                    name=function["FunctionName"],
                    evidence=match_json(json.dumps(config), paths),
                    roles=[function["Role"]] if function.get("Role") else [],
                    region=region,
                    env=tuple((str(k), str(v)) for k, v in variables.items()),
                )
            )


def read_state_machines(sfn: Any, graph: Graph, paths: LegacyPaths, region: str = "") -> None:
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
                    roles=[described["roleArn"]] if described.get("roleArn") else [],
                    region=region,
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


def event_buses(events: Any) -> list[str]:
    """Every event bus of the account in this region (the default one first): rules live on each."""
    names: list[str] = []
    token: str | None = None
    for _ in range(MAX_BUS_PAGES):
        kwargs: dict[str, Any] = {"Limit": 100}
        if token:
            kwargs["NextToken"] = token
        page = events.list_event_buses(**kwargs)
        names += [str(b["Name"]) for b in page.get("EventBuses", []) if b.get("Name")]
        token = page.get("NextToken")
        if not token:
            break
    return sorted(set(names) | {"default"}, key=lambda n: (n != "default", n))


def _rule_node(events: Any, rule: dict[str, Any], bus: str, paths: LegacyPaths, region: str) -> Node:
    targets = [
        t
        for page in events.get_paginator("list_targets_by_rule").paginate(Rule=rule["Name"], EventBusName=bus)
        for t in page.get("Targets", [])
    ]
    pattern = json.loads(rule["EventPattern"]) if rule.get("EventPattern") else None
    roles = [r for r in [rule.get("RoleArn"), *(t.get("RoleArn") for t in targets)] if r]
    node = Node(
        kind="rule",
        arn=rule["Arn"],
        name=rule["Name"],
        targets=[(t["Id"], t["Arn"]) for t in targets],
        roles=list(dict.fromkeys(roles)),
        region=region,
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
        node.selects_rule_jobs = node.is_profiler_automation  # its own configuration names Profiler's
    return node


def read_rules(events: Any, graph: Graph, paths: LegacyPaths, region: str = "") -> None:
    """The rules of every event bus (ListRules and ListTargetsByRule read the default bus unless told)."""
    for bus in event_buses(events):
        for page in events.get_paginator("list_rules").paginate(EventBusName=bus):
            for rule in page.get("Rules", []):
                graph.add(_rule_node(events, rule, bus, paths, region))


def read_pipelines(sm: Any, graph: Graph, paths: LegacyPaths, region: str = "") -> None:
    """SageMaker pipelines: Profiler's (an edit) when a training step still profiles; their roles serve them."""
    for page in sm.get_paginator("list_pipelines").paginate(PaginationConfig={"PageSize": 50}):
        for summary in page.get("PipelineSummaries", []):
            described = sm.describe_pipeline(PipelineName=summary["PipelineName"])
            try:
                definition = json.loads(described.get("PipelineDefinition") or "{}")
            except ValueError:
                definition = {}
            if not isinstance(definition, dict):
                definition = {}
            graph.add(
                Node(
                    kind="pipeline",
                    arn=described.get("PipelineArn") or summary["PipelineArn"],
                    name=summary["PipelineName"],
                    evidence=pipeline_evidence(definition, paths),
                    roles=pipeline_roles(definition, described.get("RoleArn")),
                    region=region,
                )
            )


def _principals(document: Any) -> tuple[str, ...]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return ("?",)
    found: list[str] = []
    statements = (document or {}).get("Statement", [])
    for statement in [statements] if isinstance(statements, dict) else statements:
        principal = statement.get("Principal", {})
        if not isinstance(principal, dict):
            found.append(str(principal))  # "*"
            continue
        for kind, value in principal.items():
            for item in [value] if isinstance(value, str) else value:
                found.append(f"{kind}:{item}")
    return tuple(found)


def read_iam(iam: Any, graph: Graph, paths: LegacyPaths) -> None:
    for page in iam.get_paginator("list_policies").paginate(Scope="Local"):
        for policy in page.get("Policies", []):
            arn = policy["Arn"]
            document = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])["PolicyVersion"][
                "Document"
            ]
            node = Node(
                kind="iam-policy",
                arn=arn,
                name=policy["PolicyName"],
                document=document,
                attachments=policy.get("AttachmentCount"),
                extra={"DefaultVersionId": policy["DefaultVersionId"]},
            )
            _classify_policy(node, paths, None)
            graph.add(node)
    for page in iam.get_paginator("list_roles").paginate():
        for role in page.get("Roles", []):
            name = role["RoleName"]
            node = Node(
                kind="iam-role", arn=role["Arn"], name=name, trusts=_principals(role.get("AssumeRolePolicyDocument"))
            )
            for listed in iam.get_paginator("list_role_policies").paginate(RoleName=name):
                for policy_name in listed.get("PolicyNames", []):
                    document = iam.get_role_policy(RoleName=name, PolicyName=policy_name)["PolicyDocument"]
                    node.inline.append((policy_name, document))
            for listed in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
                for attached in listed.get("AttachedPolicies", []):
                    if ":aws:policy/" in attached["PolicyArn"]:
                        node.managed.append(attached["PolicyName"])
                    else:
                        node.policies.append(attached["PolicyArn"])
            graph.add(node)


# --- deciding ---------------------------------------------------------------------------------------------------


def _classify_policy(node: Node, paths: LegacyPaths, automation: Automation | None) -> None:
    if node.held_only_by_profiler:
        return  # decided by its holders
    verdict = classify_document(node.document, paths, automation)
    node.evidence = verdict.evidence
    node.profiler_only = verdict.profiler_only
    node.debugger_only = verdict.debugger_only
    node.neutral_only = verdict.neutral_only


@dataclass
class _Parts:
    profiler: int = 0
    debugger: int = 0
    other: int = 0
    inline_mentions: bool = False  # an inline policy that does more names Profiler output
    reasons: list[str] = field(default_factory=list)


def _role_parts(role: Node, graph: Graph, paths: LegacyPaths, automation: Automation) -> _Parts:
    """Count a role's policies by whose they are; neutral ones (logs, traces, AWS-managed execution) count for none."""
    parts = _Parts()
    for name, document in role.inline:
        verdict = classify_document(document, paths, automation)
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
        if policy is not None and policy.profiler_only and not policy.held_only_by_profiler:
            parts.profiler += 1
            parts.reasons.append(f"attached {policy.name}")
        elif policy is not None and policy.debugger_only:
            parts.debugger += 1
        elif policy is None or not (policy.neutral_only or policy.held_only_by_profiler):
            parts.other += 1
    parts.other += sum(1 for m in role.managed if m not in NEUTRAL_MANAGED_POLICIES)
    return parts


def _listed_trust(role: Node) -> bool:
    """Only the services whose users the audit lists may assume the role (states.<region>.amazonaws.com too)."""

    def listed(principal: str) -> bool:
        kind, _, value = principal.partition(":")
        return kind == "Service" and (
            value in LISTED_PRINCIPALS or (value.startswith("states.") and value.endswith(".amazonaws.com"))
        )

    return all(listed(p) for p in role.trusts)


def _judge_role(role: Node, graph: Graph, paths: LegacyPaths, automation: Automation) -> None:
    """Decide a role from its policies and its users (see the module docstring)."""
    parts = _role_parts(role, graph, paths, automation)
    users = [u for u in (graph.get(a) for a in role.users) if u is not None]
    serving = sorted({f"{u.kind} {u.name}" for u in users if u.kind in NEVER_PROFILER_ONLY})
    automation_users = [u for u in users if u.kind not in NEVER_PROFILER_ONLY]
    profiler_users = [u for u in automation_users if u.is_profiler_automation]
    role.policy_only = bool(parts.profiler) and not parts.other and not parts.debugger
    if serving:
        role.profiler_only = False
        if parts.profiler or parts.inline_mentions:
            role.evidence = Evidence(
                "review", f"its policies name Profiler output, but {serving[0]} also runs as it: edit its policies"
            )
        return
    if role.policy_only:
        role.evidence = Evidence("profiler", "exists only for Profiler: " + "; ".join(parts.reasons))
        role.profiler_only = True
    elif (
        automation_users
        and len(profiler_users) == len(automation_users)
        and not parts.debugger
        and graph.users_complete
        and _listed_trust(role)
    ):
        names = ", ".join(sorted({u.name for u in profiler_users}))
        role.evidence = Evidence("profiler", f"used only by Profiler automation ({names})")
        role.profiler_only = True
    elif parts.debugger and not parts.profiler and not parts.other:
        role.evidence = Evidence("debugger", "its policies are Debugger's")
    elif parts.inline_mentions and role.verdict is None:
        # inline Profiler statements in a role that does more: an edit of the role, for a person to review
        role.evidence = Evidence("review", "an inline policy names Profiler output among other permissions")


def _promote(node: Node, reason: str) -> None:
    if not node.is_profiler_automation:
        node.evidence = Evidence("profiler", reason)


def _rules_round(graph: Graph) -> None:
    for rule in graph.of("rule"):
        if rule.is_profiler_automation and rule.selects_rule_jobs:
            for _, target in rule.targets:
                node = graph.get(target)
                if node is not None and node.kind in RUNNERS:
                    _promote(node, f"target of EventBridge rule {rule.name}")
        elif rule.verdict != "debugger":
            hits = [graph.get(t) for _, t in rule.targets]
            profiler = [n for n in hits if n is not None and n.is_profiler_automation]
            if profiler:
                _promote(rule, "targets Profiler automation: " + ", ".join(sorted(n.name for n in profiler)))


def _roles_round(graph: Graph, paths: LegacyPaths) -> None:
    automation = graph.automation()
    for policy in graph.of("iam-policy"):
        _classify_policy(policy, paths, automation)
    users: dict[str, list[str]] = {}
    for node in graph.nodes.values():
        for arn in node.roles:
            users.setdefault(arn, []).append(node.arn)
    roles = graph.of("iam-role")
    for role in roles:
        role.users = sorted(set(users.get(role.arn, [])))
        _judge_role(role, graph, paths, automation)
    for node in [n for n in graph.nodes.values() if n.kind in RUNNERS]:
        for arn in node.roles:
            runs_as = graph.get(arn)
            if runs_as is not None and runs_as.policy_only:
                _promote(node, f"runs as {runs_as.name}, a role whose every permission is Profiler's")
    for policy in graph.of("iam-policy"):
        holders = [r for r in roles if policy.arn in r.policies]
        alone = policy.attachments is None or policy.attachments <= len(holders)  # no user or group holds it
        held = holders and alone and all(r.profiler_only for r in holders)
        if held and not policy.debugger_only and not policy.profiler_only:
            names = ", ".join(sorted(r.name for r in holders))
            policy.evidence = Evidence("profiler", f"attached only to Profiler-only {names}")
            policy.profiler_only = policy.held_only_by_profiler = True


def _signature(graph: Graph) -> list[tuple[str, str | None, bool, bool]]:
    return [(a, n.verdict, n.profiler_only, n.policy_only) for a, n in sorted(graph.nodes.items())]


def resolve(graph: Graph, paths: LegacyPaths) -> None:
    for _ in range(MAX_ROUNDS):
        before = _signature(graph)
        _rules_round(graph)
        _roles_round(graph, paths)
        if _signature(graph) == before:
            return


def other_targets(rule: Node, graph: Graph) -> list[tuple[str, str]]:
    """A Profiler rule's targets that are not Profiler's (so the rule is a partial edit, not a removal)."""
    if rule.selects_rule_jobs:
        return []
    out = []
    for target_id, arn in rule.targets:
        node = graph.get(arn)
        if node is None or not node.is_profiler_automation:
            out.append((target_id, arn))
    return out
