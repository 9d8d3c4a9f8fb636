"""Exact GPU time by default (issue #43 item 1): against ground truth built by construction, against a brute-force
reference on hypothesis-drawn ns intervals, and HTA's whole-µs model only where asked for (--hta-compat).

The traces are written as Kineto writes them: µs with three decimals (ns) since ``baseTimeNanoseconds``, or whole µs,
or absolute epoch µs. Every interval is known in integer ns, so busy time, unions, totals and idle are known exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, gpu, native
from profstack.analysis.summary import Summary

from .neutral import engine_neutral

COMPUTE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


@dataclass(frozen=True)
class Op:
    """A GPU op in integer ns: [start, start + dur) on ``stream``."""

    start: int
    dur: int
    name: str = COMPUTE
    stream: int = 7


def _us(ns: int, *, whole: bool) -> str:
    """A time as Kineto writes it: µs with three decimals (``ns / 1000``), or whole µs (2021 traces)."""
    if whole:
        assert ns % 1000 == 0
        return str(ns // 1000)
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"


def kineto(ops: Sequence[Op], *, base_ns: int = 0, whole_us: bool = False, epoch: bool = False) -> bytes:
    """A torch >= 2 style trace of ``ops``: each launched 4 µs before it starts (cudaLaunchKernel, 2.5 µs on the host)
    under one CPU op, no ProfilerStep (every op analysed). ``base_ns`` is added to every time; with ``epoch`` the
    times are absolute (no ``baseTimeNanoseconds``), as HTA's ns_resolution sample writes them."""
    events: list[str] = []
    lo = min(o.start for o in ops) - 10_000
    hi = max(o.start + o.dur for o in ops) + 10_000

    def ev(body: str, ts: int, dur: int) -> None:
        events.append(
            f'{{"ph": "X", {body}, "ts": {_us(ts + base_ns, whole=whole_us)}, "dur": {_us(dur, whole=whole_us)}'
        )

    ev('"cat": "cpu_op", "name": "aten::train_step", "pid": 1, "tid": 1', lo, hi - lo)
    events[-1] += "}"
    for i, o in enumerate(ops, 1):
        launch = o.start - 4_000
        ev(
            '"cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1',
            launch,
            2_500 if not whole_us else 2_000,
        )
        events[-1] += f', "args": {{"correlation": {i}}}}}'
        ev(f'"cat": "kernel", "name": "{o.name}", "pid": 0, "tid": {o.stream}', o.start, o.dur)
        events[-1] += f', "args": {{"stream": {o.stream}, "correlation": {i}, "device": 0}}}}'
    header = '"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]'
    if not epoch:
        header += ', "baseTimeNanoseconds": 1790857026000000000'
    return ("{" + header + ', "traceEvents": [\n  ' + ",\n  ".join(events) + "\n]}").encode()


def run(data: bytes, **opts: Any) -> Summary:
    return analyze([BytesTraceSource(data=data, name="rank0.pt.trace.json")], AnalysisOptions(top_k=50, **opts)).summary


# ----------------------------------------------------------------------------- a brute-force reference in integer ns


def union_ns(spans: Sequence[tuple[int, int]]) -> int:
    """Length of the union of half-open [a, b) intervals (empty ones dropped): sort and sweep."""
    total, end = 0, None
    start = 0
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    return total + (end - start if end is not None else 0)


@dataclass(frozen=True)
class Truth:
    busy_ns: int
    span_ns: int
    compute_ns: int
    comm_ns: int
    overlap_ns: int  # computation and communication running at once
    per_name_ns: dict[str, int]
    count: dict[str, int]


def truth(ops: Sequence[Op]) -> Truth:
    spans = [(o.start, o.start + o.dur) for o in ops]
    live = [s for s in spans if s[1] > s[0]]
    compute = [(o.start, o.start + o.dur) for o in ops if o.name != NCCL]
    comm = [(o.start, o.start + o.dur) for o in ops if o.name == NCCL]
    per_name: dict[str, int] = {}
    count: dict[str, int] = {}
    for o in ops:
        per_name[o.name] = per_name.get(o.name, 0) + o.dur
        count[o.name] = count.get(o.name, 0) + 1
    c, m = union_ns(compute), union_ns(comm)
    busy = union_ns(spans)
    return Truth(
        busy_ns=busy,
        span_ns=(max(b for _, b in live) - min(a for a, _ in live)) if live else 0,
        compute_ns=c,
        comm_ns=m,
        overlap_ns=c + m - busy,
        per_name_ns=per_name,
        count=count,
    )


