"""Rules that replace SageMaker Debugger's profiler rules and torch-tb-profiler's recommendations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profstack.analysis.memory import is_accelerator
from profstack.analysis.metrics import RankInternal
from profstack.analysis.options import RuleThresholds
from profstack.analysis.summary import (
    CrossRankResult,
    CrossRankRow,
    Finding,
    LoadBalance,
    RankSummary,
    Severity,
    Straggler,
)

__all__ = ["Finding", "cross_rank", "rank_findings"]


def _f(rule_id: str, severity: Severity, message: str, evidence: dict[str, Any], rec: str, ranks: list[int]) -> Finding:  # noqa: PLR0917 - positional keeps the rule table readable
    return {
        "rule_id": rule_id,
        "severity": severity,
        "message": message,
        "evidence": evidence,
        "recommendation": rec,
        "ranks": ranks,
    }


def rank_findings(r: RankSummary, internal: RankInternal, th: RuleThresholds) -> list[Finding]:
    """Findings about one rank, from its summary, what the analyzers kept aside, and the thresholds."""
    out: list[Finding] = []
    rank = [int(r["rank"])]
    tb = r["temporal_breakdown"]
    has_gpu_time = r["has_gpu"] and tb["gpu_span_us"] > 0
    busy = 100.0 - tb["idle_pct"] if has_gpu_time else None
    label = r["label"]

    if busy is not None and busy < th.low_gpu_util_busy_pct:
        sev: Severity = "critical" if busy < th.low_gpu_util_critical_busy_pct else "warning"
        out.append(
            _f(
                "LowGPUUtilization",
                sev,
                f"rank {label}: GPU busy {busy:.1f}% of its active span (threshold {th.low_gpu_util_busy_pct:g}%)",
                {
                    "gpu_busy_pct": round(busy, 2),
                    "idle_time_us": tb["idle_time_us"],
                    "gpu_span_us": tb["gpu_span_us"],
                    "threshold_pct": th.low_gpu_util_busy_pct,
                    **_idle_cause_shares(r),
                },
                "Find what the GPU waits for in the idle causes: collectives (CommunicationBound, Straggler), the "
                "input pipeline (DataloaderBottleneck), synchronisation (ExcessiveSync) or the host launching late or "
                "busy elsewhere (CPUBound).",
                rank,
            )
        )
    comm = communication_bound(r, th)
    if comm is not None:
        out.append(comm)
    graphs = graph_replay_share(r, internal)
    if comm is None and busy is not None and tb["idle_pct"] >= th.cpu_bound_min_idle_pct:
        cpu = cpu_bound(r, th, graphs)
        if cpu is not None:
            out.append(cpu)
    dl = r["dataloader"]
    if dl["share_pct"] is not None and dl["share_pct"] > th.dataloader_share_pct:
        out.append(
            _f(
                "DataloaderBottleneck",
                "warning",
                f"rank {label}: the DataLoader takes {dl['share_pct']:.1f}% of step time",
                {
                    "dataloader_time_us": dl["time_us"],
                    "step_time_us": dl["step_time_us"],
                    "share_pct": dl["share_pct"],
                    "threshold_pct": th.dataloader_share_pct,
                },
                "Increase DataLoader num_workers (start near the number of CPU cores per GPU), set pin_memory=True "
                "and persistent_workers=True, and prefetch; move heavy decoding/augmentation off the critical path.",
                rank,
            )
        )
    st = r["steps"]
    if st["outliers"]:
        out.append(
            _f(
                "StepOutlier",
                "warning",
                f"rank {label}: {len(st['outliers'])} step(s) longer than mean + {st['outlier_sigma']:g} sigma "
                f"({st['outlier_threshold_us']:.0f} us)",
                {
                    "outlier_steps": [o["step"] for o in st["outliers"]],
                    "mean_us": st["mean_us"],
                    "std_us": st["std_us"],
                    "threshold_us": st["outlier_threshold_us"],
                },
                "Look at the outlier steps in the trimmed trace: checkpointing, evaluation, garbage collection, "
                "data stalls or stragglers in collectives are typical causes.",
                rank,
            )
        )
    lo = launch_overhead(r, internal, th, graphs)
    if lo is not None:
        out.append(lo)
    sync_finding = excessive_sync(r, internal, th)
    if sync_finding is not None:
        out.append(sync_finding)
    memcpy_t = r["gpu_activity"]["memcpy_time_us"]
    if has_gpu_time and 100.0 * memcpy_t / tb["gpu_span_us"] > th.memcpy_time_pct:
        share = 100.0 * memcpy_t / tb["gpu_span_us"]
        pageable = [m for m in r["memory_ops"]["memcpy"] if m["direction"] in ("HtoD", "DtoH")]
        out.append(
            _f(
                "MemcpyHeavy",
                "warning",
                f"rank {label}: memory copies take {share:.1f}% of the GPU span",
                {
                    "memcpy_time_us": memcpy_t,
                    "share_pct": round(share, 2),
                    "threshold_pct": th.memcpy_time_pct,
                    "host_device_copies": sum(m["count"] for m in pageable),
                },
                "Keep tensors on the GPU, batch small copies, use pinned memory with non_blocking=True, and avoid "
                "device<->host round trips inside the step.",
                rank,
            )
        )
    prec = {p["precision"]: p for p in r["precision"]}
    kt = sum(p["time_us"] for p in r["precision"])  # computation-kernel time
    fp32 = (prec["fp32"]["time_us"] if "fp32" in prec else 0.0) or 0.0
    if kt > 0 and 100.0 * fp32 / kt > th.fp32_share_pct:
        tc = r["occupancy"]["tensor_core_pct_of_compute"]
        out.append(
            _f(
                "TensorCoreUnderuse",
                "info",
                f"rank {label}: {100.0 * fp32 / kt:.1f}% of computation-kernel time runs in fp32",
                {
                    "fp32_time_us": fp32,
                    "computation_kernel_time_us": kt,
                    "fp32_share_pct": round(100.0 * fp32 / kt, 2),
                    "tensor_core_pct_of_compute": tc,
                    "threshold_pct": th.fp32_share_pct,
                },
                "Enable automatic mixed precision (torch.autocast with bf16/fp16) or TF32 "
                "(torch.backends.cuda.matmul.allow_tf32 = True) to use Tensor Cores.",
                rank,
            )
        )
    out.extend(gpu_memory_increase(r, th))
    bs = batch_size(r, th)
    if bs is not None:
        out.append(bs)
    return out


def launch_overhead(r: RankSummary, internal: RankInternal, th: RuleThresholds, graphs: float | None) -> Finding | None:
    """LaunchOverheadBound: most kernels are tiny while the GPU idles; no CUDA-graph advice where the kernels
    already run inside graph replays."""
    tb = r["temporal_breakdown"]
    n_k = internal.kernels_selected
    if not (n_k and r["has_gpu"] and tb["gpu_span_us"] > 0):
        return None
    tiny_share = 100.0 * internal.tiny_kernels / n_k
    if not (tiny_share > th.tiny_kernel_share_pct and tb["idle_pct"] >= th.launch_overhead_min_idle_pct):
        return None
    evidence: dict[str, Any] = {
        "tiny_kernel_share_pct": round(tiny_share, 2),
        "kernels": n_k,
        "tiny_kernel_us": th.tiny_kernel_us,
        "idle_pct": tb["idle_pct"],
    }
    # absent when no launch of HTA's launch-call set was joined (e.g. ROCm hipLaunchKernel)
    if r["launch_delay"]["cpu_launch_mean_us"] is not None:
        evidence["cpu_launch_mean_us"] = r["launch_delay"]["cpu_launch_mean_us"]
    if graphs is not None:
        evidence["graph_replay_kernel_pct"] = round(100.0 * graphs, 2)
    return _f(
        "LaunchOverheadBound",
        "warning",
        f"rank {r['label']}: {tiny_share:.1f}% of {n_k} kernels run under {th.tiny_kernel_us:g} us while the "
        f"GPU is idle {tb['idle_pct']:.1f}%",
        evidence,
        _launch_overhead_advice(graphs),
        [int(r["rank"])],
    )


def batch_size(r: RankSummary, th: RuleThresholds) -> Finding | None:
    """BatchSize: the GPU is under-used and the host explains little of its idle time (never claimed where no
    launch was recorded: the trace cannot tell whether the host held the GPU up)."""
    tb = r["temporal_breakdown"]
    if not (r["has_gpu"] and tb["gpu_span_us"] > 0):
        return None
    busy = 100.0 - tb["idle_pct"]
    host_share = host_side_share(r)
    dl = r["dataloader"]
    if (
        busy >= th.batch_size_busy_pct
        or host_share is None
        or host_share > th.cpu_bound_host_wait_pct
        or (dl["share_pct"] or 0.0) > th.dataloader_share_pct
    ):
        return None
    return _f(
        "BatchSize",
        "info",
        f"rank {r['label']}: GPU busy only {busy:.1f}% without a host or input bottleneck (the host explains "
        f"{host_share:.1f}% of the idle time)",
        {"gpu_busy_pct": round(busy, 2), "host_side_idle_pct": host_share, "threshold_pct": th.batch_size_busy_pct},
        "The GPU is under-used: increase the batch size (scale the learning rate accordingly) or use a "
        "smaller instance.",
        [int(r["rank"])],
    )


#: of the analysed kernels, the share that ran inside CUDA graph replays at or above which graph advice is not given
GRAPH_REPLAY_SHARE = 0.9


def graph_replay_share(r: RankSummary, internal: RankInternal) -> float | None:
    """The share of the analysed kernels that ran inside CUDA / HIP graph replays (one launch, several kernels);
    None where no graph was replayed."""
    cg = r.get("cuda_graphs")
    n_k = internal.kernels_selected
    if not cg or not n_k or not cg["kernels"]:
        return None
    return min(1.0, cg["kernels"] / n_k)


def _launch_overhead_advice(graphs: float | None) -> str:
    if graphs is not None and graphs >= GRAPH_REPLAY_SHARE:
        return (
            f"{100.0 * graphs:.0f}% of these kernels already run inside CUDA graph replays, so the CPU's launch cost "
            "is already paid once per graph: fuse the small kernels (torch.compile, fused optimizers and norms) and "
            "increase the work per kernel (larger batch); gaps inside a replay are the kernels' own tails."
        )
    rest = (
        f" ({100.0 * graphs:.0f}% of the kernels already run inside CUDA graph replays: capture the rest)"
        if graphs is not None
        else ""
    )
    return (
        "Many tiny kernels make launch overhead dominate: fuse operations (torch.compile), use CUDA graphs"
        f"{rest}, and increase the work per kernel (larger batch)."
    )


def host_side_share(r: RankSummary) -> float | None:
    """The share of GPU idle time the host explains (collectives, data, sync, late launches, host busy), from the
    idle causes; HTA's host-wait share where they are absent; None where no launch was recorded (the trace cannot
    tell whether the host held the GPU up)."""
    causes = r["idle_breakdown"].get("causes")
    if causes is None:
        return r["idle_breakdown"]["host_wait_pct"] if r["launch_delay"]["count"] else None
    idle = causes["idle_time_us"]
    if causes["gpu_side_us"] is None:  # no launch recorded: the trace cannot tell whose the gaps are
        return None
    if idle <= 0:
        return 0.0
    host = (
        causes["collective_wait_us"]
        + causes["data_wait_us"]
        + causes["sync_wait_us"]
        + (causes["late_launch_us"] or 0.0)
        + (causes["host_busy_us"] or 0.0)
        + (causes["host_unexplained_us"] or 0.0)
    )
    return round(100.0 * host / idle, 2)


def _idle_cause_shares(r: RankSummary) -> dict[str, float]:
    """The idle causes' shares of GPU idle time that are known (evidence for LowGPUUtilization)."""
    causes = r["idle_breakdown"].get("causes")
    if causes is None:
        return {}
    keys = ("collective_wait_pct", "data_wait_pct", "sync_wait_pct", "late_launch_pct", "host_busy_pct", "gpu_side_pct")
    return {f"idle_{k}": v for k in keys if (v := causes[k]) is not None}  # type: ignore[literal-required]


