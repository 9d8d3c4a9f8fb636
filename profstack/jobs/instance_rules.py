"""Debugger's system-metric rules, from a job's CloudWatch instance metrics. Pure functions.

Defaults are Debugger's documented ones (docs/platform-facts.md A9); each is configurable through
`processing.system_rule_thresholds` (the keys of SYSTEM_RULE_DEFAULTS; `check_system_thresholds` is the
one check config check, synth and the processor's environment go through). Findings have the shape of the trace
rules' findings (profstack/analysis/rules.py, summary.schema.json `finding`): `ranks` is empty (these
are per host, not per rank) and `evidence.source` is "cloudwatch" with `evidence.host` naming the host.

What differs from Debugger, and why:
- Debugger samples every 500 ms; SageMaker's CloudWatch metrics are 1-minute averages, so short spikes
  and dips are smoothed. `patience` (1000 Debugger samples, about 8 min) becomes `system_patience_minutes`.
- SageMaker gives a host's GPU sum, not each GPU, so the per-GPU value is the host's mean over its GPUs.
- SageMaker publishes no iowait. IOBottleneck uses iowait when a caller supplies it (`iowait`), and
  otherwise a proxy (GPU low while CPU is also low: neither compute unit is busy), marked as a proxy
  (`evidence.proxy`) with severity info: it never claims an I/O bottleneck it did not measure.
- MaxInitializationTime measures from job creation to SageMaker's `Training` secondary status, which
  also counts container start-up before the first step that Debugger would see.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from profstack.jobs.instance_metrics import HostMetrics, Series, SystemMetrics, after, aligned, percentile

Finding = dict[str, Any]

SYSTEM_RULE_DEFAULTS: dict[str, float] = {
    # LowGPUUtilization (Debugger: threshold_p95=70, threshold_p5=10, patience=1000, window=500)
    "system_low_gpu_p95_pct": 70.0,
    "system_low_gpu_p5_pct": 10.0,
    # CPUBottleneck (Debugger: threshold=50 % of the time, gpu_threshold=10, cpu_threshold=90)
    "system_cpu_bottleneck_time_pct": 50.0,
    "system_cpu_bottleneck_gpu_pct": 10.0,
    "system_cpu_bottleneck_cpu_pct": 90.0,
    # IOBottleneck (Debugger: threshold=50 % of the time, gpu_threshold=10, io_threshold=50 iowait %)
    "system_io_bottleneck_time_pct": 50.0,
    "system_io_bottleneck_gpu_pct": 10.0,
    "system_io_bottleneck_iowait_pct": 50.0,
    "system_io_bottleneck_proxy_cpu_pct": 50.0,  # ProfStack's proxy without iowait: CPU below this
    # GPUMemoryIncrease (Debugger: increase=5 %, window=10 datapoints, patience=1000)
    "system_gpu_memory_increase_pct": 5.0,
    "system_gpu_memory_window_points": 10.0,
    # MaxInitializationTime (Debugger: threshold=20 min)
    "system_max_initialization_minutes": 20.0,
    # patience: Debugger skips its first 1000 samples (500 ms apart by default)
    "system_patience_minutes": 8.0,
    # below this many datapoints a rule does not judge a host
    "system_min_points": 5.0,
}


class SystemThresholdError(ValueError):
    """A system rule threshold that does not exist, or a value that is not a finite number >= 0 (one line)."""


def check_system_thresholds(overrides: Mapping[str, object]) -> dict[str, float]:
    """Validated overrides: every key one of SYSTEM_RULE_DEFAULTS, every value a finite number >= 0."""
    unknown = sorted(set(overrides) - set(SYSTEM_RULE_DEFAULTS))
    if unknown:
        close = [m for u in unknown for m in difflib.get_close_matches(u, list(SYSTEM_RULE_DEFAULTS), n=3, cutoff=0.5)]
        ordered = [*dict.fromkeys(close), *sorted(set(SYSTEM_RULE_DEFAULTS) - set(close))]
        raise SystemThresholdError(
            f"unknown system rule threshold(s) {', '.join(unknown)}; valid: {', '.join(ordered)}"
        )
    values: dict[str, float] = {}
    for key, value in overrides.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SystemThresholdError(f"system rule threshold {key} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise SystemThresholdError(f"system rule threshold {key} must be a finite number >= 0, got {value!r}")
        values[key] = float(value)
    return values


def system_thresholds(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Defaults updated with the known keys of `overrides` (others are ignored here; the config and the
    processor's environment have rejected them already, check_system_thresholds)."""
    th = dict(SYSTEM_RULE_DEFAULTS)
    for key, value in (overrides or {}).items():
        if key in th:
            th[key] = float(value)
    return th