def r3(ns: int) -> float:
    """What the summary writes for a time of ``ns``: µs, rounded to 3 decimals."""
    return round(ns / 1000, 3)


def assert_matches(summary: Summary, t: Truth) -> None:
    (rank,) = summary["ranks"]
    tb = rank["temporal_breakdown"]
    assert tb["gpu_span_us"] == r3(t.span_ns)
    assert tb["idle_time_us"] == pytest.approx(r3(t.span_ns - t.busy_ns), abs=2e-3)
    assert tb["compute_time_us"] == r3(t.compute_ns)
    kernels = {k["name"]: k for k in rank["top_kernels_by_time"]}
    for name, ns in t.per_name_ns.items():
        assert kernels[name]["total_us"] == r3(ns), name
        assert kernels[name]["count"] == t.count[name], name
    assert rank["gpu_activity"]["kernel_time_us"] == r3(sum(t.per_name_ns.values()))
    assert rank["communication"]["comm_time_us"] == r3(t.comm_ns)
    shares = {k["kernel_type"]: k["time_us"] for k in rank["kernel_types"]}
    if t.overlap_ns:
        assert shares["COMPUTATION overlapping COMMUNICATION"] == r3(t.overlap_ns)


# ----------------------------------------------------------------------------- ground truth by construction


def _tiny_kernels(n: int = 6400, dur_ns: int = 960, gap_ns: int = 540, start: int = 5_000_000) -> list[Op]:
    return [Op(start + i * (dur_ns + gap_ns), dur_ns) for i in range(n)]


def test_6400_kernels_of_0_96_us_give_6144_us_of_gpu_time() -> None:
    # GIVEN a step of 6,400 elementwise kernels of 0.96 µs (an H200's), 0.54 µs apart, ns-resolution times
    ops = _tiny_kernels()
    # WHEN analysed with the defaults (the exact time model)
    summary = run(kineto(ops))
    (rank,) = summary["ranks"]
    # THEN busy time is 6,144 µs, not 0: every kernel, its total, count and the idle between them, exactly
    assert summary["time_model"] == "exact"
    assert rank["gpu_activity"]["kernel_time_us"] == 6144.0
    tb = rank["temporal_breakdown"]
    assert tb["gpu_span_us"] - tb["idle_time_us"] == pytest.approx(6144.0, abs=1e-6)
    assert tb["idle_time_us"] == pytest.approx(6399 * 0.54, abs=1e-6)
    assert_matches(summary, truth(ops))
    assert rank["time_resolution_ns"] == 1.0
    assert summary["complete"] is True
    assert not [w for w in summary.get("warnings") or [] if w["error_type"] == "RoundingLossError"]


def test_hta_compat_rounds_the_same_kernels_away_and_says_so() -> None:
    # GIVEN the same 6,400 kernels WHEN analysed in HTA's time model (--hta-compat)
    summary = run(kineto(_tiny_kernels()), hta_compat=True)
    (rank,) = summary["ranks"]
    # THEN HTA's numbers: each kernel within one whole µs counts 0 (start up, end down), and the loss is said
    assert summary["time_model"] == "hta"
    assert summary["options"]["hta_compat"] is True
    assert rank["gpu_activity"]["kernel_time_us"] < 0.6 * 6144.0
    assert rank["time_resolution_ns"] == 1000.0
    lost = [w for w in summary.get("warnings") or [] if w["error_type"] == "RoundingLossError"]
    assert lost
    assert "HTA's whole-µs rounding" in lost[0]["message"]


def test_overlapping_streams_give_the_exact_union_and_overlap() -> None:
    # GIVEN compute on stream 7 and NCCL on stream 13, overlapping by sub-µs amounts, and a kernel nested in another
    ops = [
        Op(1_000_000, 12_345, GEMM),
        Op(1_003_210, 777, COMPUTE),  # inside the GEMM
        Op(1_012_000, 4_999, NCCL, 13),  # overlaps the GEMM's last 345 ns
        Op(1_020_001, 1, COMPUTE),  # a 1 ns kernel
        Op(1_020_001, 0, COMPUTE),  # and an empty one at the same start
    ]
    t = truth(ops)
    assert (t.busy_ns, t.overlap_ns) == (12_345 + 4_999 - 345 + 1, 345)
    # WHEN analysed THEN span, idle, compute, communication, overlap and per-kernel totals are exact
    summary = run(kineto(ops))
    assert_matches(summary, t)
    assert summary["ranks"][0]["communication"]["comm_time_us"] == 4.999