_CAUSE_WORDS = (
    ("collective_wait_us", "waiting in CPU collectives"),
    ("data_wait_us", "waiting on data (DataLoader)"),
    ("sync_wait_us", "blocked in synchronisation calls"),
    ("late_launch_us", "launching too late"),
    ("host_busy_us", "sleeping or computing without launching"),
    ("host_unexplained_us", "the host's, not split (no launch call of the launch-delay set recorded)"),
    ("gpu_side_us", "on the GPU side (the next op already queued)"),
)


def cpu_bound(r: RankSummary, th: RuleThresholds, graphs: float | None) -> Finding | None:
    """CPUBound: the GPU idles because the host launches too late or does other work, by the idle causes (what the
    host did while the GPU was idle); HTA's host-wait share where the causes are absent. Time the host spent in
    collectives, the DataLoader or synchronisation is not "launching too late": those have their own findings
    (CommunicationBound, DataloaderBottleneck, ExcessiveSync)."""
    tb, idle = r["temporal_breakdown"], r["idle_breakdown"]
    label, rank = r["label"], [int(r["rank"])]
    causes = idle.get("causes")
    if causes is None or causes["idle_time_us"] <= 0:
        if idle["host_wait_pct"] <= th.cpu_bound_host_wait_pct:
            return None
        return _f(
            "CPUBound",
            "warning",
            f"rank {label}: GPU idle {tb['idle_pct']:.1f}% and {idle['host_wait_pct']:.1f}% of the gaps are the host "
            "launching too late",
            {
                "idle_pct": tb["idle_pct"],
                "host_wait_pct": idle["host_wait_pct"],
                "host_wait_us": idle["host_wait_us"],
                "threshold_pct": th.cpu_bound_host_wait_pct,
            },
            _late_launch_advice(graphs),
            rank,
        )
    if causes["gpu_side_us"] is None:  # no launch recorded: nothing says the host held the GPU up
        return None
    total = causes["idle_time_us"]
    late = causes["late_launch_us"] or 0.0
    busy_host = causes["host_busy_us"] or 0.0
    unexplained = causes["host_unexplained_us"] or 0.0
    host = late + busy_host + unexplained
    share = 100.0 * host / total
    if share <= th.cpu_bound_host_wait_pct:
        return None
    parts = [
        f"{100.0 * v / total:.1f}% {words}"
        for key, words in _CAUSE_WORDS
        if (v := causes[key]) is not None and v > 0  # type: ignore[literal-required]
    ]
    evidence: dict[str, Any] = {
        "idle_pct": tb["idle_pct"],
        "host_side_pct_of_idle": round(share, 2),
        "late_launch_us": causes["late_launch_us"],
        "host_busy_us": causes["host_busy_us"],
        "host_unexplained_us": causes["host_unexplained_us"],
        "collective_wait_us": causes["collective_wait_us"],
        "data_wait_us": causes["data_wait_us"],
        "sync_wait_us": causes["sync_wait_us"],
        "host_wait_pct": idle["host_wait_pct"],
        "resolution_us": causes["resolution_us"],
        "threshold_pct": th.cpu_bound_host_wait_pct,
    }
    if graphs is not None:
        evidence["graph_replay_kernel_pct"] = round(100.0 * graphs, 2)
    evidence = {k: v for k, v in evidence.items() if v is not None}  # a part that cannot be told is not evidence
    if unexplained > late + busy_host:
        what = "the host's (launching too late or doing other work: launch calls outside the launch-delay set)"
        advice = _late_launch_advice(graphs) + " " + HOST_BUSY_RECOMMENDATION + " " + UNSPLIT_HINT
    elif late >= busy_host:
        what, advice = "the host launching too late", _late_launch_advice(graphs)
    else:
        what, advice = "the host doing other work than launching", HOST_BUSY_RECOMMENDATION
    return _f(
        "CPUBound",
        "warning",
        f"rank {label}: GPU idle {tb['idle_pct']:.1f}%, {share:.1f}% of it {what} (of the idle time: "
        + ", ".join(parts)
        + ")",
        evidence,
        advice,
        rank,
    )


