"""Precision of kernels whose names carry no types, read from the operators that launched them (#34 item 3):
``record_shapes``' input types, joined by External id (profstack.analysis.op_types)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, op_types
from profstack.analysis.parse import bounded_name
from profstack.analysis.precision import ORDER

BF16, HALF, FLOAT, LONG = "c10::BFloat16", "c10::Half", "float", "long int"
TRITON = "triton_poi_fused_add_mul_0"  # Inductor's kernels: no types in the name (precision "none" by name)
TF32_GEMM = "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4"  # the naming scheme says TF32
TYPED = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>(int, c10::Half*)"


def _op(ext: int, ts: float, types: list[str] | None, *, key: str = "External id") -> dict[str, Any]:
    args: dict[str, Any] = {key: ext}
    if types is not None:
        args["Input type"] = types
    return {"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1, "ts": ts, "dur": 8.0, "args": args}


def _launch(corr: int, ts: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2.0,
            "args": {"correlation": corr}}  # fmt: skip


def _kernel(
    name: str, corr: int, ext: int | None, ts: float, dur: float, *, key: str = "External id"
) -> dict[str, Any]:
    args: dict[str, Any] = {"stream": 7, "correlation": corr, "device": 0}
    if ext is not None:
        args[key] = ext
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def _trace(launched: list[tuple[str, list[str] | None, float]], *, kernels_first: bool = False, **header: Any) -> bytes:
    """One op -> one launch -> one kernel per (kernel name, op input types, kernel µs), Kineto's order (CPU first)."""
    cpu: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6}
    ]
    gpu: list[dict[str, Any]] = []
    for i, (name, types, dur) in enumerate(launched):
        ts = 100.0 * i + 10
        cpu += [_op(i + 1, ts, types), _launch(i + 1, ts + 1)]
        gpu.append(_kernel(name, i + 1, i + 1, ts + 5, dur))
    events = gpu + cpu if kernels_first else cpu + gpu
    return json.dumps({"schemaVersion": 1, **header, "traceEvents": events}).encode()


def _rank(data: bytes, **opts: Any) -> dict[str, Any]:
    summary = analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions(include_last_step=True, **opts)).summary
    rank: dict[str, Any] = summary["ranks"][0]
    return rank


def _mix(rank: dict[str, Any]) -> dict[str, float]:
    return {p["precision"]: p["pct"] for p in rank["precision"]}


def _kernel_row(rank: dict[str, Any], name: str) -> dict[str, Any]:
    return next(k for k in rank["top_kernels_by_time"] if k["name"] == name)


def test_an_untyped_kernel_takes_its_operators_types() -> None:
    # GIVEN Triton kernels (no types in the name) launched by bf16 operators, with record_shapes on
    rank = _rank(_trace([(TRITON, [BF16, BF16, "Scalar"], 90.0), (TRITON, [BF16, LONG], 10.0)], record_shapes=1))
    # THEN the kernels compute in bf16, read from the operators (by name alone: "other", source "none")
    assert _mix(rank) == {"bf16": 100.0}
    row = _kernel_row(rank, TRITON)
    assert (row["precision"], row["precision_source"]) == ("bf16", "op_types")
    (share,) = rank["precision"]
    assert share["from_op_types_time_us"] == 100.0
    assert share["from_name_time_us"] == 0.0
    # AND without op types (the option off) the name's reading stands, marked
    off = _rank(_trace([(TRITON, [BF16, BF16], 90.0), (TRITON, [BF16, LONG], 10.0)], record_shapes=1), op_types=False)
    assert _mix(off) == {"other": 100.0}
    assert _kernel_row(off, TRITON)["precision_source"] == "none"


def test_one_kernel_name_launched_in_two_precisions_is_split_by_time() -> None:
    # GIVEN one Triton kernel launched 3 times by bf16 ops (30 µs each) and once by a float op (10 µs)
    launched = [(TRITON, [BF16], 30.0)] * 3 + [(TRITON, [FLOAT], 10.0)]
    rank = _rank(_trace(launched, record_shapes=1))
    # THEN the mix follows the operators: 90 µs bf16, 10 µs fp32; the kernel row names the larger share
    assert _mix(rank) == {"bf16": 90.0, "fp32": 10.0}
    counts = {p["precision"]: p["count"] for p in rank["precision"]}
    assert counts == {"bf16": 3, "fp32": 1}
    assert _kernel_row(rank, TRITON)["precision"] == "bf16"


