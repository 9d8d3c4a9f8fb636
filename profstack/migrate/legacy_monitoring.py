"""CloudWatch alarms and dashboards in the legacy audit: those that watch what the Profiler left.

SageMaker publishes no metric of its own for Profiler rules, so teams built them: a function that reads the rule
statuses publishes a custom metric, an alarm watches the rule-evaluation processing jobs' instance metrics, a
dashboard shows the Profiler digest's errors and its log. A metric is Profiler's by evidence, never by its name:

- a dimension names a verified Profiler rule-evaluation job (`Host = <rule job>/algo-1` in
  `/aws/sagemaker/ProcessingJobs`), or verified Profiler output;
- it is the metric of Profiler automation: `AWS/Lambda` for a Profiler function, `AWS/States` for a Profiler state
  machine, `AWS/Events` for a Profiler rule;
- its namespace is one that a Profiler function's configuration names (where it publishes) and no other function's.

A metric alarm is Profiler's when its metric (or every metric of its math) is; a composite alarm when every alarm
its rule names is (a composite over Profiler and other alarms is for review: edit its rule). A dashboard's widgets
are judged one by one (metrics, alarms, Logs Insights sources; text widgets are neutral): a dashboard whose every
widget is Profiler's goes whole, one with some is an edit (remove those widgets). Debugger's are named and kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from profstack.migrate.legacy_automation import Graph, Node
from profstack.migrate.legacy_evidence import Evidence, LegacyPaths, strongest

MAX_WIDGETS = 500  # CloudWatch allows 500 widgets a dashboard
_SOURCE = re.compile(r"SOURCE\s+'([^']+)'", re.IGNORECASE)
#: an alarm a composite's rule names: ALARM(name), OK("name"), INSUFFICIENT_DATA(arn), by name or ARN
_ALARM_REF = re.compile(r"\b(?:ALARM|OK|INSUFFICIENT_DATA)\(\s*\"?([^\")]+?)\"?\s*\)", re.IGNORECASE)


@dataclass(frozen=True)
class Watched:
    """What alarms and dashboards can name, from the resolved automation graph of one region."""

    paths: LegacyPaths
    functions: dict[str, Node]  # name -> function
    machines: dict[str, Node]  # ARN -> state machine
    rules: dict[str, Node]  # name -> rule
    profiler_namespaces: frozenset[str]
    log_groups: dict[str, Node]  # /aws/lambda/<name> -> function

    @classmethod
    def of(cls, graph: Graph, paths: LegacyPaths, region: str) -> Watched:
        here = [n for n in graph.nodes.values() if n.region == region or not n.region]
        functions = {n.name: n for n in here if n.kind == "lambda"}
        mine = {v for f in functions.values() if f.is_profiler_automation for v in _namespaces(f)}
        others = {v for f in functions.values() if not f.is_profiler_automation for v in _namespaces(f)}
        return cls(
            paths=paths,
            functions=functions,
            machines={n.arn: n for n in here if n.kind == "state-machine"},
            rules={n.name: n for n in here if n.kind == "rule"},
            profiler_namespaces=frozenset(v for v in mine - others if v and not v.startswith(("AWS/", "/aws/"))),
            log_groups={f"/aws/lambda/{name}": f for name, f in functions.items()},
        )

    def _automation(self, node: Node | None, what: str) -> Evidence | None:
        if node is None or node.evidence is None:
            return None
        if node.is_profiler_automation:
            return Evidence("profiler", f"watches Profiler {what} {node.name}")
        if node.verdict == "debugger":
            return Evidence("debugger", f"watches Debugger {what} {node.name}")
        return None

    def metric(self, namespace: str, name: str, dimensions: dict[str, str]) -> Evidence | None:
        """Whose one metric is (None: nobody's that the audit knows of)."""
        for value in dimensions.values():
            found = self.paths.match(value)
            if found is not None and found.verdict != "review":
                return Evidence(found.verdict, f"metric {namespace} {name}: dimension {found.reason}")
        if namespace == "AWS/Lambda":
            function = dimensions.get("FunctionName") or dimensions.get("Resource", "").split(":", 1)[0]
            return self._automation(self.functions.get(function), "function")
        if namespace == "AWS/States":
            return self._automation(self.machines.get(dimensions.get("StateMachineArn", "")), "state machine")
        if namespace == "AWS/Events":
            return self._automation(self.rules.get(dimensions.get("RuleName", "")), "EventBridge rule")
        if namespace in self.profiler_namespaces:
            return Evidence("profiler", f"metric {namespace} {name}: a namespace only Profiler functions publish to")
        return None

    def log_source(self, group: str) -> Evidence | None:
        return self._automation(self.log_groups.get(group), "function's log")


def _namespaces(function: Node) -> set[str]:
    """The metric namespaces a function's configuration names: a variable called like one (`METRIC_NAMESPACE`,
    `CW_NAMESPACE`), or a value shaped like one (`Team/ProfilerRules`); `prod` in `STAGE` is not a namespace."""
    return {
        value
        for key, value in function.env
        if value and ("NAMESPACE" in key.upper() or re.fullmatch(r"[A-Za-z0-9_.#:-]+(/[A-Za-z0-9_.#:-]+)+", value))
    }


def _dimensions(items: Any) -> dict[str, str]:
    return {str(d.get("Name")): str(d.get("Value")) for d in items or [] if isinstance(d, dict)}


def _alarm_metrics(alarm: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, str]]]:
    if alarm.get("MetricName"):
        yield str(alarm.get("Namespace", "")), str(alarm["MetricName"]), _dimensions(alarm.get("Dimensions"))
    for query in alarm.get("Metrics") or []:
        metric = (query.get("MetricStat") or {}).get("Metric") or {}
        if metric.get("MetricName"):
            yield str(metric.get("Namespace", "")), str(metric["MetricName"]), _dimensions(metric.get("Dimensions"))


