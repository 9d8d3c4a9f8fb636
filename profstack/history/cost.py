"""What a job's GPUs cost, and what the idle causes the analysis found cost.

GPU-hours = GPUs per instance x instance count x training time; dollars = instance count x billable time
x the on-demand price (``prices.py``). The shares come from the profiled window of each GPU rank and are
taken as representative of the whole job (the ``basis`` string says so):

* ``host``: GPU idle while waiting for the host to launch work (``idle_breakdown.host_wait``), less the
  part the input pipeline explains;
* ``input_pipeline``: the DataLoader's share of step time, capped at the host-wait idle it can explain;
* ``exposed_communication``: communication kernels that no compute overlaps ((comm - overlap) / span);
* ``other_idle``: the rest of the idle time (gaps between kernels, other waits).

The shares never add up to more than 100 % of GPU time, and a cause the summary cannot measure is left out
with a note instead of being guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from profstack.analysis.loose import at as _get
from profstack.analysis.loose import mapping as _mapping
from profstack.analysis.loose import number as _num
from profstack.analysis.summary import Cost, CostCause, CostShare
from profstack.history.prices import PriceTable

LABELS: Mapping[CostCause, str] = {
    "host": "waiting on the host",
    "input_pipeline": "on the input pipeline",
    "exposed_communication": "on exposed communication",
    "other_idle": "on other idle gaps",
}


@dataclass(frozen=True)
class JobResources:
    """What DescribeTrainingJob says about the hardware and time the job used."""

    instance_type: str | None
    instance_count: int | None
    duration_s: float | None
    billable_s: float | None

    @classmethod
    def from_describe(cls, describe: Mapping[str, Any]) -> JobResources:
        """From a DescribeTrainingJob response (a heterogeneous cluster's first group names the type;
        the count is summed over groups)."""
        rc = describe.get("ResourceConfig")
        rc = rc if isinstance(rc, Mapping) else {}
        itype = rc.get("InstanceType")
        count = rc.get("InstanceCount")
        groups = [g for g in rc.get("InstanceGroups") or [] if isinstance(g, Mapping)]
        if groups and not itype:
            types = {str(g.get("InstanceType")) for g in groups}
            itype = types.pop() if len(types) == 1 else None
            count = sum(int(g.get("InstanceCount") or 0) for g in groups)
        duration = _seconds(describe.get("TrainingTimeInSeconds"))
        if duration is None:
            start, end = describe.get("TrainingStartTime"), describe.get("TrainingEndTime")
            if isinstance(start, datetime) and isinstance(end, datetime) and end > start:
                duration = (end - start).total_seconds()
        billable = _seconds(describe.get("BillableTimeInSeconds"))
        return cls(
            instance_type=str(itype) if itype else None,
            instance_count=int(count) if isinstance(count, int) and count > 0 else None,
            duration_s=duration,
            billable_s=billable if billable is not None else duration,
        )


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _clamp(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def rank_shares(rank: Mapping[str, Any]) -> dict[CostCause, float | None]:
    """Fractions (0-1) of one GPU rank's span per cause; None where the summary cannot tell."""
    span = _num(_get(rank, "temporal_breakdown", "gpu_span_us")) or 0.0
    idle_pct = _num(_get(rank, "temporal_breakdown", "idle_pct"))
    if span <= 0 or idle_pct is None:
        return dict.fromkeys(LABELS, None)
    idle = _clamp(idle_pct / 100.0)
    host_pct = _num(_get(rank, "idle_breakdown", "host_wait_pct"))
    host = idle * _clamp(host_pct / 100.0) if host_pct is not None else None
    dl_pct = _num(_get(rank, "dataloader", "share_pct"))
    data = min(_clamp(dl_pct / 100.0), host) if dl_pct is not None and host is not None else None
    comm = _num(_get(rank, "communication", "comm_time_us")) or 0.0
    overlap = _num(_get(rank, "communication", "overlap_time_us")) or 0.0
    exposed = _clamp((comm - overlap) / span)
    # busy time is 1 - idle: exposed communication is busy time, so it cannot exceed it
    exposed = min(exposed, 1.0 - idle)
    return {
        "host": host - (data or 0.0) if host is not None else None,
        "input_pipeline": data,
        "exposed_communication": exposed,
        "other_idle": idle - host if host is not None else idle,
    }


