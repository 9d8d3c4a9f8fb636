"""Findings as a reader meets them: grouped by rule across ranks and hosts, plain titles and labels, one
recommendation per group; and the top causes of lost GPU time, each with the finding that explains it (or the
reason none does) and the one change to make.

Pure formatting over the summary (``findings``, ``cost``, ``ranks``, ``options.rule_thresholds``): a rule this
module does not know still renders (its id split into words, its own recommendation), and so does an evidence
key (its name in words, its unit from the schema's suffixes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from profstack.analysis.summary import SEVERITY_ORDER, severity_rank
from profstack.history.cost import LABELS as COST_LABELS
from profstack.history.cost import rank_shares
from profstack.report.format import count, dur, esc, get, nbytes, num, pct

#: plain titles of the rules ProfStack ships (profstack/analysis/rules.py, profstack/jobs/instance_rules.py,
#: profstack/history/regression.py); an unknown rule's id is split into words
RULE_TITLES: Mapping[str, str] = {
    "LowGPUUtilization": "GPU under-used",
    "CPUBound": "GPU waits for the host to launch work",
    "DataloaderBottleneck": "DataLoader slows the step",
    "StepOutlier": "Steps much slower than the rest",
    "LaunchOverheadBound": "Too many tiny kernels",
    "MemcpyHeavy": "Memory copies take GPU time",
    "TensorCoreUnderuse": "Computation in fp32, not on Tensor Cores",
    "BatchSize": "GPU idle without a host or input bottleneck",
    "ExcessiveSync": "Host synchronisation stalls the GPU",
    "GPUMemoryIncrease": "GPU memory grows",
    "CommunicationBound": "Communication not overlapped with computation",
    "Straggler": "A rank holds the others back",
    "LoadBalancing": "Work unevenly spread across ranks",
    "CPUBottleneck": "CPU cannot feed the GPUs",
    "IOBottleneck": "GPUs wait on input/output",
    "OverallSystemUsage": "System usage (for reference)",
    "Regression": "Slower than earlier jobs of the family",
    "UnreadableTraceFiles": "Trace files not fully read",
}

#: the one change to make, short, per rule (the finding's own recommendation says more, once, below it)
ONE_CHANGE: Mapping[str, str] = {
    "CommunicationBound": "Overlap communication with computation (DDP bucket_cap_mb, FSDP prefetch) "
    "or send fewer bytes (a bf16 compression hook).",
    "CPUBound": "Cut host work per step: torch.compile or CUDA graphs, fused optimizers, preprocessing off the "
    "training thread.",
    "LaunchOverheadBound": "Fuse small kernels (torch.compile) or capture the step in a CUDA graph.",
    "ExcessiveSync": "Remove implicit synchronisations (.item(), .cpu(), printing tensors) from the step.",
    "DataloaderBottleneck": "More DataLoader workers, pin_memory=True, persistent workers and prefetching.",
    "IOBottleneck": "Stage the data on local storage or stream it faster (more readers, larger objects).",
    "CPUBottleneck": "Move preprocessing off the training process, or pick an instance with more vCPUs per GPU.",
    "BatchSize": "Increase the batch size (and scale the learning rate), or use a smaller instance.",
    "LowGPUUtilization": "Find what the GPU waits for in the causes above, and fix the largest first.",
    "LoadBalancing": "Balance work across ranks: equal shard sizes and sequence lengths.",
    "Straggler": "Find why the straggler rank is slow (its host, its data shard, its GPU).",
    "MemcpyHeavy": "Keep tensors on the GPU; pinned memory and non_blocking=True for the copies left.",
    "TensorCoreUnderuse": "Use torch.autocast with bf16/fp16, or enable TF32.",
    "StepOutlier": "Open the outlier steps in the timeline: checkpointing, evaluation, GC or data stalls.",
    "GPUMemoryIncrease": "Find the tensors kept alive across steps before they end in an out-of-memory error.",
}

#: which rules explain each cause of lost GPU time (profstack.history.cost), in the order they are cited
CAUSE_RULES: Mapping[str, tuple[str, ...]] = {
    "host": ("CPUBound", "LaunchOverheadBound", "ExcessiveSync", "CPUBottleneck"),
    "input_pipeline": ("DataloaderBottleneck", "IOBottleneck", "CPUBottleneck"),
    "exposed_communication": ("CommunicationBound", "Straggler", "LoadBalancing"),
    "other_idle": ("BatchSize", "LaunchOverheadBound", "MemcpyHeavy", "StepOutlier"),
}

#: the change to make for a cause no finding explains
CAUSE_CHANGE: Mapping[str, str] = {
    "host": ONE_CHANGE["CPUBound"],
    "input_pipeline": ONE_CHANGE["DataloaderBottleneck"],
    "exposed_communication": ONE_CHANGE["CommunicationBound"],
    "other_idle": "Open the timeline (Perfetto) at the gaps between kernels: event waits, tiny kernels, "
    "work on other streams.",
}

CAUSE_TITLES: Mapping[str, str] = {
    "host": "GPU waiting on the host",
    "input_pipeline": "GPU waiting on the input pipeline",
    "exposed_communication": "Communication not overlapped with computation",
    "other_idle": "Other idle gaps between kernels",
}

#: plain labels of evidence keys; any other key is put in words by `evidence_label`
EVIDENCE_LABELS: Mapping[str, str] = {
    "comm_time_us": "communication time",
    "exposed_time_us": "exposed communication",
    "exposed_pct_of_step": "exposed share of the step",
    "exposed_pct_of_span": "exposed share of the GPU span",
    "overlap_pct_of_comm": "overlapped with computation",
    "host_wait_pct": "host waits, share of idle time",
    "host_wait_us": "host waits",
    "idle_pct": "GPU idle",
    "idle_time_us": "GPU idle time",
    "gpu_busy_pct": "GPU busy",
    "gpu_span_us": "GPU span",
    "threshold_pct": "rule threshold",
    "threshold_us": "rule threshold",
    "min_us": "lowest rank",
    "max_us": "highest rank",
    "spread_pct": "spread",
    "p95_pct": "p95",
    "p5_pct": "p5",
    "datapoints": "data points (1 min)",
    "gpus": "GPUs",
    "host": "host",
    "source": "measured by",
    "instance_type": "instance type",
    "window_points": "moving-average window (points)",
    "from_pct": "from",
    "to_pct": "to",
    "increase_pct": "rise",
    "dataloader_time_us": "DataLoader time",
    "step_time_us": "step time",
    "share_pct": "share",
    "outlier_steps": "outlier steps",
    "mean_us": "mean",
    "std_us": "standard deviation",
    "tiny_kernel_share_pct": "tiny kernels",
    "kernels": "kernels",
    "tiny_kernel_us": "tiny means under",
    "cpu_launch_mean_us": "CPU launch call (mean)",
    "sync_calls": "synchronisation calls",
    "sync_time_us": "time in synchronisation",
    "gpu_busy_during_waits_pct": "GPU busy during the waits",
    "gpu_idle_during_waits_us": "GPU idle during the waits",
    "gpu_idle_during_waits_pct_of_window": "GPU idle during the waits, share of window",
    "resolution_us": "time resolution",
    "memcpy_time_us": "memcpy time",
    "host_device_copies": "host ↔ device copies",
    "fp32_time_us": "fp32 kernel time",
    "computation_kernel_time_us": "computation kernel time",
    "fp32_share_pct": "fp32 share",
    "tensor_core_pct_of_compute": "Tensor Core share of computation",
    "first_step_peak_bytes": "first step's peak",
    "last_step_peak_bytes": "last step's peak",
    "peak_reserved_bytes": "peak reserved",
    "device": "device",
    "files": "files",
    "time_pct": "share of the time",
    "threshold_time_pct": "rule threshold (time)",
    "gpu_threshold_pct": "GPU below",
    "cpu_threshold_pct": "CPU above",
    "cpu_below_pct": "CPU below",
    "iowait_threshold_pct": "iowait above",
    "threshold_p95_pct": "rule threshold (p95)",
    "threshold_p5_pct": "rule threshold (p5)",
}

_WORDS = {
    "pct": "%",
    "us": "",
    "bytes": "",
    "gpu": "GPU",
    "cpu": "CPU",
    "comm": "communication",
    "p50": "p50",
    "dl": "DataLoader",
    "num": "number of",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_BACKTICKS = re.compile(r"`([^`\n]{1,200})`")
_ANCHOR_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: rows shown per group before "and N more"
MAX_ROWS_PER_GROUP = 8
MAX_EVIDENCE_ITEMS = 12


def rule_title(rule_id: object) -> str:
    rid = str(rule_id or "finding")
    if rid in RULE_TITLES:
        return RULE_TITLES[rid]
    words = _CAMEL.sub(" ", rid).replace("_", " ").strip()
    return words[:1].upper() + words[1:].lower() if words else "Finding"


def prose(text: object) -> str:
    """Escaped text; `code` spans (back-quoted) become <code>, a stray back-quote disappears."""
    escaped = esc(text)
    coded = _BACKTICKS.sub(lambda m: f"<code>{m.group(1)}</code>", escaped)
    return coded.replace("`", "")


def evidence_label(key: str) -> str:
    """A plain label for an evidence key: the known ones by name, any other in words (`host_wait_us` -> `host
    wait`; units go with the value, never in the label)."""
    if key in EVIDENCE_LABELS:
        return EVIDENCE_LABELS[key]
    words = [w for w in key.split("_") if w]
    if words and words[-1] in ("us", "bytes"):
        words = words[:-1]
    shown = [_WORDS.get(w, w) for w in words]
    if shown and shown[-1] == "%":
        shown = ["share of", *shown[:-1]] if len(shown) > 1 else shown
    text = " ".join(w for w in shown if w).replace(" % ", " ")
    return text or key


def evidence_value(key: str, value: object) -> str:
    """The value with its unit (escaped HTML): never a Python literal, a mapping is listed as `name: value`."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = num(value)
    if v is not None:
        if key.endswith("_us"):
            return esc(dur(v))
        if key.endswith("_pct") or key.endswith("_pct_of_window") or "_pct_of_" in key:
            return esc(pct(v))
        if key.endswith("_bytes"):
            return esc(nbytes(v))
        if float(v).is_integer():
            return esc(count(v))
        return esc(f"{v:,.3g}")
    if isinstance(value, Mapping):
        items = list(value.items())[:MAX_EVIDENCE_ITEMS]
        more = f" and {len(value) - len(items)} more" if len(value) > len(items) else ""
        return "; ".join(f"{esc(k)}: {evidence_value(str(k), v)}" for k, v in items) + esc(more)
    if isinstance(value, list | tuple):
        shown = [evidence_value(key.removesuffix("s"), x) for x in value[:MAX_EVIDENCE_ITEMS]]
        return ", ".join(shown) + (" …" if len(value) > MAX_EVIDENCE_ITEMS else "")
    if value is None:
        return "—"
    return prose(value)


