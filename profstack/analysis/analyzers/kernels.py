"""Per-kernel statistics (top kernels by time and by count), precision mix and occupancy / Tensor Cores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from profstack.analysis import classify, op_types
from profstack.analysis.analyzers.time_breakdown import COMP_IDX
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.op_types import OpTypes
from profstack.analysis.precision import name_reading
from profstack.analysis.precision import named as named_precision
from profstack.analysis.precision import read as read_precision
from profstack.analysis.stats import pct, pct_or_none, r2
from profstack.analysis.summary import ConversionKernels, KernelStat, MathPrecisionShare, Occupancy

PrecisionSource = Literal["types", "op_types", "name", "none", "n/a"]


def _kstat(v: RankView, nid: int, st: list[float], ops: OpTypes | None = None) -> KernelStat:
    n = int(st[0])
    mean = st[1] / n
    var = (st[2] - n * mean * mean) / (n - 1) if n > 1 else 0.0
    name = v.names[nid]
    ktype = classify.kernel_type(name)
    # Precision describes math; a NCCL int8 reduction or a memcpy has none worth reporting, and a cast
    # to fp8 is a conversion, not fp8 math.
    label: str = "n/a"
    source: PrecisionSource = "n/a"
    if ktype == classify.COMPUTATION:
        if classify.is_conversion(name):
            label, source = "conversion", read_precision(name)[1]
        else:
            label, source = kernel_precision(name, ops)
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


def top_kernels_by_time(v: RankView, top_k: int, ops: OpTypes | None = None) -> list[KernelStat]:
    names = v.names
    by_time = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st, ops) for nid, st in by_time]


def top_kernels_by_count(v: RankView, top_k: int, ops: OpTypes | None = None) -> list[KernelStat]:
    names = v.names
    by_count = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st, ops) for nid, st in by_count]


@dataclass(frozen=True)
class ComputeKernels:
    """Precision and Tensor Core use of computation kernels (not NCCL or memory)."""

    precision: list[MathPrecisionShare]
    tensor_core_time_us: float
    kernel_time_us: float
    conversions: ConversionKernels


def untyped_computation(v: RankView) -> tuple[set[str], float, float]:
    """(names, their time, all math time) of the rank's computation kernels (conversions aside) whose names carry
    no argument types: those whose precision the launching ops' input types can tell (profstack.analysis.op_types).
    Only where the name says nothing or only a kernel family's default (``follows``: the kernels the main pass
    collected the op types of)."""
    acc, names = v.acc, v.names
    out: set[str] = set()
    untyped = total = 0.0
    for nid, st in acc.kstats.items():
        if nid not in acc.kernel_ids or acc.type_cache.get(nid) != COMP_IDX:
            continue
        name = names[nid]
        if classify.is_conversion(name):
            continue
        total += st[1]
        if follows(name):  # the kernels whose ops the main pass followed (op_types.Collector)
            out.add(name)
            untyped += st[1]
    return out, untyped, total


@lru_cache(maxsize=65536)  # asked once per name and file by the main pass, and per rank
def follows(name: str) -> bool:
    """Whether the main pass follows the operators of kernels of this name (``op_types.Collector``): those whose
    names ``untyped_computation`` may return, a computation kernel, not a conversion, that ``_ops_can_tell``."""
    return classify.type_index(name) == COMP_IDX and not classify.is_conversion(name) and _ops_can_tell(name)


def _ops_can_tell(name: str) -> bool:
    """Whether the launching ops' input types may decide this kernel's precision: its name holds no argument types,
    and says nothing or only a kernel family's default (`sgemm`, `igemm`). A data-type word or Tensile's code in
    the name is the kernel's own statement, and beats the ops' types: a fused op takes bf16 and quantises inside,
    so Blackwell's `bmm_MxE4m3_MxE2m1...` under a bf16 op is fp8 math, as its name says."""
    return read_precision(name)[1] != "types" and name_reading(name)[1] in ("mark", "none")


def kernel_precision(name: str, ops: OpTypes | None) -> tuple[str, PrecisionSource]:
    """The class a kernel is listed with, and where it was read: its argument types, else a data-type word or
    Tensile's code in its name, else the class most of its launching ops' input types say (op_types), else its
    kernel family's default or nothing."""
    cls, source = read_precision(name)
    if ops is None or not _ops_can_tell(name):
        return cls, source
    shares = ops.shares(name)
    if not shares:
        return cls, source
    best = max(sorted(shares), key=lambda c: shares[c][1])
    return op_types.combine(cls, source, best)  # type: ignore[return-value]


def compute_kernels(v: RankView, ops: OpTypes | None = None) -> ComputeKernels:
    """Precision mix and Tensor Core use of the computation kernels. With ``ops`` (the launching ops' input types
    of untyped kernels), such a kernel's time is split by its ops' classes (the file's shares, applied to the
    window's time), and what its ops did not say stays with the name's reading."""
    acc, names = v.acc, v.names
    kstats, type_cache, kernel_ids = acc.kstats, acc.type_cache, acc.kernel_ids
    # count, time, from names, from op types
    prec: dict[str, list[float]] = {p: [0, 0.0, 0.0, 0.0] for p in classify.PRECISIONS}
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
        shares = ops.shares(name) if ops is not None and _ops_can_tell(name) else {}
        if shares:
            for op_cls, (n_share, t_share) in sorted(shares.items()):
                got, _ = op_types.combine(cls, source, op_cls)
                p = prec[got]
                p[0] += st[0] * n_share
                p[1] += st[1] * t_share
                if got == op_cls:
                    p[3] += st[1] * t_share
                else:
                    p[2] += st[1] * t_share
        else:
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
            "count": max(1, round(val[0])),  # a class's share of a kernel name's launches, at least one
            "time_us": r2(val[1]),
            "pct": pct(val[1], comp_kernel_time),
            "from_name_time_us": r2(val[2]),
            "from_op_types_time_us": r2(val[3]),
        }
        for p, val in prec.items()
        if val[0] > 0
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
