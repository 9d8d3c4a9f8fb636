"""What makes a resource SageMaker Profiler's, Debugger's, or only look like one (the legacy audit's evidence).

The audit never decides by a resource's name. A configuration text (a policy statement, an event pattern, a state
machine definition, a function's environment) is Profiler's when it names what the verified profiled jobs made:

- a verified job's `profiler-output/` or the Profiler part of its `rule-output/` (the `ProfilerReport-*` folder and
  the folders of its Profiler rules), with IAM wildcards honoured;
- a Profiler rule-evaluation processing job of those jobs (ProfilerRuleEvaluationStatuses[].RuleEvaluationJobArn);
- a Profiler API field (`ProfilerRuleEvaluationStatuses`, `ProfilerConfig`, `ProfilerRuleConfigurations`) or
  DetailedProfiler apps.

It is Debugger's when it names only Debugger's parts: the folders of a job's Debugger rules (`DebugRuleConfigurations`,
such as `vanishing_gradient`), `debug-output/`, Debugger rule jobs or Debugger API fields. Debugger closed to new
customers on 2026-07-30 but existing customers keep using it, so Debugger's parts are named, never cleaned up.

A text that names `rule-output/` in a way that covers both, or that matches no verified job, is "review".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

#: SageMaker dev guide, "Configure Debugger using SageMaker API": new customer access closed effective 7/30/26
DEBUGGER_CLOSED_TO_NEW_CUSTOMERS = "2026-07-30"

Verdict = Literal["profiler", "debugger", "review"]

#: API fields only Profiler automation reads or writes (evidence of "uses Profiler APIs")
PROFILER_API_TOKENS = ("ProfilerRuleEvaluationStatuses", "ProfilerRuleConfigurations", "ProfilerConfig")
DEBUGGER_API_TOKENS = ("DebugRuleEvaluationStatuses", "DebugRuleConfigurations", "DebugHookConfig")
#: the folder SageMaker writes the Profiler report into, under rule-output/ (ProfilerReport-<timestamp>)
PROFILER_REPORT_FOLDER = "ProfilerReport"

#: statements that any function needs to run (its own logs, traces, VPC networking): they neither make a role
#: Profiler's nor stop it from being Profiler-only
NEUTRAL_ACTIONS = frozenset(
    {
        "logs:createloggroup",
        "logs:createlogstream",
        "logs:putlogevents",
        "xray:puttracesegments",
        "xray:puttelemetryrecords",
        "ec2:createnetworkinterface",
        "ec2:describenetworkinterfaces",
        "ec2:deletenetworkinterface",
        "ec2:assignprivateipaddresses",
        "ec2:unassignprivateipaddresses",
        "cloudwatch:putmetricdata",
        # what a report digest needs besides the report: read the job, publish a message; no one's data
        "sns:publish",
        "sagemaker:describetrainingjob",
        "sagemaker:listtrainingjobs",
        "sagemaker:describeprocessingjob",
    }
)
#: AWS-managed policies that only let a function or job run (logs, traces, VPC): neutral likewise
NEUTRAL_MANAGED_POLICIES = frozenset(
    {
        "AWSLambdaBasicExecutionRole",
        "AWSLambdaVPCAccessExecutionRole",
        "AWSXRayDaemonWriteAccess",
        "AWSLambdaBasicDurableExecutionRolePolicy",
    }
)

_PATH_TOKEN = re.compile(
    r"[A-Za-z0-9_.\-*?${}:/]*(?:rule-output|profiler-output|debug-output)[A-Za-z0-9_.\-*?${}:/']*", re.IGNORECASE
)
_S3_ARN = re.compile(r"^(?:arn:[a-z-]+:s3:::|s3://)")
_DETAILED_PROFILER_ARN = re.compile(r":app/[^/]+/[^/]+/detailedprofiler/", re.IGNORECASE)


def wildcard(pattern: str) -> re.Pattern[str]:
    """IAM-style: `*` any run of characters (`/` included), `?` one; `${...}` variables and `{}` holes as `*`."""
    pattern = re.sub(r"\$\{[^}]*\}|\{\}", "*", pattern)
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


@dataclass(frozen=True)
class Location:
    """An S3 folder that evidence can name."""

    bucket: str
    prefix: str  # a folder ("…/profiler-output/") or a rule's folder stem ("…/rule-output/ProfilerReport")
    job: str

    @property
    def full(self) -> str:
        return f"{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class Evidence:
    verdict: Verdict
    reason: str


def _covers(token: str, location: Location) -> bool:
    """Does a path token (a key, an S3 URI or ARN, with wildcards) reach into `location`?"""
    bare = _S3_ARN.sub("", token).strip("'\"")
    probe = wildcard(bare)
    full = location.full
    # a folder stem (rule-output/ProfilerReport) stands for its timestamped folders (ProfilerReport-<ts>/...)
    inside = (full + "x", full + "-x", full + "/x") if not full.endswith("/") else (full + "x",)
    return bool(
        any(probe.fullmatch(path) for path in inside)
        or probe.fullmatch(full)
        or probe.fullmatch(full.rstrip("/"))
        or probe.match(location.prefix + "x")
        or bare.startswith(full)
        or (bare.endswith("/") and full.startswith(bare))  # a parent folder covers what is in it
    )


@dataclass(frozen=True)
class LegacyPaths:
    """What the verified jobs make Profiler's (and Debugger's): folders, buckets and rule-evaluation jobs."""

    prefixes: tuple[Location, ...]  # Profiler folders of finished and running profiled jobs
    rule_jobs: frozenset[str]  # Profiler rule-evaluation processing jobs (lower case: ARNs lower-case names)
    debugger_prefixes: tuple[Location, ...] = ()
    debugger_rule_jobs: frozenset[str] = frozenset()

    @property
    def buckets(self) -> frozenset[str]:
        return frozenset(p.bucket for p in self.prefixes)

    def _rule_job(self, text: str) -> Evidence | None:
        lower = text.lower()
        for job in sorted(self.rule_jobs):
            if job in lower:
                return Evidence("profiler", f"names Profiler rule-evaluation job {job}")
        for job in sorted(self.debugger_rule_jobs):
            if job in lower:
                return Evidence("debugger", f"names Debugger rule-evaluation job {job}")
        return None

    def _token(self, token: str, text: str) -> Evidence:
        profiler = [p for p in self.prefixes if _covers(token, p)]
        debugger = [p for p in self.debugger_prefixes if _covers(token, p)]
        if profiler and debugger:
            return Evidence(
                "review",
                f"`{token}` covers Profiler output ({profiler[0].full}) and Debugger rule output "
                f"({debugger[0].full}): remove only the Profiler part",
            )
        if profiler:
            return Evidence("profiler", f"names s3://{profiler[0].full}")
        if debugger:
            return Evidence("debugger", f"names Debugger rule output s3://{debugger[0].full}")
        profiler_words = "profiler-output" in token.lower() or PROFILER_REPORT_FOLDER.lower() in token.lower()
        same_bucket = any(_S3_ARN.sub("", token).startswith(f"{bucket}/") for bucket in self.buckets) or any(
            re.search(rf"[\"'\s:=]{re.escape(bucket)}[\"'\s,/]", text) for bucket in self.buckets
        )
        if same_bucket and profiler_words:
            return Evidence("profiler", f"reads Profiler output `{token}` in a bucket holding verified Profiler output")
        return Evidence("review", f"mentions `{token}` but no verified job's Profiler output")

    def match(self, text: str) -> Evidence | None:
        """The strongest evidence in one configuration text; None when it names nothing of either."""
        found = self._rule_job(text)
        if found is not None:
            return found
        best: Evidence | None = None
        for token in _PATH_TOKEN.findall(text):
            evidence = self._token(token, text)
            if evidence.verdict == "profiler":
                return evidence
            if best is None or (best.verdict == "review" and evidence.verdict == "debugger"):
                best = evidence
        if best is not None and best.verdict == "debugger":
            return best
        api = api_evidence(text)
        if api is not None and api.verdict == "profiler":
            return api
        return best or api


def api_evidence(text: str) -> Evidence | None:
    if _DETAILED_PROFILER_ARN.search(text) or "DetailedProfiler" in text:
        return Evidence("profiler", "names DetailedProfiler apps")
    for token in PROFILER_API_TOKENS:
        if token in text:
            return Evidence("profiler", f"uses the Profiler API ({token})")
    for token in DEBUGGER_API_TOKENS:
        if token in text:
            return Evidence("debugger", f"uses the Debugger API ({token})")
    return None


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def match_json(text: str, paths: LegacyPaths) -> Evidence | None:
    """Evidence in a JSON document, string by string; a path built from parts may name its bucket in a sibling."""
    try:
        value = json.loads(text)
    except ValueError:
        return paths.match(text)
    blob = json.dumps(value)
    best: Evidence | None = None
    for string in strings(value):
        evidence = paths.match(string)
        if evidence is None:
            continue
        if evidence.verdict == "review":
            # a path built from parts: the bucket may sit in a sibling field ("Bucket": "...")
            whole = paths.match(blob)
            if whole is not None and whole.verdict != "review":
                evidence = whole
        if evidence.verdict == "profiler":
            return evidence
        if best is None or (best.verdict == "review" and evidence.verdict == "debugger"):
            best = evidence
    api = api_evidence(blob)
    if api is not None and (best is None or api.verdict == "profiler"):
        return api
    return best


# --- IAM statements ---------------------------------------------------------------------------------------------


def statements(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, str):
        document = json.loads(document)
    found = document.get("Statement", [])
    return [found] if isinstance(found, dict) else list(found)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value or []]


def neutral(statement: dict[str, Any]) -> bool:
    """Only what a function or job needs to run (its logs, traces, VPC networking)."""
    actions = [a.lower() for a in _as_list(statement.get("Action", []))]
    return bool(actions) and "NotAction" not in statement and all(a in NEUTRAL_ACTIONS for a in actions)


def statement_evidence(statement: dict[str, Any], paths: LegacyPaths) -> Evidence | None:
    texts = _as_list(statement.get("Resource", [])) + _as_list(statement.get("NotResource", []))
    texts.append(json.dumps(statement.get("Condition", {})))
    best: Evidence | None = None
    for text in texts:
        if _DETAILED_PROFILER_ARN.search(text) or "detailedprofiler" in text.lower():
            return Evidence("profiler", f"grants on DetailedProfiler apps ({text})")
        evidence = paths.match(text)
        if evidence is None:
            continue
        if evidence.verdict == "profiler":
            return evidence
        if best is None or (best.verdict == "review" and evidence.verdict == "debugger"):
            best = evidence
    return best


@dataclass(frozen=True)
class DocumentVerdict:
    """A policy document read statement by statement."""

    evidence: Evidence | None  # the strongest evidence (None: names nothing of either)
    profiler_only: bool  # at least one Profiler statement and every other one neutral
    debugger_only: bool
    neutral_only: bool  # only what any function needs (logs, traces, a digest's SNS and job reads)
    profiler_statements: tuple[int, ...]  # indexes (or Sids) of the Profiler statements, for a partial edit


def classify_document(document: Any, paths: LegacyPaths) -> DocumentVerdict:
    verdicts: list[Evidence | None] = []
    found = statements(document)
    for statement in found:
        verdicts.append(None if neutral(statement) else statement_evidence(statement, paths))
    profiler = [e for e in verdicts if e is not None and e.verdict == "profiler"]
    debugger = [e for e in verdicts if e is not None and e.verdict == "debugger"]
    review = [e for e in verdicts if e is not None and e.verdict == "review"]
    others = [
        i for i, (s, e) in enumerate(zip(found, verdicts, strict=True)) if e is None and not neutral(s)
    ]  # statements that name neither
    evidence: Evidence | None = (profiler or debugger or review or [None])[0]  # type: ignore[list-item]
    if profiler:
        reason = "; ".join(sorted({e.reason for e in profiler}))
        evidence = Evidence("profiler", reason)
    return DocumentVerdict(
        evidence=evidence,
        profiler_only=bool(profiler) and not (debugger or review or others),
        debugger_only=bool(debugger) and not (profiler or review or others),
        neutral_only=bool(found) and all(neutral(s) for s in found),
        profiler_statements=tuple(i for i, e in enumerate(verdicts) if e is not None and e.verdict == "profiler"),
    )


# --- permissions, named for a one-line error --------------------------------------------------------------------

#: botocore operation -> IAM action where they differ
_ACTIONS = {
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjectVersions"): "s3:ListBucketVersions",
    ("s3", "GetBucketLifecycleConfiguration"): "s3:GetLifecycleConfiguration",
    ("s3", "PutBucketLifecycleConfiguration"): "s3:PutLifecycleConfiguration",
    ("s3", "GetBucketVersioning"): "s3:GetBucketVersioning",
}
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess"})


def iam_action(service: str, operation: str) -> str:
    """The IAM action a botocore call needs: `events:ListRules`, `states:ListStateMachines`, `s3:ListBucket`."""
    prefix = {"stepfunctions": "states", "sfn": "states"}.get(service, service)
    return _ACTIONS.get((prefix, operation), f"{prefix}:{operation}")


def describe_failure(section: str, service: str, exc: Exception) -> str:
    """One line: what failed, the permission it needs (when denied), and that the section is incomplete."""
    response = getattr(exc, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", "") or type(exc).__name__)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    operation = str(getattr(exc, "operation_name", "") or "")
    if code in DENIED_CODES:
        action = iam_action(service, operation) if operation else f"{service}:*"
        return f"{section}: missing permission {action} ({code}); this section is incomplete"
    what = f"{operation} answered {code}" if operation else code
    if status:
        what += f" (HTTP {status})"
    return f"{section}: {what}; this section is incomplete"
