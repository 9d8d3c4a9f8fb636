"""Per-kernel statistics (top kernels by time and by count), precision mix and occupancy / Tensor Cores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from profstack.analysis import classify, op_types
from profstack.analysis.analyzers.time_breakdown import COMP_IDX
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.classify import follows
from profstack.analysis.classify import ops_can_tell as _ops_can_tell
from profstack.analysis.op_types import OpTypes
from profstack.analysis.precision import name_reading
from profstack.analysis.precision import named as named_precision
from profstack.analysis.precision import read as read_precision
from profstack.analysis.stats import pct, pct_or_none, r2
from profstack.analysis.summary import ConversionKernels, KernelStat, MathPrecisionShare, Occupancy

PrecisionSource = Literal["types", "op_types", "name", "context", "none", "n/a"]
SIXTEEN_BIT = ("fp16", "bf16")


def _kstat(
    v: RankView, nid: int, st: list[float], ops: OpTypes | None = None, context: str | None = None
) -> KernelStat:
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
            label, source = kernel_precision(name, ops, context)
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


def top_kernels_by_time(
    v: RankView, top_k: int, ops: OpTypes | None = None, context: str | None = None
) -> list[KernelStat]:
    names = v.names
    by_time = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st, ops, context) for nid, st in by_time]


def top_kernels_by_count(
    v: RankView, top_k: int, ops: OpTypes | None = None, context: str | None = None
) -> list[KernelStat]:
    names = v.names
    by_count = sorted(v.acc.kstats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], names[kv[0]]))[:top_k]
    return [_kstat(v, nid, st, ops, context) for nid, st in by_count]


@dataclass(frozen=True)
class ComputeKernels:
    """Precision and Tensor Core use of computation kernels (not NCCL or memory)."""

    precision: list[MathPrecisionShare]
    tensor_core_time_us: float
    kernel_time_us: float
    conversions: ConversionKernels
    #: the 16-bit float the rank's typed kernels say (``sixteen_bit_context``), which decides a kernel whose name
    #: says only "16-bit" where its operators do not say
    context: str | None = None


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


def sixteen_bit_context(v: RankView, ops: OpTypes | None) -> str | None:
    """fp16 or bf16 where the rank's computation kernels whose own argument types (or launching operators' input
    types) say a 16-bit float all say that one, by at least 1 µs; None where they say neither or both. A kernel
    whose name says only "16-bit" (cuDNN's ``..._wgmma_f16_...``) is that one when its operators do not say: a job
    computes in one 16-bit type (autocast's), and its elementwise and normalisation kernels name it."""
    acc, names = v.acc, v.names
    time = dict.fromkeys(SIXTEEN_BIT, 0.0)
    for nid, st in acc.kstats.items():
        if nid not in acc.kernel_ids or acc.type_cache.get(nid) != COMP_IDX:
            continue
        name = names[nid]
        if classify.is_conversion(name):
            continue
        cls, source = read_precision(name)
        if source == "types" and cls in time:
            time[cls] += st[1]
        elif ops is not None and _ops_can_tell(name) and name_reading(name)[1] != "16bit":
            for op_cls, (_n, t_share) in ops.shares(name).items():
                if op_cls in time:
                    time[op_cls] += st[1] * t_share
    said = [c for c in SIXTEEN_BIT if time[c] >= 1.0]
    return said[0] if len(said) == 1 else None


def resolve(name: str, op_cls: str | None, context: str | None) -> tuple[str, PrecisionSource]:
    """(class, source) of a kernel given what its operators' input types say (``op_cls``; None: nothing) and the
    rank's 16-bit context: a name that says only "16-bit" takes the operators' 16-bit type, else the context's,
    else stays ``other`` (never a guess); any other untyped name takes the operators' class
    (``op_types.combine``)."""
    cls, source = read_precision(name)
    if source != "types" and name_reading(name)[1] == "16bit":
        if op_cls in SIXTEEN_BIT:
            return op_cls, "op_types"
        if context is not None:
            return context, "context"
        return "other", "none"
    if op_cls is None or not _ops_can_tell(name):
        return cls, source
    return op_types.combine(cls, source, op_cls)  # type: ignore[return-value]


def kernel_precision(name: str, ops: OpTypes | None, context: str | None = None) -> tuple[str, PrecisionSource]:
    """The class a kernel is listed with, and where it was read: its argument types, else a data-type word or
    Tensile's code in its name, else the class most of its launching ops' input types say (op_types), else (a name
    that says only "16-bit") the rank's 16-bit context, else its kernel family's default or nothing."""
    shares = ops.shares(name) if ops is not None and _ops_can_tell(name) else {}
    best = max(sorted(shares), key=lambda c: shares[c][1]) if shares else None
    return resolve(name, best, context)


def compute_kernels(v: RankView, ops: OpTypes | None = None) -> ComputeKernels:
    """Precision mix and Tensor Core use of the computation kernels. With ``ops`` (the launching ops' input types
    of untyped kernels), such a kernel's time is split by its ops' classes (the file's shares, applied to the
    window's time), and what its ops did not say stays with the name's reading (a name that says only "16-bit":
    with the rank's 16-bit context, ``sixteen_bit_context``)."""
    acc, names = v.acc, v.names
    kstats, type_cache, kernel_ids = acc.kstats, acc.type_cache, acc.kernel_ids
    context = sixteen_bit_context(v, ops)
    # count, time, from names, from op types, from the rank's context
    prec: dict[str, list[float]] = {p: [0, 0.0, 0.0, 0.0, 0.0] for p in classify.PRECISIONS}
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
        shares = ops.shares(name) if ops is not None and _ops_can_tell(name) else {}
        parts = sorted(shares.items()) if shares else [(None, (1.0, 1.0))]
        for op_cls, (n_share, t_share) in parts:
            got, source = resolve(name, op_cls, context)
            p = prec[got]
            p[0] += st[0] * n_share
            p[1] += st[1] * t_share
            slot = {"name": 2, "op_types": 3, "context": 4}.get(source)
            if slot is not None:
                p[slot] += st[1] * t_share
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
            "from_context_time_us": r2(val[4]),
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
    return ComputeKernels(precision, tc_time, all_comp_time, conversions, context)


def occupancy(v: RankView, ck: ComputeKernels) -> Occupancy:
    acc = v.acc
    return {
        "kernels_with_occupancy": acc.n_occ,
        "weighted_mean_occupancy_pct": r2(acc.occ_w / acc.occ_t) if acc.occ_t > 0 else None,
        "tensor_core_time_us": r2(ck.tensor_core_time_us),
        "tensor_core_pct_of_compute": pct_or_none(ck.tensor_core_time_us, ck.kernel_time_us),
    }