def _gpu_ranks(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    ranks = [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]
    return [r for r in ranks if r.get("has_gpu") and (_num(_get(r, "temporal_breakdown", "gpu_span_us")) or 0) > 0]


def job_cost(summary: Mapping[str, Any], resources: JobResources, prices: PriceTable) -> Cost:
    """The ``cost`` section of a job's summary."""
    notes: list[str] = []
    entry = prices.lookup(resources.instance_type) if resources.instance_type else None
    if resources.instance_type is None:
        notes.append("DescribeTrainingJob names no single instance type; no cost computed")
    elif entry is None:
        notes.append(
            f"{resources.instance_type} is not in the price table (as of {prices.as_of}); "
            "add it under history.prices in the config"
        )
    gpus_per = entry.gpus if entry else None
    gpu_count = gpus_per * resources.instance_count if gpus_per is not None and resources.instance_count else None
    if resources.duration_s is None:
        notes.append("DescribeTrainingJob gives no training time; no GPU-hours computed")
    gpu_hours = gpu_count * resources.duration_s / 3600.0 if gpu_count is not None and resources.duration_s else None
    price = entry.usd_per_hour if entry else None
    total = (
        resources.instance_count * resources.billable_s / 3600.0 * price
        if price is not None and resources.instance_count and resources.billable_s
        else None
    )
    ranks = _gpu_ranks(summary)
    per_rank = [rank_shares(r) for r in ranks]
    attribution: list[CostShare] = []
    for cause, label in LABELS.items():
        values = [s[cause] for s in per_rank if s[cause] is not None]
        if not values:
            continue
        share = sum(v for v in values if v is not None) / len(values)
        attribution.append(
            {
                "cause": cause,
                "label": label,
                "share_pct": round(100.0 * share, 3),
                "gpu_hours": round(gpu_hours * share, 4) if gpu_hours is not None else None,
                "usd": round(total * share, 2) if total is not None else None,
            }
        )
    if not ranks:
        notes.append("no GPU rank with GPU activity in the traces: the cost is not attributed to causes")
    elif gpu_count is not None and len(ranks) < gpu_count:
        notes.append(f"{len(ranks)} of {gpu_count} GPUs were profiled; their shares stand for all of them")
    lost = (
        round(sum(a["usd"] for a in attribution if a["usd"] is not None), 2)
        if total is not None and attribution
        else None
    )
    return {
        "instance_type": resources.instance_type,
        "instance_count": resources.instance_count,
        "gpus_per_instance": gpus_per,
        "gpu_count": gpu_count,
        "duration_s": resources.duration_s,
        "billable_s": resources.billable_s,
        "gpu_hours": round(gpu_hours, 4) if gpu_hours is not None else None,
        "usd_per_instance_hour": price,
        "total_usd": round(total, 2) if total is not None else None,
        "lost_usd": lost,
        "price": {
            "region": prices.region,
            "as_of": prices.as_of,
            "source": prices.source,
            "verified": prices.verified,
            "overridden": bool(resources.instance_type and resources.instance_type in prices.overridden),
        },
        "basis": f"shares are the mean over {len(ranks)} profiled GPU rank(s), taken as representative of "
        "the whole job; dollars are on-demand list prices",
        "attribution": attribution,
        "notes": notes,
    }


def _usd(value: float | None) -> str:
    return f"${value:,.2f}" if value is not None else "$?"


def cost_lines(cost: Mapping[str, Any] | None) -> list[str]:
    """Plain-text lines for the e-mail and the CLI: the total, then "about $X of GPU time waiting on ..."."""
    if not isinstance(cost, Mapping):
        return []
    lines: list[str] = []
    total, hours = _num(cost.get("total_usd")), _num(cost.get("gpu_hours"))
    price = _mapping(cost.get("price"))
    if total is not None and hours is not None:
        lines.append(
            f"GPU cost: about {_usd(total)} for {hours:,.1f} GPU-hours on {cost.get('instance_count')} x "
            f"{cost.get('instance_type')} (on-demand, {price.get('region')}, prices of {price.get('as_of')}"
            f"{'' if price.get('verified') else ', unverified'})"
        )
    shares: Sequence[Mapping[str, Any]] = [a for a in cost.get("attribution") or [] if isinstance(a, Mapping)]
    parts = [f"{_usd(_num(a.get('usd')))} {a.get('label')}" for a in shares if _num(a.get("usd"))]
    if parts:
        parts[0] = parts[0].replace(" ", " of GPU time ", 1)
        head = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "")
        lines.append(f"About {head}{parts[-1]}.")
    lines += [f"({n})" for n in cost.get("notes") or [] if isinstance(n, str)]
    return lines