def test_a_kernels_own_types_win_and_tf32_survives_fp32_inputs() -> None:
    # GIVEN a kernel whose name carries its types (Half) under a float op, and a TF32 GEMM under float inputs
    rank = _rank(_trace([(TYPED, [FLOAT, FLOAT], 50.0), (TF32_GEMM, [FLOAT, FLOAT], 50.0)], record_shapes=1))
    # THEN the typed kernel stays fp16 (its own argument types), and the GEMM stays TF32 (how fp32 inputs ran)
    assert _mix(rank) == {"fp16": 50.0, "tf32": 50.0}
    assert _kernel_row(rank, TYPED)["precision_source"] == "types"
    assert (_kernel_row(rank, TF32_GEMM)["precision"], _kernel_row(rank, TF32_GEMM)["precision_source"]) == (
        "tf32",
        "name",
    )


def test_a_data_type_word_in_the_kernel_name_beats_the_ops_types() -> None:
    # GIVEN Blackwell's MoE GEMM (MXFP8 x MXFP4, named so) launched by a fused op whose inputs are bf16 (it quantises
    # inside: a real B200 trace, samples/traces/tracelens/b200), and a cuBLAS-family kernel under a bf16 op
    moe = "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32"
    rank = _rank(_trace([(moe, [BF16, BF16], 60.0), ("ampere_sgemm_128x64_nn", [BF16], 40.0)], record_shapes=1))
    # THEN the kernel's own word decides (fp8, read from the name), and the family default yields to the op (bf16)
    assert (_kernel_row(rank, moe)["precision"], _kernel_row(rank, moe)["precision_source"]) == ("fp8", "name")
    assert _kernel_row(rank, "ampere_sgemm_128x64_nn")["precision"] == "bf16"
    assert _mix(rank) == {"fp8": 60.0, "bf16": 40.0}


def test_kernels_written_before_their_operators_and_2021_keys_are_joined() -> None:
    # GIVEN GPU rows written before the CPU side, and the 2021 spelling "external id" on the GPU rows
    data = _trace([(TRITON, [HALF], 40.0)], kernels_first=True)
    doc = json.loads(data)
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel":
            ev["args"]["external id"] = ev["args"].pop("External id")
    # WHEN analysed (no record_shapes key in the header: an older writer) THEN the op's type still decides
    rank = _rank(json.dumps(doc).encode())
    assert _mix(rank) == {"fp16": 100.0}


def test_without_input_types_or_with_record_shapes_off_names_decide() -> None:
    # GIVEN the op without "Input type", and a header that says record_shapes was off
    no_types = _rank(_trace([(TRITON, None, 40.0)]))
    off = _rank(_trace([(TRITON, [BF16], 40.0)], record_shapes=0))
    # THEN the name's reading stands ("other": the trace does not say)
    assert _mix(no_types) == {"other": 100.0}
    assert _mix(off) == {"other": 100.0}


