"""SageMaker Pipelines in the legacy audit: a pipeline whose training steps still profile.

A pipeline definition (DescribePipeline's PipelineDefinition, JSON) lists steps; a `Training` step's `Arguments` is a
CreateTrainingJob request, and a `Condition` step holds more steps in `IfSteps` / `ElseSteps`. A value may be a
literal or a function: `{"Get": "Parameters.X"}` reads a pipeline parameter (its `DefaultValue` when the execution
does not override it), `{"Get": "Steps.S.…"}` and `{"Std:Join": …}` are known only when the pipeline runs.

A pipeline is Profiler's (an edit, never a removal: it also trains) when a training step names Profiler rules or a
ProfilerConfig that is not `DisableProfiler: true`, or when a step reads verified Profiler output. A step with
`DisableProfiler: true` (what a migrated launcher writes, literally or through a parameter defaulting to true) is
not; a step with only Debugger rules is Debugger's (kept); a setting known only at run time is for review.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from profstack.migrate.legacy_evidence import (
    Dynamic,
    Evidence,
    LegacyPaths,
    match_value,
    request_evidence,
    split_requests,
    strongest,
)

MAX_STEPS = 10_000  # a definition holds at most a few hundred; the bound keeps a hostile one finite


def _resolver(definition: dict[str, Any]) -> Any:
    defaults: dict[str, Any] = {}
    for parameter in definition.get("Parameters") or []:
        if isinstance(parameter, dict) and "Name" in parameter and "DefaultValue" in parameter:
            defaults[str(parameter["Name"])] = parameter["DefaultValue"]

    def resolve(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            (function, argument), *_ = value.items()
            if function == "Get" and isinstance(argument, str) and argument.startswith("Parameters."):
                name = argument.removeprefix("Parameters.")
                return defaults[name] if name in defaults else Dynamic(f"parameter {name} without a default")
            if function in {"Get", "Std:Join", "Std:JsonGet"}:
                return Dynamic(f"{function} {argument}")
        return value

    return resolve


def steps(definition: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every step, those inside Condition steps' IfSteps / ElseSteps included (depth first, bounded)."""
    stack = [s for s in reversed(definition.get("Steps") or []) if isinstance(s, dict)]
    seen = 0
    while stack and seen < MAX_STEPS:
        step = stack.pop()
        seen += 1
        yield step
        arguments = step.get("Arguments")
        if isinstance(arguments, dict):
            for branch in ("ElseSteps", "IfSteps"):
                stack.extend(s for s in reversed(arguments.get(branch) or []) if isinstance(s, dict))


def pipeline_evidence(definition: dict[str, Any], paths: LegacyPaths) -> Evidence | None:
    """The strongest evidence over the pipeline's steps (see the module docstring)."""
    resolve = _resolver(definition)
    found: list[Evidence | None] = []
    for step in steps(definition):
        arguments = step.get("Arguments")
        if not isinstance(arguments, dict):
            continue
        branches = {k: v for k, v in arguments.items() if k not in {"IfSteps", "ElseSteps"}}
        requests, rest = split_requests(branches)
        name = step.get("Name", "?")
        for request in requests:
            evidence = request_evidence(request, resolve)
            if evidence is not None:
                found.append(Evidence(evidence.verdict, f"step {name} {evidence.reason}", edit=True))
        reads = match_value(rest, paths)
        if reads is not None and reads.verdict != "review":
            found.append(Evidence(reads.verdict, f"step {name} {reads.reason}", edit=True))
    return strongest(found)


def pipeline_roles(definition: dict[str, Any], role_arn: str | None) -> list[str]:
    """The roles the pipeline and its steps run as (a role used by a pipeline serves more than the Profiler)."""
    resolve = _resolver(definition)
    roles = [role_arn] if role_arn else []
    for step in steps(definition):
        arguments = step.get("Arguments")
        if isinstance(arguments, dict):
            role = resolve(arguments.get("RoleArn"))
            if isinstance(role, str) and role not in roles:
                roles.append(role)
    return roles