UNSPLIT_HINT = "profstack analyze --launch-calls all tells late launches from other host work on ROCm and XLA traces."
HOST_BUSY_RECOMMENDATION = (
    "The GPU waits while the host does something other than launching work (Python, CPU-side computation, logging, "
    "checkpoint I/O, sleeps) between launches: find it in the gaps of the trimmed trace (record with_stack=True to "
    "see the Python), move it off the training thread or overlap it with GPU work, and avoid host work between steps."
)


def _late_launch_advice(graphs: float | None) -> str:
    if graphs is not None and graphs >= GRAPH_REPLAY_SHARE:
        return (
            f"The GPU waits for the CPU between launches, and {100.0 * graphs:.0f}% of the kernels already run inside "
            "CUDA graph replays: the gaps are between replays. Reduce the host work between them (Python, "
            "optimizer steps outside the graph, .item()), capture more of the step in one graph, and fuse what "
            "remains outside it (torch.compile)."
        )
    rest = (
        f"; {100.0 * graphs:.0f}% of the kernels already run inside CUDA graph replays: capture the rest"
        if graphs is not None
        else ""
    )
    return (
        "The GPU waits for the CPU: reduce Python/operator overhead (torch.compile, CUDA graphs, fused "
        f"optimizers){rest}, move preprocessing off the training thread, and avoid host work between launches."
    )


