"""Per-kernel statistics (top kernels by time and by count), precision mix and occupancy / Tensor Cores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from profstack.analysis import classify
from profstack.analysis.analyzers.time_breakdown import COMP_IDX
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.precision import named as named_precision
from profstack.analysis.precision import read as read_precision
from profstack.analysis.stats import pct, pct_or_none, r2
from profstack.analysis.summary import ConversionKernels, KernelStat, MathPrecisionShare, Occupancy


def _kstat(v: RankView, nid: int, st: list[float]) -> KernelStat:
    n = int(st[0])
    mean = st[1] / n
    var = (st[2] - n * mean * mean) / (n - 1) if n > 1 else 0.0
    name = v.names[nid]
    ktype = classify.kernel_type(name)
    # Precision describes math; a NCCL int8 reduction or a memcpy has none worth reporting, and a cast
    # to fp8 is a conversion, not fp8 math.
    label: str = "n/a"
    source: Literal["types", "name", "none", "n/a"] = "n/a"
    if ktype == classify.COMPUTATION:
        cls, read_from = read_precision(name)
        label, source = ("conversion" if classify.is_conversion(name) else cls), read_from
    return {
        "name": name,
        "kernel_type": ktype,
        "precision": label,
        "precision_source": source,
        "count": n,
        "total_us": r2(st[1]),
        "mean_us": r2(mean),
        "min_us": r2(st[3]),
        "max_us": r2(st[4]),
        "std_us": r2(math.sqrt(max(var, 0.0))),
        "pct_of_gpu_op_time": pct(st[1], sum(v.acc.time_by_kind)),
    }


def top_kernels_by_time(v: RankView, top_k: int) -> list[KernelStat]:
    names = v.names
    by_time = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st) for nid, st in by_time]


def top_kernels_by_count(v: RankView, top_k: int) -> list[KernelStat]:
    names = v.names
    by_count = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st) for nid, st in by_count]


@dataclass(frozen=True)
class ComputeKernels:
    """Precision and Tensor Core use of computation kernels (not NCCL or memory)."""

    precision: list[MathPrecisionShare]
    tensor_core_time_us: float
    kernel_time_us: float
    conversions: ConversionKernels


def compute_kernels(v: RankView) -> ComputeKernels:
    acc, names = v.acc, v.names
    kstats, type_cache, kernel_ids = acc.kstats, acc.type_cache, acc.kernel_ids
    prec: dict[str, list[float]] = {p: [0, 0.0, 0.0] for p in classify.PRECISIONS}  # count, time, from names
    conv: dict[str, list[float]] = {}
    tc_time = 0.0
    comp_kernel_time = 0.0
    all_comp_time = 0.0
    for nid, st in kstats.items():
        # Precision and Tensor Core use are properties of computation kernels only (not NCCL or memory).
        if nid not in kernel_ids or type_cache.get(nid) != COMP_IDX:
            continue
        name = names[nid]
        all_comp_time += st[1]
        if classify.is_conversion(name):
            c = conv.setdefault(named_precision(name), [0, 0.0])  # the precision it converts to or from
            c[0] += st[0]
            c[1] += st[1]
            if classify.uses_tensor_cores(name):
                tc_time += st[1]
            continue
        cls, source = read_precision(name)
        p = prec[cls]
        p[0] += st[0]
        p[1] += st[1]
        if source == "name":
            p[2] += st[1]
        comp_kernel_time += st[1]
        if classify.uses_tensor_cores(name):
            tc_time += st[1]
    precision: list[MathPrecisionShare] = [
        {
            "precision": p,
            "count": int(val[0]),
            "time_us": r2(val[1]),
            "pct": pct(val[1], comp_kernel_time),
            "from_name_time_us": r2(val[2]),
        }
        for p, val in prec.items()
        if val[0]
    ]
    conv_time = sum(c[1] for c in conv.values())
    conversions: ConversionKernels = {
        "count": int(sum(c[0] for c in conv.values())),
        "time_us": r2(conv_time),
        "pct_of_computation": pct_or_none(conv_time, all_comp_time),
        "by_precision": [
            {"precision": p, "count": int(c[0]), "time_us": r2(c[1]), "pct": pct(c[1], conv_time)}
            for p, c in sorted(conv.items(), key=lambda kv: -kv[1][1])
        ],
    }
    return ComputeKernels(precision, tc_time, all_comp_time, conversions)


def occupancy(v: RankView, ck: ComputeKernels) -> Occupancy:
    acc = v.acc
    return {
        "kernels_with_occupancy": acc.n_occ,
        "weighted_mean_occupancy_pct": r2(acc.occ_w / acc.occ_t) if acc.occ_t > 0 else None,
        "tensor_core_time_us": r2(ck.tensor_core_time_us),
        "tensor_core_pct_of_compute": pct_or_none(ck.tensor_core_time_us, ck.kernel_time_us),
    }