def _f(rule_id: str, severity: str, message: str, evidence: dict[str, Any], rec: str) -> Finding:
    return {
        "rule_id": rule_id,
        "severity": severity,
        "message": message,
        "evidence": {"source": "cloudwatch", **evidence},
        "recommendation": rec,
        "ranks": [],
    }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _judged(host: HostMetrics, metric: Any, m: SystemMetrics, th: Mapping[str, float]) -> Series | None:
    """The host's normalised series of `metric`, or None when it cannot be judged per GPU / per core."""
    series = host.get(metric)
    if series is None or not series.normalised:
        return None
    return series


def _start(m: SystemMetrics, th: Mapping[str, float]) -> float:
    return m.start + th["system_patience_minutes"] * 60


def low_gpu_utilization(m: SystemMetrics, th: Mapping[str, float]) -> list[Finding]:
    out: list[Finding] = []
    for host in m.hosts:
        gpu = _judged(host, "GPUUtilization", m, th)
        if gpu is None:
            continue
        _, values = after(gpu, _start(m, th))
        if len(values) < th["system_min_points"]:
            continue
        p95, p5 = percentile(values, 95), percentile(values, 5)
        if p95 is None or p5 is None:
            continue
        evidence = {
            "host": host.host,
            "gpus": host.gpus,
            "p95_pct": _r(p95),
            "p5_pct": _r(p5),
            "datapoints": len(values),
            "threshold_p95_pct": th["system_low_gpu_p95_pct"],
            "threshold_p5_pct": th["system_low_gpu_p5_pct"],
        }
        if p95 < th["system_low_gpu_p95_pct"]:
            out.append(
                _f(
                    "LowGPUUtilization",
                    "warning",
                    f"{host.host}: GPU utilisation p95 {p95:.1f}% per GPU is below "
                    f"{th['system_low_gpu_p95_pct']:g}% (CloudWatch, 1-min averages)",
                    evidence,
                    "The GPUs are underused: increase the batch size or the work per step, check the input "
                    "pipeline (CPUBottleneck, IOBottleneck) or move to a smaller or fewer-GPU instance.",
                )
            )
        elif p5 < th["system_low_gpu_p5_pct"]:
            out.append(
                _f(
                    "LowGPUUtilization",
                    "warning",
                    f"{host.host}: GPU utilisation fluctuates: p95 {p95:.1f}% but p5 {p5:.1f}% per GPU "
                    f"(below {th['system_low_gpu_p5_pct']:g}%)",
                    evidence,
                    "The GPUs are idle part of the time: look for blocking calls, data stalls, checkpointing or "
                    "synchronisation between steps; profile a window with torch.profiler.",
                )
            )
    return out


def _share(count: int, pairs: Sequence[tuple[float, float]]) -> float:
    return 100.0 * count / len(pairs) if pairs else 0.0


def cpu_bottleneck(m: SystemMetrics, th: Mapping[str, float]) -> list[Finding]:
    out: list[Finding] = []
    for host in m.hosts:
        gpu, cpu = _judged(host, "GPUUtilization", m, th), _judged(host, "CPUUtilization", m, th)
        if gpu is None or cpu is None:
            continue
        pairs = aligned(gpu, cpu, _start(m, th))
        if len(pairs) < th["system_min_points"]:
            continue
        g, c = th["system_cpu_bottleneck_gpu_pct"], th["system_cpu_bottleneck_cpu_pct"]
        share = _share(sum(1 for gv, cv in pairs if gv < g and cv > c), pairs)
        if share > th["system_cpu_bottleneck_time_pct"]:
            out.append(
                _f(
                    "CPUBottleneck",
                    "critical" if share > 90 else "warning",
                    f"{host.host}: for {share:.0f}% of the time the GPUs ran below {g:g}% while the CPUs ran "
                    f"above {c:g}% (per vCPU)",
                    {
                        "host": host.host,
                        "time_pct": round(share, 1),
                        "datapoints": len(pairs),
                        "gpu_threshold_pct": g,
                        "cpu_threshold_pct": c,
                        "threshold_time_pct": th["system_cpu_bottleneck_time_pct"],
                    },
                    "The CPU cannot feed the GPUs: move preprocessing off the training process (more DataLoader "
                    "workers, pre-processed data, GPU-side augmentation) or pick an instance with more vCPUs per GPU.",
                )
            )
    return out