SYNC_RECOMMENDATION = (
    "Remove implicit syncs (.item(), .cpu(), printing tensors, torch.cuda.synchronize in the loop); "
    "log metrics asynchronously or every N steps."
)


def excessive_sync(r: RankSummary, internal: RankInternal, th: RuleThresholds) -> Finding | None:
    """ExcessiveSync: host synchronisation waits above ``sync_time_pct`` of the window, judged by what the GPU did
    during them. A host that waits while the GPU is busy is only ahead of the GPU (a final cudaDeviceSynchronize
    after a stream of kernels): that costs nothing. The rule fires on the GPU time the waits cost: the part of
    the waits during which the GPU sat idle, above the same threshold. Where no GPU row was recorded, what the GPU
    did is unknown: an info finding says so instead of a verdict."""
    sy = r["sync"]
    window = r["window"]["duration_us"] or 0.0
    wall = internal.step_total_us or window
    sync_t = sy["time_us"]
    if not (wall > 0 and sync_t and 100.0 * sync_t / wall > th.sync_time_pct):
        return None
    share = 100.0 * sync_t / wall
    label = r["label"]
    evidence: dict[str, Any] = {
        "sync_calls": sy["calls"],
        "sync_time_us": sync_t,
        "share_pct": round(share, 2),
        "threshold_pct": th.sync_time_pct,
    }
    idle = sy.get("host_wait_gpu_idle_us")
    if idle is None:
        evidence["gpu_during_waits"] = "unknown: no GPU row in the window"
        return _f(
            "ExcessiveSync",
            "info",
            f"rank {label}: {sy['calls']} host synchronisation call(s) take {share:.1f}% of the window; whether "
            "the GPU was busy meanwhile is unknown (no GPU activity recorded in the window)",
            evidence,
            "Record GPU activity (ProfilerActivity.CUDA) to tell whether the waits cost GPU time. "
            + SYNC_RECOMMENDATION,
            [int(r["rank"])],
        )
    lost = 100.0 * idle / wall
    evidence |= {
        "gpu_busy_during_waits_pct": sy.get("host_wait_gpu_busy_pct"),
        "gpu_idle_during_waits_us": idle,
        "gpu_idle_during_waits_pct_of_window": round(lost, 2),
        "resolution_us": sy.get("gpu_timeline_resolution_us"),
    }
    if lost <= th.sync_time_pct:
        return None  # the GPU was busy while the host waited: the host was only ahead of it
    return _f(
        "ExcessiveSync",
        "warning",
        f"rank {label}: {sy['calls']} host synchronisation call(s) take {share:.1f}% of the window, and the GPU "
        f"sat idle during {lost:.1f}% of the window while the host waited",
        evidence,
        SYNC_RECOMMENDATION,
        [int(r["rank"])],
    )