def test_an_epoch_clock_keeps_every_duration_and_says_its_resolution() -> None:
    # GIVEN absolute epoch-µs times (~1.7e15 µs: a double holds them to 0.25 µs), kernels of 0.96 µs, 2 µs apart
    base = 1_712_195_495_523_353_000
    ops = [Op(i * 2_000, 960) for i in range(500)]
    summary = run(kineto(ops, base_ns=base, epoch=True))
    (rank,) = summary["ranks"]
    # THEN each duration counts whole (the starts move by up to 0.125 µs, no two kernels overlap), and the rank says
    # its times hold 250 ns
    assert rank["gpu_activity"]["kernel_time_us"] == 480.0
    tb = rank["temporal_breakdown"]
    assert tb["gpu_span_us"] - tb["idle_time_us"] == pytest.approx(480.0, abs=1e-6)
    assert tb["gpu_span_us"] == pytest.approx(499 * 2 + 0.96, abs=0.25)
    assert rank["time_resolution_ns"] == 250.0


def test_a_whole_microsecond_trace_is_the_same_in_both_models() -> None:
    # GIVEN a 2021-style trace in whole µs
    ops = [Op(1_000_000 + i * 7_000, 5_000, GEMM if i % 2 else COMPUTE) for i in range(40)]
    data = kineto(ops, whole_us=True)
    # WHEN analysed exactly and in HTA's model THEN the numbers are the same, at whole-µs resolution
    exact, hta = run(data), run(data, hta_compat=True)
    for section in ("temporal_breakdown", "idle_breakdown", "gpu_activity", "kernel_types", "top_kernels_by_time"):
        assert exact["ranks"][0][section] == hta["ranks"][0][section], section
    assert exact["ranks"][0]["time_resolution_ns"] == 1000.0
    assert_matches(exact, truth(ops))


def _step_trace(launch_us: str) -> bytes:
    """Two steps, the second starting at 1000.4 µs; a kernel launched at ``launch_us``."""
    events = [
        '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.4}',
        '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1000.4, "dur": 500}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1400}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 3.5, '
        '"args": {"correlation": 1}}',
        '{"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 20.0, "dur": 100.0, '
        '"args": {"stream": 7, "correlation": 1}}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ' + launch_us + ", "
        '"dur": 0.1, "args": {"correlation": 2}}',
        '{"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 1002.0, "dur": 50.0, '
        '"args": {"stream": 7, "correlation": 2}}',
    ]
    return ('{"traceEvents": [' + ",".join(events) + "]}").encode()


def test_the_last_step_rule_compares_launches_as_written() -> None:
    # GIVEN a kernel launched at 1000.2 µs, 0.2 µs before the last step starts (1000.4 µs)
    data = _step_trace("1000.2")
    # WHEN analysed exactly THEN it belongs to the first step and is analysed; HTA's ceil puts both at 1001 µs and
    # drops it with the last step
    exact, hta = run(data), run(data, hta_compat=True)
    assert {k["name"] for k in exact["ranks"][0]["top_kernels_by_time"]} == {"k0", "k1"}
    assert {k["name"] for k in hta["ranks"][0]["top_kernels_by_time"]} == {"k0"}


def test_launch_delays_are_exact() -> None:
    # GIVEN a launch of 3.5 µs from 10.0 µs and its kernel at 20.0 µs (and one launched 0.1 µs before its kernel)
    summary = run(_step_trace("1001.9"), include_last_step=True)
    ld = summary["ranks"][0]["launch_delay"]
    # THEN the delays are 6.5 µs and 0.0 µs (launch end 1002.0), where HTA's floor/ceil gives 7 and 1 µs
    assert (ld["count"], ld["max_us"], ld["negative_raw_count"]) == (2, 6.5, 0)
    hta = run(_step_trace("1001.9"), include_last_step=True, hta_compat=True)["ranks"][0]["launch_delay"]
    assert (hta["count"], hta["max_us"]) == (2, 7.0)


# ----------------------------------------------------------------------------- hypothesis: a brute-force reference


@st.composite
def ns_ops(draw: st.DrawFn) -> list[Op]:
    n = draw(st.integers(1, 40))
    ops = []
    for _ in range(n):
        ops.append(
            Op(
                start=draw(st.integers(0, 60_000)),
                dur=draw(st.one_of(st.integers(0, 1_500), st.integers(0, 30_000))),
                name=draw(st.sampled_from([COMPUTE, GEMM, NCCL])),
                stream=draw(st.sampled_from([7, 13, 20])),
            )
        )
    if all(o.dur == 0 for o in ops):
        ops.append(Op(0, 1))
    return ops