def where(finding: Mapping[str, Any]) -> str:
    """Where a finding was seen, in words: `rank 0`, `ranks 0, 1`, `algo-1 (CloudWatch)`, `whole job`."""
    ranks = [r for r in (get(finding, "ranks") or []) if not isinstance(r, bool)]
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks:
        shown = ", ".join(str(r) for r in ranks[:16])
        return f"ranks {shown}{' …' if len(ranks) > 16 else ''}"
    host = get(finding, "evidence", "host")
    cloudwatch = get(finding, "evidence", "source") == "cloudwatch"
    if host:
        return f"{host} (CloudWatch)" if cloudwatch else str(host)
    return "whole job (CloudWatch)" if cloudwatch else "whole job"


def _unscoped(message: str, finding: Mapping[str, Any]) -> str:
    """The message without its leading `rank 0: ` / `algo-1: ` (the row says where)."""
    ranks = get(finding, "ranks") or []
    prefixes = [f"rank {r}: " for r in ranks[:1]] + [f"{get(finding, 'evidence', 'host')}: "]
    for p in prefixes:
        if message.startswith(p):
            return message[len(p) :]
    return message


@dataclass
class Group:
    """The findings of one rule, over every rank and host."""

    rule_id: str
    anchor: str
    items: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def severity(self) -> str:
        worst = min((severity_rank(get(f, "severity")) for f in self.items), default=9)
        return next((s for s, i in SEVERITY_ORDER.items() if i == worst), "info")

    @property
    def title(self) -> str:
        return rule_title(self.rule_id)

    @property
    def recommendations(self) -> list[str]:
        seen: list[str] = []
        for f in self.items:
            rec = str(get(f, "recommendation") or "").strip()
            if rec and rec not in seen:
                seen.append(rec)
        return seen

    @property
    def ranks(self) -> list[int]:
        out: list[int] = []
        for f in self.items:
            out += [r for r in (get(f, "ranks") or []) if isinstance(r, int) and not isinstance(r, bool)]
        return sorted(set(out))

    @property
    def change(self) -> str:
        if self.rule_id in ONE_CHANGE:
            return ONE_CHANGE[self.rule_id]
        recs = self.recommendations
        return first_sentence(recs[0]) if recs else ""

    def scope(self) -> str:
        ranks = self.ranks
        hosts = sorted({str(get(f, "evidence", "host")) for f in self.items if get(f, "evidence", "host")})
        parts = []
        if ranks:
            parts.append(f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks")
        if hosts:
            parts.append(hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts")
        return " · ".join(parts) or "whole job"


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", text.strip(), re.S)
    return match.group(1) if match else text.strip()


def group_findings(findings: Sequence[object]) -> list[Group]:
    """One group per rule id, most severe group first (then the summary's order); anchors unique and safe."""
    groups: dict[str, Group] = {}
    for f in findings:
        if not isinstance(f, Mapping):
            continue
        rid = str(get(f, "rule_id") or "finding")
        if rid not in groups:
            base = "f-" + (_ANCHOR_SAFE.sub("-", rid)[:60] or "finding")
            anchor, n = base, 2
            while any(g.anchor == anchor for g in groups.values()):
                anchor, n = f"{base}-{n}", n + 1
            groups[rid] = Group(rid, anchor)
        groups[rid].items.append(f)
    ordered = list(groups.values())
    ordered.sort(key=lambda g: severity_rank(g.severity))  # stable: the summary's order within a severity
    return ordered


# ------------------------------------------------------------------------------------------ rendering


def _chips(evidence: object, skip: Sequence[str] = ("host", "source")) -> str:
    if not isinstance(evidence, Mapping) or not evidence:
        return ""
    items = [(str(k), v) for k, v in evidence.items() if str(k) not in skip][:MAX_EVIDENCE_ITEMS]
    if not items:
        return ""
    return (
        '<div class="chips">'
        + "".join(f'<span class="chip">{esc(evidence_label(k))} <b>{evidence_value(k, v)}</b></span>' for k, v in items)
        + "</div>"
    )


def _recommendation(g: Group) -> str:
    """One recommendation per group: the one change to make, then the rule's own advice behind `more` (each
    distinct text once, however many ranks and hosts the rule fired on)."""
    recs = g.recommendations
    change = g.change
    full = "".join(f"<p>{prose(r)}</p>" for r in recs if r.strip() != change.strip())
    summary = "the rule's advice in full" if len(recs) == 1 else f"the {len(recs)} pieces of advice in full"
    more = f"<details><summary>{summary}</summary>{full}</details>"
    return f'<div class="rec"><b class="rec-h">What to do</b> {prose(change)}{more if full else ""}</div>'


def render_group(g: Group) -> str:
    sev = g.severity if g.severity in SEVERITY_ORDER else "info"
    rows = []
    for f in g.items[:MAX_ROWS_PER_GROUP]:
        message = _unscoped(str(get(f, "message") or ""), f)
        chips = _chips(get(f, "evidence"))
        evidence = f"<details><summary>evidence</summary>{chips}</details>" if chips else ""
        rows.append(f'<li><span class="where">{esc(where(f))}</span> {prose(message)}{evidence}</li>')
    if len(g.items) > MAX_ROWS_PER_GROUP:
        rest = g.items[MAX_ROWS_PER_GROUP:]
        places = ", ".join(where(f) for f in rest[:8]) + (" …" if len(rest) > 8 else "")
        rows.append(f'<li class="muted">and {len(rest)} more ({esc(places)}): every one is in summary.json</li>')
    return (
        f'<div class="card finding {sev}" id="{g.anchor}"><div class="head">'
        f'<span class="badge {sev}">{esc(sev)}</span><h3 class="rule">{esc(g.title)}</h3>'
        f'<span class="ranks">{esc(g.scope())}</span><code class="rid">{esc(g.rule_id)}</code></div>'
        f'<ul class="seen">{"".join(rows)}</ul>{_recommendation(g)}</div>'
    )


def render_findings(summary: Mapping[str, Any], groups: Sequence[Group]) -> str:
    findings = [f for f in (get(summary, "findings") or []) if isinstance(f, Mapping)]
    counts = {s: sum(1 for f in findings if get(f, "severity") == s) for s in SEVERITY_ORDER}
    tally = " · ".join(f"{n} {s}{'s' if s == 'warning' and n != 1 else ''}" for s, n in counts.items() if n)
    hint = f"{len(groups)} rule{'s' if len(groups) != 1 else ''}" + (f" · {tally}" if tally else "")
    head = f'<h2 id="findings">Findings <span class="hint">{esc(hint)}</span></h2>'
    if not groups:
        return head + '<div class="card"><span class="badge ok">no issues</span> No rule fired for these traces.</div>'
    return head + '<div class="grid findings">' + "".join(render_group(g) for g in groups) + "</div>"


# ------------------------------------------------------------------------------------------ causes


@dataclass(frozen=True)
class Cause:
    cause: str
    title: str
    share_pct: float
    usd: float | None
    gpu_hours: float | None
    explained_by: Group | None
    why_no_finding: str  # when explained_by is None: why no rule fired, in words
    change: str


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cause_shares(summary: Mapping[str, Any]) -> list[tuple[str, float, float | None, float | None]]:
    """(cause, share of GPU time %, usd, GPU-hours), largest first: the cost section's when it is there (the
    processor priced it), else the same shares computed from the ranks (profstack.history.cost.rank_shares)."""
    attribution = [a for a in (get(summary, "cost", "attribution") or []) if isinstance(a, Mapping)]
    out: list[tuple[str, float, float | None, float | None]] = []
    if attribution:
        for a in attribution:
            share = num(get(a, "share_pct"))
            if share is not None:
                out.append((str(get(a, "cause")), share, num(get(a, "usd")), num(get(a, "gpu_hours"))))
    else:
        ranks = [
            r
            for r in (get(summary, "ranks") or [])
            if isinstance(r, Mapping) and get(r, "has_gpu") and (num(get(r, "temporal_breakdown", "gpu_span_us")) or 0)
        ]
        per = [rank_shares(r) for r in ranks]
        for cause in COST_LABELS:
            values = [v for s in per if (v := s.get(cause)) is not None]
            mean = _mean(values)
            if mean is not None:
                out.append((cause, 100.0 * mean, None, None))
    out.sort(key=lambda c: -c[1])
    return out


def _threshold(summary: Mapping[str, Any], name: str) -> float | None:
    return num(get(summary, "options", "rule_thresholds", name))


def _why_host_silent(summary: Mapping[str, Any], groups: Sequence[Group]) -> tuple[str, str]:
    """Why no finding names the host waits, from the rule's own thresholds (options.rule_thresholds)."""
    wait_th = _threshold(summary, "cpu_bound_host_wait_pct")
    idle_th = _threshold(summary, "cpu_bound_min_idle_pct")
    gpu = [r for r in (get(summary, "ranks") or []) if isinstance(r, Mapping) and get(r, "has_gpu")]
    waits = [w for r in gpu if (w := num(get(r, "idle_breakdown", "host_wait_pct"))) is not None]
    idles = [i for r in gpu if (i := num(get(r, "temporal_breakdown", "idle_pct"))) is not None]
    comm = next((g for g in groups if g.rule_id == "CommunicationBound"), None)
    wait_txt = f"host waits are {pct(_mean(waits))} of the GPU's idle time" if waits else "host waits were measured"
    over = wait_th is not None and idle_th is not None and bool(waits) and bool(idles)
    over = over and max(waits) > (wait_th or 0) and max(idles) >= (idle_th or 0)
    if comm is not None and (over or wait_th is None):
        why = (
            f"No finding names the host waits (rule CPUBound) although {wait_txt}"
            + (f", above that rule's {pct(wait_th, 0)}" if wait_th is not None else "")
            + f": where communication is not overlapped (CommunicationBound, on {comm.scope()}) CPUBound stays "
            "silent, because a GPU waiting on collectives also makes the host launch late. Fix the communication "
            "first; the host waits that remain are the host's own."
        )
        return why, f"{ONE_CHANGE['CommunicationBound']} Then, if the GPU still waits: {ONE_CHANGE['CPUBound']}"
    if wait_th is not None and idle_th is not None:
        why = (
            f"No rule fired: {wait_txt}; CPUBound needs more than {pct(wait_th, 0)} of the idle time in host "
            f"waits with the GPU idle at least {pct(idle_th, 0)} of its span."
        )
    else:
        why = f"No rule fired on it ({wait_txt})."
    return why, CAUSE_CHANGE["host"]


def _why_silent(cause: str, summary: Mapping[str, Any], groups: Sequence[Group]) -> tuple[str, str]:
    if cause == "host":
        return _why_host_silent(summary, groups)
    if cause == "exposed_communication":
        th = _threshold(summary, "comm_bound_exposed_pct")
        return (
            "No rule fired: CommunicationBound needs exposed communication above "
            f"{pct(th, 0) if th is not None else 'its threshold'} of the step on a rank.",
            CAUSE_CHANGE[cause],
        )
    if cause == "input_pipeline":
        th = _threshold(summary, "dataloader_share_pct")
        return (
            "No rule fired: DataloaderBottleneck needs the DataLoader above "
            f"{pct(th, 0) if th is not None else 'its threshold'} of step time.",
            CAUSE_CHANGE[cause],
        )
    low = next((g for g in groups if g.rule_id == "LowGPUUtilization"), None)
    if cause == "other_idle" and low is not None:
        return (
            f"No rule names these gaps one by one; the GPU under-used finding (LowGPUUtilization) covers them, on "
            f"{low.scope()}.",
            CAUSE_CHANGE[cause],
        )
    return "No rule fired on it at the configured thresholds.", CAUSE_CHANGE.get(cause, "")


def top_causes(summary: Mapping[str, Any], groups: Sequence[Group], limit: int = 3) -> list[Cause]:
    """The causes of lost GPU time, largest first (at most `limit`, none under 0.05 %), each explained."""
    out: list[Cause] = []
    for cause, share, usd, hours in cause_shares(summary):
        if share < 0.05 or len(out) >= limit:
            continue
        covering = [g for rid in CAUSE_RULES.get(cause, ()) for g in groups if g.rule_id == rid]
        if covering:
            group = covering[0]
            out.append(Cause(cause, CAUSE_TITLES.get(cause, cause), share, usd, hours, group, "", group.change))
        else:
            why, change = _why_silent(cause, summary, groups)
            out.append(Cause(cause, CAUSE_TITLES.get(cause, cause), share, usd, hours, None, why, change))
    return out


def explanation_html(c: Cause) -> str:
    if c.explained_by is not None:
        g = c.explained_by
        return f'Finding: <a href="#{g.anchor}">{esc(g.title)}</a> <span class="muted">({esc(g.scope())})</span>'
    return f'<span class="silent">{prose(c.why_no_finding)}</span>'


def _usd(v: float | None) -> str:
    return f"${v:,.2f}" if v is not None else ""


def render_causes(summary: Mapping[str, Any], causes: Sequence[Cause]) -> str:
    """The overview's "where the GPU time went": the top causes, each with its cost and the one change."""
    if not causes:
        return ""
    priced = any(c.usd is not None for c in causes)
    items = []
    for i, c in enumerate(causes, 1):
        cost = (
            f'<span class="cost">{esc(_usd(c.usd))}</span>'
            + (f'<span class="muted"> · {c.gpu_hours:,.1f} GPU-hours</span>' if c.gpu_hours is not None else "")
            if c.usd is not None
            else ""
        )
        width = min(max(c.share_pct, 0.0), 100.0)
        bar = f'<span class="meter" aria-hidden="true"><i style="width:{width:.1f}%"></i></span>'
        items.append(
            f'<li class="cause"><div class="cause-head"><span class="n">{i}</span>'
            f'<span class="what">{esc(c.title)}</span>'
            f'<span class="share">{esc(pct(c.share_pct))} of GPU time</span>{cost}</div>{bar}'
            f'<p class="why">{explanation_html(c)}</p>'
            f'<p class="change"><b>Change:</b> {prose(c.change)}</p></li>'
        )
    basis = (
        "Shares of the job's GPU time (mean over the profiled GPU ranks), priced at on-demand rates (GPU cost below)."
        if priced
        else "Shares of GPU time, mean over the profiled GPU ranks (no price: the job's instance is unknown here)."
    )
    return (
        f'<h2 id="causes">Where the GPU time was lost <span class="hint">top {len(causes)}</span></h2>'
        f'<div class="card causes"><ol class="causes">{"".join(items)}</ol><p class="hint">{esc(basis)}</p></div>'
    )