def gpu_memory_increase(r: RankSummary, th: RuleThresholds) -> list[Finding]:
    """GPUMemoryIncrease (SageMaker Debugger's rule): a GPU's peak allocated memory per step rises by more
    than ``gpu_memory_increase_pct`` from the first analysed step to the last (profile_memory traces)."""
    out: list[Finding] = []
    mem = r.get("memory")
    for dev in mem["devices"] if mem is not None else []:
        rise = dev["increase_pct"]
        peaks = dev["step_peaks"]
        if not is_accelerator(dev["device"]) or rise is None or rise <= th.gpu_memory_increase_pct:
            continue
        out.append(
            _f(
                "GPUMemoryIncrease",
                "warning",
                f"rank {r['label']}: peak allocated memory on {dev['device']} rises {rise:.1f}% from step "
                f"#{peaks[0]['step']} to #{peaks[-1]['step']}",
                {
                    "device": dev["device"],
                    "increase_pct": rise,
                    "first_step_peak_bytes": peaks[0]["peak_allocated_bytes"],
                    "last_step_peak_bytes": peaks[-1]["peak_allocated_bytes"],
                    "peak_reserved_bytes": dev["peak_reserved_bytes"],
                    "threshold_pct": th.gpu_memory_increase_pct,
                },
                "Memory that grows step after step runs out eventually: look for tensors kept across steps (a loss "
                "summed without .item() or .detach(), lists of outputs, caches keyed by input), the operators at "
                "the top of the memory panel, and fragmentation (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).",
                [int(r["rank"])],
            )
        )
    return out


