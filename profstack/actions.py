"""Actions on findings, as Debugger's rule actions had them (issue 36): per rule, `notify` (the default) or `stop`
the training job. Pure: from a summary's findings, the deployment's policy (config `processing.actions`) and the
job's own tags (as SageMaker's ListTags returns them) to a list of decisions; the live-analysis function
(lambdas/live_analysis) carries them out.

A job is stopped only when all of these hold, so that no single party can stop someone else's work by mistake:

1. the deployment opts in (`processing.actions.stop_enabled`);
2. the rule is configured `stop` (`processing.actions.rules`);
3. the job opts in with the tag `profstack:actions=stop` (its creator's choice);
4. the finding is at least `stop_min_severity` (default critical) and every trace file behind it (its ranks'
   inputs) was read in full: a file cut short, still being written, can make a rank look idle;
5. the evidence is this job's: the live analysis analyses only files written after the job's training started
   (lambdas/trace_processor/evidence.py), and every rank behind the finding is one the job can have (below its
   GPUs, when the instance type says how many): a planted file claiming rank 63 of an 8-GPU job stops nothing;
6. at run time, IAM lets the function stop only jobs whose owner tag names a configured user
   (stacks/components/live_analysis.py).

Anything short of that is a `notify` decision whose `reason` says what was missing, so the report and e-mail can
say "LowGPUUtilization would stop this job, but ..." instead of staying silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

LIVE_TAG = "profstack:live"  # "off": no analysis while this job runs
ACTIONS_TAG = "profstack:actions"  # "stop": this job may be stopped by a `stop` rule
STOP_TAG_VALUE = "stop"
NOTIFY_MIN_SEVERITY = "warning"  # info findings never notify while a job runs
#: rules that describe the traces, not the training: they never stop a job
NEVER_STOP = frozenset({"UnreadableTraceFiles"})
SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
#: reports/<user>/<job>/actions.json: the stops taken while the job ran, for the final report and e-mail
ACTIONS_FILE = "actions.json"
#: the idempotency table's item that carries the live dispatcher's cursor between runs (lambdas/live_analysis/
#: dispatch.py); the dispatcher may read and write this one item only (stacks/components/live_analysis.py)
DISPATCH_STATE_ID = "live-dispatch#state"

Action = Literal["notify", "stop"]


@dataclass(frozen=True)
class ActionPolicy:
    """The deployment's `processing.actions`."""

    stop_enabled: bool = False
    rules: Mapping[str, str] = field(default_factory=dict)
    stop_min_severity: str = "critical"

    def to_json(self) -> dict[str, Any]:
        return {
            "stop_enabled": self.stop_enabled,
            "rules": dict(sorted(self.rules.items())),
            "stop_min_severity": self.stop_min_severity,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ActionPolicy:
        rules = data.get("rules") or {}
        if not isinstance(rules, Mapping) or any(v not in {"notify", "stop"} for v in rules.values()):
            raise ValueError("actions.rules must map rule ids to notify or stop")
        severity = str(data.get("stop_min_severity") or "critical")
        if severity not in {"warning", "critical"}:
            raise ValueError(f"actions.stop_min_severity must be warning or critical, not {severity[:40]!r}")
        return cls(
            stop_enabled=bool(data.get("stop_enabled", False)),
            rules={str(k): str(v) for k, v in rules.items()},
            stop_min_severity=severity,
        )


@dataclass(frozen=True)
class Decision:
    rule_id: str
    action: Action
    severity: str
    message: str
    #: why a `stop` rule only notifies (None when it stops, or for a plain notify rule)
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "action": self.action,
            "severity": self.severity,
            "message": self.message,
            "reason": self.reason,
        }


def live_enabled(tags: Mapping[str, str]) -> bool:
    """False when the job opted out of live analysis (`profstack:live=off`, any case, surrounding blanks)."""
    return tags.get(LIVE_TAG, "").strip().lower() != "off"


def job_allows_stop(tags: Mapping[str, str]) -> bool:
    return tags.get(ACTIONS_TAG, "").strip().lower() == STOP_TAG_VALUE


def read_in_full(finding: Mapping[str, Any], summary: Mapping[str, Any]) -> bool:
    """Whether every trace file behind the finding was read in full: the inputs of its ranks (of every rank when
    it names none) all have status ok, and there is at least one. A file cut short (still being written, or
    corrupt) can make a rank look idle: that never stops a job."""
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    ranks = finding.get("ranks")
    named = {r for r in ranks if isinstance(r, int)} if isinstance(ranks, list) else set()
    behind = [i for i in inputs if not named or i.get("rank") in named]
    return bool(behind) and all(i.get("status") == "ok" for i in behind)