#: bases where a double holds every ns (torch >= 2's µs since baseTimeNanoseconds reach ~1e13 after months)
BASES = [0, 5_104_278_176_450_970, 7_999_999_999_999_999]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ns_ops(), base=st.sampled_from(BASES))
def test_the_engine_agrees_with_a_brute_force_union_on_ns_intervals(ops: list[Op], base: int) -> None:
    # GIVEN ops with ns starts and durations, many shorter than a µs, overlapping on up to three streams
    # WHEN analysed (exact time model)
    summary = run(kineto(ops, base_ns=base))
    # THEN span, idle, computation, communication, overlap and per-kernel totals are those of the integer intervals
    assert_matches(summary, truth(ops))
    assert summary["complete"] is True


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ns_ops(), base=st.sampled_from(BASES), hta=st.booleans())
def test_the_c_and_python_engines_give_the_same_summary_on_ns_intervals(ops: list[Op], base: int, hta: bool) -> None:
    # GIVEN drawn ns intervals WHEN analysed with the C loops and with the Python ones, in either time model
    data = kineto(ops, base_ns=base)
    with_c = json.dumps(engine_neutral(run(data, hta_compat=hta)), sort_keys=True)
    saved = native.ACCEL
    native.ACCEL = None
    try:
        with_python = json.dumps(engine_neutral(run(data, hta_compat=hta)), sort_keys=True)
    finally:
        native.ACCEL = saved
    # THEN the summaries are the same byte for byte
    assert with_c == with_python


# ----------------------------------------------------------------------------- the ns clock itself


@settings(max_examples=300, deadline=None)
@given(ns=st.integers(-(10**16), 10**16))
def test_ns_of_recovers_every_ns_a_double_holds(ns: int) -> None:
    # GIVEN a time in ns written as Kineto writes it (µs, three decimals) and read as a double
    us = float(_us(ns, whole=False))
    # WHEN converted to the ns clock THEN it is the nearest ns to the double, which is the written ns wherever a double
    # holds ns (below 2**43 µs)
    got = gpu.ns_of(us)
    if abs(us) < 2.0**43:
        assert got == ns
    else:  # coarser than a ns: the nearest ns to what the double holds
        assert abs(got - ns) <= math.ulp(us) * 1000


@given(x=st.floats(-(2.0**53) + 1, 2.0**53 - 1))
def test_ns_of_is_exact_integer_arithmetic_for_every_double(x: float) -> None:
    # GIVEN any double within the parser's range WHEN converted THEN it is the nearest integer to x * 1000 computed
    # exactly (Fraction arithmetic), not the double product x * 1000.0 (which rounds at 256 ns on an epoch clock):
    # only within 2**-40 of a half can the fraction's one rounding decide the other way
    exact = Fraction(x) * 1000
    assert abs(Fraction(gpu.ns_of(x)) - exact) <= Fraction(1, 2) + Fraction(1, 2**40)


@pytest.mark.skipif(not hasattr(native.ACCEL, "us_column"), reason="the C module is not built")
@settings(max_examples=100, deadline=None)
@given(
    col=st.lists(st.one_of(st.integers(-(2**60), 2**60).map(float), st.floats(allow_nan=True)), max_size=50),
    base_us=st.one_of(st.integers(-(2**52), 2**52).map(float), st.floats(allow_nan=True, allow_infinity=True)),
)
def test_the_c_timeline_conversion_is_pythons_to_the_bit(col: list[float], base_us: float) -> None:
    # GIVEN relative ns (integral doubles, and any other double) and a whole-µs base
    from array import array

    data = array("d", col)
    # WHEN converted to µs by C (us_column) and by Python (gpu._us_column) THEN every bit is the same
    c_out = native.ACCEL.us_column(data, base_us)  # type: ignore[union-attr]
    py_out = gpu._us_column(data, base_us)
    assert [x.hex() for x in c_out] == [x.hex() for x in py_out]
    # AND a column of another type, or a base that is not a float, is declined (Python then converts)
    assert native.ACCEL.us_column(array("q", [1]), base_us) is NotImplemented  # type: ignore[union-attr]
    assert native.ACCEL.us_column(data, 3) is NotImplemented  # type: ignore[union-attr]