COMM_RECOMMENDATION = (
    "The step waits for communication. Overlap it with compute: with DDP, tune bucket_cap_mb (default 25 MB; "
    "larger buckets for many small gradients, smaller ones to start all-reduce earlier) and set "
    "gradient_as_bucket_view=True; with FSDP, use backward_prefetch=BACKWARD_PRE and forward_prefetch=True; "
    "for SendRecv / all-to-all (pipeline stages, sharded embeddings) pipeline the exchanges across micro-batches. "
    "Send fewer bytes: a bf16/fp16 compression hook or PowerSGD (torch.distributed.algorithms.ddp_comm_hooks), "
    "gradient accumulation with no_sync() between all-reduces. Check the topology: NCCL_DEBUG=INFO shows the "
    "transport and algorithm; keep tensor-parallel groups inside a node (NVLink), use EFA across nodes "
    "(FI_PROVIDER=efa with the aws-ofi-nccl plugin on p4d/p5), and look for a straggler rank holding the "
    "collective."
)


HOST_COMM_RECOMMENDATION = (
    "The step waits in collectives that run on the CPU ({backend}): their time includes waiting for the slowest "
    "rank, so look first for a straggler (the Straggler finding, the cross-rank table) and for uneven work. For GPU "
    "tensors use NCCL (backend='nccl', or 'cpu:gloo,cuda:nccl'), which communicates on the GPU and overlaps with "
    "compute; otherwise send fewer, larger tensors (bucket them) and use async_op=True to overlap the wait with work."
)


def communication_bound(r: RankSummary, th: RuleThresholds) -> Finding | None:
    """CommunicationBound: exposed communication (no computation kernel running) above
    ``comm_bound_exposed_pct`` of step time (GPU span without steps). Collectives that run on the CPU (gloo, MPI)
    count with their exposed time (no GPU op running): a CPU-only rank's whole collective time. Where it fires, the
    GPU waits on the collectives, so the host's late launches (CPUBound) are a consequence and that rule stays
    silent."""
    cm = r["communication"]
    exposed = cm.get("exposed_time_us")
    hc = cm.get("host_collectives")
    if not (cm["kernel_count"] or hc) or exposed is None:
        return None
    share = cm.get("exposed_pct_of_step")
    basis = "step time"
    if share is None:
        share = cm.get("exposed_pct_of_span")
        basis = "GPU span"
    if share is None or share <= th.comm_bound_exposed_pct:
        return None
    label = r["label"]
    evidence: dict[str, Any] = {
        "exposed_time_us": exposed,
        "comm_time_us": cm["comm_time_us"],
        "overlap_pct_of_comm": cm["overlap_pct_of_comm"],
        f"exposed_pct_of_{'step' if basis == 'step time' else 'span'}": share,
        "host_wait_pct": r["idle_breakdown"]["host_wait_pct"],
        "threshold_pct": th.comm_bound_exposed_pct,
    }
    gpu_part = (
        f"{exposed / 1000:.1f} ms of {cm['comm_time_us'] / 1000:.1f} ms GPU communication exposed; "
        f"{cm['overlap_pct_of_comm'] or 0:.1f}% overlapped with compute"
    )
    if hc is None:
        return _f(
            "CommunicationBound",
            "warning",
            f"rank {label}: exposed communication (no computation running) takes {share:.1f}% of {basis} ({gpu_part})",
            evidence,
            COMM_RECOMMENDATION,
            [int(r["rank"])],
        )
    backend = hc["backend"] or ", ".join(sorted({n["name"].split(":", 1)[0] for n in hc["by_name"]}))
    if not cm["kernel_count"]:  # no GPU communication: its numbers are not evidence
        for key in ("exposed_time_us", "comm_time_us", "overlap_pct_of_comm"):
            evidence.pop(key, None)
    evidence = {k: v for k, v in evidence.items() if v is not None}
    evidence |= {
        "host_collective_calls": hc["calls"],
        "host_collective_time_us": hc["time_us"],
        "host_collective_exposed_us": hc["exposed_time_us"],
        "backend": backend,
    }
    host_part = f"{hc['exposed_time_us'] / 1000:.1f} ms in {hc['calls']} CPU collective call(s) ({backend})"
    return _f(
        "CommunicationBound",
        "warning",
        f"rank {label}: communication nothing else overlaps takes {share:.1f}% of {basis}: {host_part}"
        + (f"; {gpu_part}" if cm["kernel_count"] else ""),
        evidence,
        HOST_COMM_RECOMMENDATION.format(backend=backend) + (" " + COMM_RECOMMENDATION if cm["kernel_count"] else ""),
        [int(r["rank"])],
    )


