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
from collections.abc import Callable, Iterable, Iterator
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
    #: the resource is not Profiler automation but launches profiled jobs (a pipeline, a state machine that
    #: creates training jobs): an edit (turn the Profiler off in it), never a removal; this evidence does not travel
    #: along the account's edges (the rule that starts such a launcher, or its role, is not Profiler's)
    edit: bool = False


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
    """Evidence in a JSON document, string by string; a path built from parts may name its bucket in a sibling.

    A CreateTrainingJob (or UpdateTrainingJob) request inside it (a state machine task's Parameters) is judged by
    its settings, not by the words in it: `ProfilerConfig: {DisableProfiler: true}` is what a migrated launcher
    looks like, never Profiler evidence (request_evidence)."""
    try:
        value = expand_json(json.loads(text))
    except ValueError:
        return paths.match(text)
    requests, rest = split_requests(value)
    found = match_value(rest, paths)
    if found is not None and found.verdict == "profiler":
        return found
    launched = strongest(request_evidence(r) for r in requests)
    return strongest([launched, found]) if launched is not None else found


MAX_JSON_DEPTH = 4  # JSON inside a string inside JSON (an environment variable holding a request): a few levels


def expand_json(value: Any, depth: int = 0) -> Any:
    """A string that holds a JSON object or array (a function's environment variable holding a training request)
    is read as that JSON, so the request inside is judged by its settings, not by its words."""
    if isinstance(value, dict):
        return {k: expand_json(v, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_json(v, depth) for v in value]
    if isinstance(value, str) and depth < MAX_JSON_DEPTH and value.strip()[:1] in {"{", "["}:
        try:
            return expand_json(json.loads(value), depth + 1)
        except ValueError:
            return value
    return value


def strongest(found: Iterable[Evidence | None]) -> Evidence | None:
    """Profiler over Debugger over review (the order the audit decides in)."""
    rank = {"profiler": 0, "debugger": 1, "review": 2}
    present = [e for e in found if e is not None]
    return min(present, key=lambda e: (rank[e.verdict], e.edit)) if present else None


def match_value(value: Any, paths: LegacyPaths) -> Evidence | None:
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


# --- training-job requests (pipeline steps, state machine tasks) ----------------------------------------------

#: what a CreateTrainingJob request says about the Profiler and Debugger
REQUEST_KEYS = ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugRuleConfigurations")


class Dynamic:
    """A value only known when the launcher runs (a Step Functions `.$` path, a pipeline parameter without a
    default): the audit cannot say whether such a job profiles."""

    def __init__(self, what: str) -> None:
        self.what = what


def literal(value: Any) -> Any:
    """The resolver for plain JSON: a value is what it says."""
    return value


def _field(request: dict[str, Any], key: str, resolve: Callable[[Any], Any]) -> tuple[bool, Any]:
    if key in request:
        return True, resolve(request[key])
    if f"{key}.$" in request:  # Step Functions: the value is read from the execution's input at run time
        return True, Dynamic(f"{key}.$ = {request[f'{key}.$']}")
    return False, None


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def request_evidence(request: dict[str, Any], resolve: Callable[[Any], Any] = literal) -> Evidence | None:
    """A launcher's CreateTrainingJob request: Profiler's (an edit) when it names Profiler rules or a ProfilerConfig
    that is not `DisableProfiler: true`; nothing when the Profiler is off; Debugger's when it names only Debugger
    rules; review when the setting is only known at run time."""
    _, rules = _field(request, "ProfilerRuleConfigurations", resolve)
    has_config, config = _field(request, "ProfilerConfig", resolve)
    _, debug = _field(request, "DebugRuleConfigurations", resolve)
    for value in (rules, config):
        if isinstance(value, Dynamic):
            return Evidence(
                "review",
                f"launches training jobs whose Profiler setting is known only at run time ({value.what})",
                edit=True,
            )
    if isinstance(rules, list) and rules:
        names = ", ".join(str(r.get("RuleConfigurationName", "?")) for r in rules if isinstance(r, dict))
        return Evidence("profiler", f"launches training jobs with Profiler rules ({names})", edit=True)
    if has_config:
        disable = _field(config, "DisableProfiler", resolve)[1] if isinstance(config, dict) else None
        if isinstance(disable, Dynamic):
            return Evidence(
                "review",
                f"launches training jobs whose DisableProfiler is known only at run time ({disable.what})",
                edit=True,
            )
        if not _truthy(disable):
            return Evidence(
                "profiler", "launches profiled training jobs (ProfilerConfig without DisableProfiler: true)", edit=True
            )
    if isinstance(debug, list) and debug:
        names = ", ".join(str(r.get("RuleConfigurationName", "?")) for r in debug if isinstance(r, dict))
        return Evidence("debugger", f"launches training jobs with Debugger rules ({names})", edit=True)
    return None


def split_requests(value: Any) -> tuple[list[dict[str, Any]], Any]:
    """(the training-job requests in a JSON value, the value without their Profiler and Debugger settings)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        keys = {k for k in node if k.removesuffix(".$") in REQUEST_KEYS}
        if keys:
            found.append(node)
        return {k: walk(v) for k, v in node.items() if k not in keys}

    return found, walk(value)


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


@dataclass(frozen=True)
class Automation:
    """The ARNs of the account's functions, state machines and rules, by whether they are Profiler's: a statement
    that grants only on Profiler automation (lambda:InvokeFunction on a Profiler function, states:StartExecution
    on a Profiler state machine) is a Profiler statement."""

    profiler: frozenset[str] = frozenset()
    others: frozenset[str] = frozenset()

    def names(self, resource: str) -> str | None:
        """The Profiler ARN a policy Resource names, when it names only Profiler automation."""
        probe = wildcard(resource)

        def hit(arn: str) -> bool:  # `function:name:*` and `function:name:alias` name the function too
            return bool(probe.fullmatch(arn) or probe.fullmatch(arn + ":x"))

        hits = sorted(a for a in self.profiler if hit(a))
        if not hits or any(hit(a) for a in self.others):
            return None
        cut = max(hits[0].rfind(":"), hits[0].rfind("/")) + 1
        if probe.fullmatch(hits[0][:cut] + "zz0-another-resource"):  # `function:*`: any function, not evidence
            return None
        return hits[0]


def statement_evidence(
    statement: dict[str, Any], paths: LegacyPaths, automation: Automation | None = None
) -> Evidence | None:
    resources = _as_list(statement.get("Resource", []))
    texts = resources + _as_list(statement.get("NotResource", []))
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
    if best is None and automation is not None and resources and "NotResource" not in statement:
        named = [automation.names(r) for r in resources]
        hits = sorted({n for n in named if n})
        if all(named):
            return Evidence("profiler", "grants only on Profiler automation " + ", ".join(hits))
        if hits:
            return Evidence("review", f"grants on Profiler automation {hits[0]} among other resources")
    return best


@dataclass(frozen=True)
class DocumentVerdict:
    """A policy document read statement by statement."""

    evidence: Evidence | None  # the strongest evidence (None: names nothing of either)
    profiler_only: bool  # at least one Profiler statement and every other one neutral
    debugger_only: bool
    neutral_only: bool  # only what any function needs (logs, traces, a digest's SNS and job reads)
    profiler_statements: tuple[int, ...]  # indexes (or Sids) of the Profiler statements, for a partial edit


def classify_document(document: Any, paths: LegacyPaths, automation: Automation | None = None) -> DocumentVerdict:
    verdicts: list[Evidence | None] = []
    found = statements(document)
    for statement in found:
        verdicts.append(None if neutral(statement) else statement_evidence(statement, paths, automation))
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