def _rank(severity: object) -> int:
    return SEVERITY_RANK.get(str(severity), -1)


def _strongest(findings: Iterable[object]) -> dict[str, Mapping[str, Any]]:
    """One finding per rule id: the most severe (first wins a tie, so the order of ranks is kept)."""
    best: dict[str, Mapping[str, Any]] = {}
    for finding in findings:
        if not isinstance(finding, Mapping):
            continue
        rule = finding.get("rule_id")
        if not isinstance(rule, str) or not rule:
            continue
        if rule not in best or _rank(finding.get("severity")) > _rank(best[rule].get("severity")):
            best[rule] = finding
    return best


def ranks_behind(finding: Mapping[str, Any], summary: Mapping[str, Any]) -> set[int]:
    """The ranks a finding rests on: the ranks it names, else every input's."""
    ranks = finding.get("ranks")
    named = {r for r in ranks if isinstance(r, int) and not isinstance(r, bool)} if isinstance(ranks, list) else set()
    if named:
        return named
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    return {r for i in inputs if isinstance(r := i.get("rank"), int) and not isinstance(r, bool)}


def _why_not_stop(
    finding: Mapping[str, Any],
    policy: ActionPolicy,
    tags: Mapping[str, str],
    summary: Mapping[str, Any],
    ranks_possible: int | None,
) -> str | None:
    rule, severity = str(finding.get("rule_id")), str(finding.get("severity") or "")
    if rule in NEVER_STOP:
        return f"{rule} describes the trace files, not the training"
    if not policy.stop_enabled:
        return "stopping is off for this deployment (processing.actions.stop_enabled)"
    if not job_allows_stop(tags):
        return f"the job does not carry the tag {ACTIONS_TAG}={STOP_TAG_VALUE}"
    if _rank(severity) < _rank(policy.stop_min_severity):
        return f"the finding is {severity}, below processing.actions.stop_min_severity ({policy.stop_min_severity})"
    if not read_in_full(finding, summary):
        return "a trace file behind the finding was not read in full yet"
    beyond = sorted(r for r in ranks_behind(finding, summary) if ranks_possible is not None and r >= ranks_possible)
    if beyond:
        return (
            f"rank {beyond[0]} behind the finding is beyond the job's {ranks_possible} GPUs: the file is not this "
            "job's evidence"
        )
    return None


def decide(
    summary: Mapping[str, Any], policy: ActionPolicy, tags: Mapping[str, str], *, ranks_possible: int | None = None
) -> list[Decision]:
    """What each rule that fired does, ordered by rule id. Findings below warning do nothing; a rule configured
    `stop` stops only when every condition of the module docstring holds, else it notifies and says why.
    `ranks_possible`: the job's GPUs in all (profstack.jobs.instances.accelerator_count), None when unknown."""
    decisions: list[Decision] = []
    for rule, finding in sorted(_strongest(summary.get("findings") or []).items()):
        severity = str(finding.get("severity") or "")
        if _rank(severity) < _rank(NOTIFY_MIN_SEVERITY):
            continue
        message = str(finding.get("message") or "")[:500]
        if policy.rules.get(rule) != "stop":
            decisions.append(Decision(rule, "notify", severity, message))
            continue
        why = _why_not_stop(finding, policy, tags, summary, ranks_possible)
        decisions.append(Decision(rule, "notify" if why else "stop", severity, message, why))
    return decisions


def stopping(decisions: Iterable[Decision]) -> list[Decision]:
    return [d for d in decisions if d.action == "stop"]


def action_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per stop taken or withheld, for a report, an e-mail and the CLI (summary 1.5 `actions`)."""
    lines: list[str] = []
    for entry in summary.get("actions") or []:
        if not isinstance(entry, Mapping):
            continue
        rule = str(entry.get("rule_id") or "?")[:80]
        if entry.get("action") == "stop":
            if entry.get("result") == "stopped":
                lines.append(f"ProfStack stopped this training job: {rule} (processing.actions.rules)")
            else:
                lines.append(f"{rule} asked to stop this job, but it was no longer running")
        elif entry.get("reason"):
            lines.append(f"{rule} would stop this job, but {str(entry.get('reason'))[:200]}")
    return lines