def _metric(row: CrossRankRow | Mapping[str, Any], use_steps: bool) -> float:
    return float((row["step_mean_us"] if use_steps else row["gpu_span_us"]) or 0.0)


def _waits(table: Sequence[CrossRankRow] | Sequence[Mapping[str, Any]]) -> list[float] | None:
    """Per rank, the time a step spends in communication that no compute overlaps: waiting for its peers. None when
    a rank lacks the numbers, or nobody waits (no collectives)."""
    waits: list[float] = []
    for row in table:
        pct, step = row.get("exposed_comm_pct_of_step"), row.get("step_mean_us")
        if not isinstance(pct, int | float) or not isinstance(step, int | float) or step <= 0:
            return None
        waits.append(float(pct) / 100.0 * float(step))
    return waits if len(waits) >= 2 and max(waits) > 0 else None


def _waited_for(table: Sequence[CrossRankRow] | Sequence[Mapping[str, Any]], th: RuleThresholds) -> list[Straggler]:
    """Stragglers as who waits for whom (as HTA reads them): in a collective every rank waits for the last to
    arrive, so the straggler is the rank that waits markedly less than its peers, not the one that waits. A rank
    that started its steps early and then waited on NCCL has the longer step and the longer wait; the rank it
    waited for has neither. Judged only where every rank has exposed-communication numbers."""
    waits = _waits(table)
    if waits is None:
        return []
    ordered = sorted(waits)
    n = len(ordered)
    median_wait = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    steps = sorted(float(row["step_mean_us"] or 0.0) for row in table)  # all positive: _waits checked them
    median_step = steps[n // 2] if n % 2 else (steps[n // 2 - 1] + steps[n // 2]) / 2
    out: list[Straggler] = []
    for row, wait in zip(table, waits, strict=True):
        short = (median_wait - wait) / median_step * 100.0 if median_step > 0 else 0.0
        # waited for: it waits less than half what its peers wait, and their extra wait is a material share of a
        # step (half the straggler threshold: a wait is time every other rank loses, a slow step only its own)
        if wait < median_wait / 2 and short > th.straggler_pct / 2:
            out.append(
                {
                    "rank": row["rank"],
                    "label": row["label"],
                    "metric": "exposed_comm_wait_us",
                    "value": round(wait, 3),
                    "median": round(median_wait, 3),
                    "deviation_pct": round(short, 2),
                }
            )
    return out


def _named(stragglers: Sequence[Straggler]) -> str:
    """``rank 3 is`` / ``ranks 1, 5 are`` (labels, at most 10 named)."""
    labels = [str(s["label"]) for s in stragglers]
    shown = ", ".join(labels[:10]) + (f" and {len(labels) - 10} more" if len(labels) > 10 else "")
    return f"rank {shown} is" if len(labels) == 1 else f"ranks {shown} are"


def cross_rank(
    table: Sequence[CrossRankRow] | Sequence[Mapping[str, Any]], th: RuleThresholds | Mapping[str, float]
) -> tuple[CrossRankResult, list[Finding]]:
    """Stragglers and load balance over the cross-rank table. The untyped forms of ``table`` and ``th``
    (rows and a name -> value mapping) are what the Lambda's engine adapter passes today."""
    if not isinstance(th, RuleThresholds):
        th = RuleThresholds.from_overrides(th)
    findings: list[Finding] = []
    stragglers: list[Straggler] = _waited_for(table, th)
    waits = bool(stragglers) or _waits(table) is not None
    use_steps = bool(table) and all(row["step_mean_us"] for row in table)
    metric = "exposed_comm_wait_us" if waits else "step_mean_us" if use_steps else "gpu_span_us"
    values = sorted(_metric(row, use_steps) for row in table)
    if len(table) >= 2 and values and not waits:
        n = len(values)
        median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
        for row in table:
            v = _metric(row, use_steps)
            if median > 0 and (v - median) / median * 100.0 > th.straggler_pct:
                stragglers.append(
                    {
                        "rank": row["rank"],
                        "label": row["label"],
                        "metric": metric,
                        "value": v,
                        "median": median,
                        "deviation_pct": round((v - median) / median * 100.0, 2),
                    }
                )
    lb: LoadBalance = {
        "metric": "compute_time_us",
        "min": None,
        "max": None,
        "mean": None,
        "spread_pct": None,
        "cv": None,
    }
    comp = [float(row["compute_time_us"]) for row in table]
    if comp:
        mean = sum(comp) / len(comp)
        lb["min"], lb["max"], lb["mean"] = min(comp), max(comp), round(mean, 3)
        if mean > 0:
            lb["spread_pct"] = round((max(comp) - min(comp)) / mean * 100.0, 3)
            var = sum((c - mean) ** 2 for c in comp) / len(comp)
            lb["cv"] = round(var**0.5 / mean, 4)
    if stragglers and waits:
        findings.append(
            _f(
                "Straggler",
                "warning",
                f"{_named(stragglers)} waited for: the other ranks spend more than "
                f"{th.straggler_pct / 2:g}% of a step longer waiting in collectives (exposed communication, on the "
                "GPU or the CPU), and more than twice as long as these ranks do",
                {
                    "stragglers": [s["rank"] for s in stragglers],
                    "metric": metric,
                    "worst_deviation_pct": max(s["deviation_pct"] for s in stragglers),
                },
                "The other ranks wait for these in every collective: check their hosts (data loading, CPU "
                "contention, thermal throttling) and their share of work, not the ranks that wait.",
                [int(s["rank"]) for s in stragglers],
            )
        )
    elif stragglers:
        findings.append(
            _f(
                "Straggler",
                "warning",
                f"{_named(stragglers)} more than {th.straggler_pct:g}% slower than the median ({metric})",
                {
                    "stragglers": [s["rank"] for s in stragglers],
                    "metric": metric,
                    "worst_deviation_pct": max(s["deviation_pct"] for s in stragglers),
                },
                "Check the slow ranks' host (data loading, CPU contention, thermal throttling) "
                "and their share of work.",
                [int(s["rank"]) for s in stragglers],
            )
        )
    if len(table) >= 2 and lb["spread_pct"] is not None and lb["spread_pct"] > th.load_balance_spread_pct:
        findings.append(
            _f(
                "LoadBalancing",
                "warning",
                f"GPU compute time differs by {lb['spread_pct']:.1f}% between ranks",
                {
                    "min_us": lb["min"],
                    "max_us": lb["max"],
                    "spread_pct": lb["spread_pct"],
                    "threshold_pct": th.load_balance_spread_pct,
                },
                "Balance work across ranks: equalise shard sizes / sequence lengths, check pipeline stage split "
                "and uneven expert routing.",
                [int(row["rank"]) for row in table],
            )
        )
    result: CrossRankResult = {"stragglers": stragglers, "load_balance": lb}
    return result, findings