def _all_or_review(found: list[Evidence | None], what: str) -> Evidence | None:
    """Profiler's (or Debugger's) when every part is; a mix of Profiler's and others' is for review."""
    known = [e for e in found if e is not None]
    if not known:
        return None
    verdicts = {e.verdict for e in known}
    if len(known) == len(found) and len(verdicts) == 1:
        return Evidence(known[0].verdict, "; ".join(sorted({e.reason for e in known})))
    if "profiler" in verdicts:
        reason = next(e.reason for e in known if e.verdict == "profiler")
        return Evidence("review", f"{reason}, among {what} that are not Profiler's: edit it")
    return strongest(known)


def metric_alarm_evidence(alarm: dict[str, Any], watched: Watched) -> Evidence | None:
    found: list[Evidence | None] = [watched.metric(*m) for m in _alarm_metrics(alarm)]
    for query in alarm.get("Metrics") or []:  # a SEARCH() expression may name a rule job
        named = watched.paths.match(str(query.get("Expression") or ""))
        if named is not None and named.verdict != "review":
            found.append(named)
    return _all_or_review(found, "the metrics it watches")


@dataclass
class Watchers:
    """The alarms and dashboards of one region, judged."""

    alarms: dict[str, tuple[dict[str, Any], Evidence | None]] = field(default_factory=dict)  # name -> (alarm, why)
    dashboards: list[tuple[str, str, Evidence | None, list[int]]] = field(default_factory=list)


def read_alarms(cloudwatch: Any, watched: Watched, watchers: Watchers) -> None:
    """Metric alarms first, then composite alarms over them (DescribeAlarms lists composites only when asked)."""
    composites: list[dict[str, Any]] = []
    pages = cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    for page in pages:
        for alarm in page.get("MetricAlarms", []):
            watchers.alarms[alarm["AlarmName"]] = (alarm, metric_alarm_evidence(alarm, watched))
        composites += page.get("CompositeAlarms", [])
    for _ in range(len(composites)):  # a composite may name another composite: settle in at most n passes
        changed = False
        for alarm in composites:
            names = [n.strip().split(":alarm:")[-1] for n in _ALARM_REF.findall(str(alarm.get("AlarmRule", "")))]
            found = [watchers.alarms.get(n, ({}, None))[1] for n in names]
            evidence = _all_or_review(found, "the alarms its rule names") if names else None
            if watchers.alarms.get(alarm["AlarmName"], ({}, None))[1] != evidence:
                watchers.alarms[alarm["AlarmName"]] = (alarm, evidence)
                changed = True
        if not changed:
            break