def io_bottleneck(
    m: SystemMetrics, th: Mapping[str, float], *, iowait: Mapping[str, Series] | None = None
) -> list[Finding]:
    out: list[Finding] = []
    for host in m.hosts:
        gpu = _judged(host, "GPUUtilization", m, th)
        if gpu is None:
            continue
        g = th["system_io_bottleneck_gpu_pct"]
        measured = (iowait or {}).get(host.host)
        if measured is not None:
            pairs = aligned(gpu, measured, _start(m, th))
            limit = th["system_io_bottleneck_iowait_pct"]
            share = _share(sum(1 for gv, wv in pairs if gv < g and wv > limit), pairs)
            proxy = False
        else:
            cpu = _judged(host, "CPUUtilization", m, th)
            if cpu is None:
                continue
            pairs = aligned(gpu, cpu, _start(m, th))
            limit = th["system_io_bottleneck_proxy_cpu_pct"]
            share = _share(sum(1 for gv, cv in pairs if gv < g and cv < limit), pairs)
            proxy = True
        if len(pairs) < th["system_min_points"] or share <= th["system_io_bottleneck_time_pct"]:
            continue
        condition = f"iowait above {limit:g}%" if not proxy else f"the CPUs were also below {limit:g}% (per vCPU)"
        out.append(
            _f(
                "IOBottleneck",
                "info" if proxy else "warning",
                f"{host.host}: for {share:.0f}% of the time the GPUs ran below {g:g}% while {condition}"
                + (": likely waiting on I/O (inferred; SageMaker publishes no iowait)" if proxy else ""),
                {
                    "host": host.host,
                    "time_pct": round(share, 1),
                    "datapoints": len(pairs),
                    "gpu_threshold_pct": g,
                    ("cpu_below_pct" if proxy else "iowait_threshold_pct"): limit,
                    "threshold_time_pct": th["system_io_bottleneck_time_pct"],
                    "proxy": proxy,
                },
                "Neither CPU nor GPU is busy: the job likely waits on data. Use FastFile or Pipe mode or FSx for "
                "Lustre instead of File mode downloads, larger shards, more prefetching, and check for "
                "synchronous checkpoint writes.",
            )
        )
    return out


def gpu_memory_increase(m: SystemMetrics, th: Mapping[str, float]) -> list[Finding]:
    out: list[Finding] = []
    window = max(1, int(th["system_gpu_memory_window_points"]))
    for host in m.hosts:
        mem = _judged(host, "GPUMemoryUtilization", m, th)
        if mem is None:
            continue
        _, values = after(mem, _start(m, th))
        if len(values) < max(2 * window, th["system_min_points"]):
            continue
        averages = [sum(values[i : i + window]) / window for i in range(len(values) - window + 1)]
        low_i = min(range(len(averages)), key=averages.__getitem__)
        rise = max(averages[low_i:]) - averages[low_i]
        if rise > th["system_gpu_memory_increase_pct"]:
            out.append(
                _f(
                    "GPUMemoryIncrease",
                    "warning",
                    f"{host.host}: GPU memory rose by {rise:.1f} points per GPU over the job "
                    f"({window}-point moving average; threshold {th['system_gpu_memory_increase_pct']:g})",
                    {
                        "host": host.host,
                        "increase_pct": round(rise, 2),
                        "from_pct": round(averages[low_i], 2),
                        "to_pct": round(max(averages[low_i:]), 2),
                        "window_points": window,
                        "threshold_pct": th["system_gpu_memory_increase_pct"],
                    },
                    "Growing GPU memory often means tensors kept alive across steps (losses appended without "
                    ".item(), caches, growing sequence lengths): find the growth before it ends in an OOM.",
                )
            )
    return out


