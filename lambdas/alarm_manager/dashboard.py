"""Body of the live per-GPU dashboard, rebuilt by every reconcile from the running jobs' hosts.

Why a dashboard the manager writes, not one CloudFormation writes: SageMaker's instance metrics carry
only the `Host` dimension (docs/platform-facts.md A8), so nothing in a static dashboard knows a host's
instance type, and CloudWatch metric math cannot divide one SEARCH array by another. The manager knows
each running host's GPU and vCPU count (profstack/jobs/instances.py), so it writes one `metric / N`
expression per host. Pure: returns the JSON body; the manager calls PutDashboard.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profstack.jobs.alarms import SAGEMAKER_NAMESPACE, RunningJob

# A graph holds at most 500 metrics and expressions (CloudWatch metric math docs); each host needs two.
MAX_HOSTS_PER_GRAPH = 200


@dataclass(frozen=True)
class _Panel:
    metric: str
    title: str
    divisor: str | None  # "gpus" | "vcpus" | None


PANELS = (
    _Panel("GPUUtilization", "GPU utilisation, % per GPU (sum / GPUs)", "gpus"),
    _Panel("GPUMemoryUtilization", "GPU memory, % per GPU (sum / GPUs)", "gpus"),
    _Panel("CPUUtilization", "CPU, % per vCPU (sum / vCPUs)", "vcpus"),
    _Panel("MemoryUtilization", "Host memory, %", None),
    _Panel("DiskUtilization", "Disk, %", None),
)


def _panel_metrics(panel: _Panel, jobs: Sequence[RunningJob]) -> tuple[list[list[Any]], int, int]:
    rows: list[list[Any]] = []
    shown = skipped = 0
    for job in jobs:
        for host in job.hosts:
            divisor = host.gpus if panel.divisor == "gpus" else host.vcpus if panel.divisor == "vcpus" else 1
            if panel.divisor is not None and not divisor:
                skipped += 1
                continue
            if shown >= MAX_HOSTS_PER_GRAPH:
                skipped += 1
                continue
            label = f"{job.name}/{host.name}"
            i = shown
            if panel.divisor is None:
                rows.append([SAGEMAKER_NAMESPACE, panel.metric, "Host", host.dimension(job.name), {"label": label}])
            else:
                unit = "GPUs" if panel.divisor == "gpus" else "vCPUs"
                rows.append(
                    [
                        SAGEMAKER_NAMESPACE,
                        panel.metric,
                        "Host",
                        host.dimension(job.name),
                        {"id": f"m{i}", "visible": False},
                    ]
                )
                rows.append(
                    [{"expression": f"m{i} / {divisor}", "label": f"{label} ({divisor} {unit})", "id": f"e{i}"}]
                )
            shown += 1
    return rows, shown, skipped


def dashboard_body(*, jobs: Sequence[RunningJob], region: str, generated_at: str) -> str:
    ordered = sorted(jobs, key=lambda j: j.name)
    hosts = sum(len(j.hosts) for j in ordered)
    widgets: list[dict[str, Any]] = []
    notes: list[str] = []
    y = 3
    for index, panel in enumerate(PANELS):
        rows, _, skipped = _panel_metrics(panel, ordered)
        if skipped:
            notes.append(
                f"{panel.metric}: {skipped} host(s) not shown (GPU/vCPU count unknown, or over the "
                f"{MAX_HOSTS_PER_GRAPH}-host limit of one graph)"
            )
        x = 0 if index % 2 == 0 else 12
        widgets.append(
            {
                "type": "metric",
                "x": x,
                "y": y,
                "width": 12 if index < len(PANELS) - 1 or index % 2 else 24,
                "height": 7,
                "properties": {
                    "title": panel.title,
                    "view": "timeSeries",
                    "stat": "Average",
                    "period": 60,
                    "region": region,
                    "metrics": rows,
                    "yAxis": {"left": {"min": 0}},
                },
            }
            if rows
            else {
                "type": "text",
                "x": x,
                "y": y,
                "width": 12,
                "height": 7,
                "properties": {"markdown": f"### {panel.title}\nNo running host to show."},
            }
        )
        if index % 2:
            y += 7
    header = (
        "## Running training jobs, per GPU\n"
        f"{len(ordered)} job(s), {hosts} host(s); rewritten by ProfStack's alarm manager at {generated_at} "
        "(every reconcile). SageMaker sums GPU metrics over a host's GPUs and CPU over its vCPUs; each line "
        "here divides by that host's count (profstack/jobs/instances.py)."
    )
    if notes:
        header += "\n\n" + "\n".join(f"- {n}" for n in notes)
    widgets.insert(0, {"type": "text", "x": 0, "y": 0, "width": 24, "height": 3, "properties": {"markdown": header}})
    return json.dumps({"widgets": widgets}, separators=(",", ":"))