def _rows(metrics: Any) -> Iterator[tuple[str, str, dict[str, str]]]:
    """A metric widget's rows: [namespace, name, dim, value, ..., {options}], where "." repeats the row above."""
    previous: list[str] = []
    for row in metrics if isinstance(metrics, list) else []:
        if not isinstance(row, list):
            continue
        parts = [p for p in row if isinstance(p, str)]
        resolved = [previous[i] if p == "." and i < len(previous) else p for i, p in enumerate(parts)]
        previous = resolved
        if len(resolved) >= 2:
            pairs = resolved[2:]
            yield resolved[0], resolved[1], dict(zip(pairs[::2], pairs[1::2], strict=False))


def widget_evidence(widget: dict[str, Any], watched: Watched, watchers: Watchers) -> Evidence | None:
    """One widget's evidence; a text widget is neutral (a note that mentions the Profiler is not evidence)."""
    if widget.get("type") == "text":
        return None
    properties = widget.get("properties") or {}
    found: list[Evidence | None] = [watched.metric(*row) for row in _rows(properties.get("metrics"))]
    alarms = list(properties.get("alarms") or []) + list((properties.get("annotations") or {}).get("alarms") or [])
    for arn in alarms:
        found.append(watchers.alarms.get(str(arn).rsplit(":", 1)[-1], ({}, None))[1])
    query = str(properties.get("query") or "")
    for group in _SOURCE.findall(query):
        found.append(watched.log_source(group))
    if query and not _SOURCE.findall(query):
        named = watched.paths.match(query)
        found.append(named if named is not None and named.verdict != "review" else None)
    return _all_or_review(found, "the widget's other contents")


def read_dashboards(cloudwatch: Any, watched: Watched, watchers: Watchers) -> None:
    for page in cloudwatch.get_paginator("list_dashboards").paginate():
        for entry in page.get("DashboardEntries", []):
            name = entry["DashboardName"]
            got = cloudwatch.get_dashboard(DashboardName=name)
            try:
                body = json.loads(got.get("DashboardBody") or "{}")
            except ValueError:
                body = {}
            widgets = [w for w in (body.get("widgets") or [])[:MAX_WIDGETS] if isinstance(w, dict)]
            verdicts = [widget_evidence(w, watched, watchers) for w in widgets]
            judged = [(i, e) for i, e in enumerate(verdicts) if widgets[i].get("type") != "text"]
            profiler = [i for i, e in judged if e is not None and e.verdict == "profiler"]
            evidence: Evidence | None
            if profiler and len(profiler) == len(judged):
                evidence = Evidence("profiler", "every widget watches Profiler's: " + verdicts[profiler[0]].reason)  # type: ignore[union-attr]
            elif profiler:
                which = ", ".join(str(i) for i in profiler)
                widgets_watch = (
                    f"widgets {which} of {len(judged)} watch"
                    if len(profiler) > 1
                    else f"widget {which} of {len(judged)} watches"
                )
                evidence = Evidence(
                    "profiler",
                    f"{widgets_watch} Profiler's ({verdicts[profiler[0]].reason}): remove only "  # type: ignore[union-attr]
                    + ("those" if len(profiler) > 1 else "that one"),
                    edit=True,
                )
            else:
                evidence = strongest(e for _, e in judged)
            arn = str(got.get("DashboardArn") or entry.get("DashboardArn") or name)
            watchers.dashboards.append((name, arn, evidence, profiler))