def overall_system_usage(m: SystemMetrics, th: Mapping[str, float]) -> list[Finding]:
    out: list[Finding] = []
    for host in m.hosts:
        evidence: dict[str, Any] = {"host": host.host, "instance_type": host.instance_type}
        for metric, key in (
            ("CPUUtilization", "cpu"),
            ("GPUUtilization", "gpu"),
            ("GPUMemoryUtilization", "gpu_memory"),
            ("MemoryUtilization", "memory"),
            ("DiskUtilization", "disk"),
        ):
            series = host.get(metric)  # type: ignore[arg-type]
            if series is None or not series.normalised:
                continue
            for q in (50, 95, 99):
                evidence[f"{key}_p{q}_pct"] = _r(percentile(series.values, q))
        if len(evidence) > 2:
            out.append(
                _f(
                    "OverallSystemUsage",
                    "info",
                    f"{host.host}: CPU p50 {_pct(evidence.get('cpu_p50_pct'))}, GPU p50 "
                    f"{_pct(evidence.get('gpu_p50_pct'))}, GPU memory p95 {_pct(evidence.get('gpu_memory_p95_pct'))}, "
                    f"host memory p95 {_pct(evidence.get('memory_p95_pct'))}",
                    evidence,
                    "For reference: percentiles per vCPU / per GPU over the whole job window.",
                )
            )
    return out


def _pct(value: Any) -> str:
    return f"{value:.0f}%" if isinstance(value, int | float) else "n/a"


def _ms(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value / 1000 if value > 1e11 else float(value)
    return None


def max_initialization_time(describe: Mapping[str, Any], th: Mapping[str, float]) -> list[Finding]:
    """From DescribeTrainingJob (or the event): CreationTime to the start of the `Training` status."""
    created = _ms(describe.get("CreationTime"))
    transitions = [t for t in describe.get("SecondaryStatusTransitions") or [] if isinstance(t, Mapping)]
    if created is None and transitions:
        created = _ms(transitions[0].get("StartTime"))
    if created is None:
        return []
    training = next((_ms(t.get("StartTime")) for t in transitions if t.get("Status") == "Training"), None)
    limit = th["system_max_initialization_minutes"]
    if training is not None:
        minutes = (training - created) / 60
        reached = True
    else:
        end = _ms(describe.get("TrainingEndTime"))
        if end is None:
            return []  # still starting, or no transitions recorded: nothing to judge yet
        minutes = (end - created) / 60
        reached = False
    if minutes <= limit:
        return []
    steps = [f"{t.get('Status')}" for t in transitions][:10]
    return [
        _f(
            "MaxInitializationTime",
            "warning",
            f"the job took {minutes:.0f} min from creation to training (threshold {limit:g} min)"
            if reached
            else f"the job ended after {minutes:.0f} min without reaching the Training status "
            f"(threshold {limit:g} min)",
            {
                "initialization_minutes": round(minutes, 1),
                "threshold_minutes": limit,
                "reached_training": reached,
                "transitions": steps,
            },
            "Long start-up: check instance capacity waits (Starting), large File-mode downloads "
            "(Downloading: use FastFile or Pipe mode), big images (use a cached or smaller image) and "
            "slow script start-up before the first step.",
        )
    ]


def system_findings(
    metrics: SystemMetrics | None,
    describe: Mapping[str, Any],
    rule_thresholds: Mapping[str, float] | None = None,
    *,
    iowait: Mapping[str, Series] | None = None,
) -> list[Finding]:
    """Every system rule; works without metrics (MaxInitializationTime only needs the job's transitions)."""
    th = system_thresholds(rule_thresholds)
    found = max_initialization_time(describe, th)
    if metrics is not None:
        found += low_gpu_utilization(metrics, th)
        found += cpu_bottleneck(metrics, th)
        found += io_bottleneck(metrics, th, iowait=iowait)
        found += gpu_memory_increase(metrics, th)
        found += overall_system_usage(metrics, th)
    return found