def test_a_small_untyped_share_is_not_worth_a_second_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN untyped kernels under MIN_UNTYPED_SHARE of computation time
    calls: list[int] = []
    real = op_types.read

    def counting(*args: Any, **kwargs: Any) -> op_types.OpTypes:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(op_types, "read", counting)
    small = [(TYPED, [FLOAT], 99.0), (TRITON, [BF16], 1.0)]
    rank = _rank(_trace(small, record_shapes=1))
    # THEN the file is read once, and the untyped kernel keeps its name's reading
    assert calls == []
    assert _kernel_row(rank, TRITON)["precision_source"] == "none"
    _rank(_trace([(TYPED, [FLOAT], 90.0), (TRITON, [BF16], 10.0)], record_shapes=1))
    assert calls == [1]
    # AND kernels whose names carry a data-type word (or Tensile's code) do not ask for it: the ops add nothing
    worded = [("gemm_bf16_kernel_128x128", [BF16], 60.0), ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32", [BF16], 40.0)]
    _rank(_trace(worded, record_shapes=1))
    assert calls == [1]


# ---------------------------------------------------------------------------------------------- the reader


def _batches(events: list[dict[str, Any]], size: int = 3) -> list[memoryview]:
    return [memoryview(msgspec.json.encode(events[i : i + size])) for i in range(0, len(events), size)]


def test_the_reader_gives_up_early_only_where_no_operator_has_types() -> None:
    # GIVEN many events and no operator with input types
    plain = [_kernel(TRITON, i, i, float(i), 1.0) for i in range(50)]
    got = op_types.read(iter(_batches(plain)), {TRITON}, bounded_name, give_up_after=10)
    # THEN it stops after the bound (not reading the rest of the file), having found nothing
    assert got.gave_up
    assert not got.by_name
    # AND where the header promised them (no bound) it reads to the end
    assert not op_types.read(iter(_batches(plain)), {TRITON}, bounded_name, give_up_after=None).gave_up


def test_the_reader_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN more operators and waiting kernels than the bounds allow
    monkeypatch.setattr(op_types, "MAX_OPS", 5)
    monkeypatch.setattr(op_types, "MAX_PENDING", 3)
    events = [_kernel(TRITON, i, 100 + i, float(i), 1.0) for i in range(6)]  # before their ops: waiting
    events += [_op(100 + i, float(i), [BF16]) for i in range(10)]
    got = op_types.read(iter(_batches(events)), {TRITON}, bounded_name, give_up_after=None)
    # THEN only what fits is kept, and the rest is counted, never guessed
    assert got.ops_dropped == 5
    assert got.by_name[TRITON]["bf16"][0] == 3  # the 3 kernels that waited, all of whose ops were kept
    assert got.kernels_without_op == 3


def test_ill_typed_events_are_read_without_their_args() -> None:
    # GIVEN a batch with an op whose "Input type" is not a list, beside a good op and kernel
    events = [_op(1, 0.0, [BF16]), _kernel(TRITON, 1, 1, 5.0, 2.0)]
    bad = {"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1.0, "dur": 1.0, "args": {"External id": 2, "Input type": 7}}
    got = op_types.read(iter(_batches([*events, bad], size=3)), {TRITON}, bounded_name, give_up_after=None)
    # THEN the good pair is still joined
    assert got.by_name == {TRITON: {"bf16": [1, 2.0]}}


_DTYPES = [BF16, HALF, FLOAT, "double", "c10::Float8_e4m3fn", "signed char", LONG, "int", "bool", "", "Scalar"]
_CLASS = {BF16: "bf16", HALF: "fp16", FLOAT: "fp32", "double": "fp32", "c10::Float8_e4m3fn": "fp8"}


@given(st.lists(st.sampled_from(_DTYPES), max_size=12))
@settings(max_examples=300, deadline=None)
def test_the_narrowest_float_input_decides_and_integers_say_nothing(types: list[str]) -> None:
    # GIVEN any list of input dtypes WHEN classed
    got = op_types.op_class(types)
    # THEN the narrowest float type wins; with none, int8 only where a signed char is there; else nothing
    floats = [_CLASS[t] for t in types if t in _CLASS]
    if floats:
        assert got == min(floats, key=ORDER.index)
    elif "signed char" in types:
        assert got == "int8"
    else:
        assert got is None


@given(st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=25), st.floats(allow_nan=True), st.booleans()))
@settings(max_examples=300, deadline=None)
def test_an_external_id_of_any_json_type_is_read_or_left_unknown(raw: Any) -> None:
    # GIVEN an External id of any JSON type (ROCm writes numbers as strings)
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 0.0, "dur": 1.0, "args": {"External id": raw}}]
    # WHEN read THEN never an exception: an integer id where the text or float is one, else unknown
    got = op_types.read(iter(_batches(events)), set(), bounded_name, give_up_after=None)
    assert got.kernels_without_op == 0
    try:  # what the reader does with the args: a type msgspec refuses (a boolean, an integer beyond 64 bits)
        args = msgspec.json.decode(msgspec.json.encode(events[0]["args"]), type=op_types._Args)
    except msgspec.ValidationError:  # drops them: the event is read without its args (_decode_each)
        assert type(raw) is bool or (type(raw) is int and not -(2**63) <= raw < 2**64)
        return
    ext = args.ext
    assert ext is None or type(ext) is int
    if type(raw) is int:
        assert ext == raw


def test_the_report_marks_precision_read_from_the_ops() -> None:
    from profstack.report import render_html

    # GIVEN a Triton kernel whose precision came from its bf16 operators
    summary = analyze(
        [BytesTraceSource(_trace([(TRITON, [BF16], 40.0)], record_shapes=1), name="t.json")],
        AnalysisOptions(include_last_step=True),
    ).summary
    page = render_html(summary)
    # THEN its row is marked †, the note says what † means, and the precision card says how much time it covers
    assert "bf16†" in page
    assert "† from the input types of the operators that launched it (record_shapes)" in page
    assert "100.0% of the time from the input types of the operators that launched kernels" in page


def test_the_cli_flag_turns_the_second_read_off(tmp_path: Any) -> None:
    from profstack.cli import main

    # GIVEN a trace whose untyped kernel's op says bf16
    trace = tmp_path / "t.json"
    trace.write_bytes(_trace([(TRITON, [BF16], 40.0)], record_shapes=1))
    # WHEN analysed with and without --no-op-types
    for flag, expected, source in (([], True, "op_types"), (["--no-op-types"], False, "none")):
        out = tmp_path / f"out{len(flag)}"
        assert main(["analyze", str(trace), "--out", str(out), "--format", "json", "--include-last-step", *flag]) == 0
        summary = json.loads((out / "summary.json").read_text())
        # THEN the summary records the option, and the kernel's source follows it
        assert summary["options"]["op_types"] is expected
        assert summary["ranks"][0]["top_kernels_by_time"][0]["precision_source"] == source
