"""Precision of kernels whose names carry no types, read from the operators that launched them (#34 item 3):
``record_shapes``' input types, joined by External id (profstack.analysis.op_types)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, native, op_types, parse
from profstack.analysis.loose import loose_int
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


def test_a_small_untyped_share_does_not_use_the_op_types(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN untyped kernels under MIN_UNTYPED_SHARE of computation time
    calls: list[int] = []
    real = op_types.Collector.result

    def counting(self: op_types.Collector, wanted: set[str]) -> op_types.OpTypes:
        calls.append(1)
        return real(self, wanted)

    monkeypatch.setattr(op_types.Collector, "result", counting)
    small = [(TYPED, [FLOAT], 99.0), (TRITON, [BF16], 1.0)]
    rank = _rank(_trace(small, record_shapes=1))
    # THEN the rank does not read what the main pass collected, and the untyped kernel keeps its name's reading
    assert calls == []
    assert _kernel_row(rank, TRITON)["precision_source"] == "none"
    _rank(_trace([(TYPED, [FLOAT], 90.0), (TRITON, [BF16], 10.0)], record_shapes=1))
    assert calls == [1]
    # AND kernels whose names carry a data-type word (or Tensile's code) do not ask for it: the ops add nothing
    worded = [("gemm_bf16_kernel_128x128", [BF16], 60.0), ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32", [BF16], 40.0)]
    _rank(_trace(worded, record_shapes=1))
    assert calls == [1]


class _CountingSource(BytesTraceSource):
    opened = 0

    def open(self) -> Any:
        type(self).opened += 1
        return super().open()


def test_the_op_types_come_from_the_one_read_of_the_file() -> None:
    # GIVEN a trace whose untyped kernels' precision comes from their operators (#44 item 1)
    data = _trace([(TRITON, [BF16], 90.0), (TYPED, [FLOAT], 10.0)], record_shapes=1)
    _CountingSource.opened = 0
    # WHEN analysed with the op types on (the default)
    summary = analyze([_CountingSource(data, name="t.json")], AnalysisOptions(include_last_step=True)).summary
    # THEN the kernel's precision is its operator's, and the file was opened once (no second read)
    assert _kernel_row(summary["ranks"][0], TRITON)["precision_source"] == "op_types"
    assert _CountingSource.opened == 1


# ---------------------------------------------------------------------------------------------- the collector


def _collect(events: list[dict[str, Any]], *, batch: int = 3, promised: bool = False) -> op_types.Collector:
    """What the main pass collects from ``events`` (in batches of ``batch`` events), with both engines: they must
    agree (the C one where built), and the C one's result is returned."""
    from .bitexact import first_difference, flatten
    from .test_consume_native import C_MODULE, Knobs, make_parser

    out: list[op_types.Collector] = []
    for accel in (None, C_MODULE) if C_MODULE is not None else (None,):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(native, "ACCEL", accel)
            parser = make_parser(Knobs(promised=promised))
            got = parser.op_types
            assert got is not None
            for i in range(0, len(events), batch):
                parser.before_batch()
                parser.consume(parse._LIST_DECODER.decode(msgspec.json.encode(events[i : i + batch])))
            got.finish()
            out.append(got)
    assert first_difference(flatten(out[0]), flatten(out[-1])) is None
    return out[-1]


def test_collecting_stops_early_only_where_no_operator_has_types(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN many events and no operator with input types, and a small give-up bound
    monkeypatch.setattr(op_types, "GIVE_UP_EVENTS", 10)
    plain = [_kernel(TRITON, i, i, float(i), 1.0) for i in range(50)]
    # WHEN collected without the header's promise THEN it stops after the bound, having found nothing
    got = _collect(plain)
    assert got.gave_up
    assert not got.by_key
    # AND where the header promised them it collects to the end
    assert not _collect(plain, promised=True).gave_up


def test_the_collector_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN more operators and waiting kernels than the bounds allow
    monkeypatch.setattr(op_types, "MAX_OPS", 5)
    monkeypatch.setattr(op_types, "MAX_PENDING", 3)
    events = [_kernel(TRITON, i, 100 + i, float(i), 1.0) for i in range(6)]  # before their ops: waiting
    events += [_op(100 + i, float(i), [BF16]) for i in range(10)]
    got = _collect(events, promised=True)
    # THEN only what fits is kept, and the rest is counted, never guessed
    assert got.ops_dropped == 5
    assert got.result({TRITON}).by_name[TRITON]["bf16"][0] == 3  # the 3 kernels that waited, all of whose ops were kept
    assert got.kernels_without_op == 3


def test_an_operator_with_ill_typed_input_types_is_not_remembered() -> None:
    # GIVEN a batch with an op whose "Input type" is not a list of strings, beside a good op and kernel
    events = [_op(1, 0.0, [BF16]), _kernel(TRITON, 1, 1, 5.0, 2.0), _kernel(TRITON, 2, 2, 6.0, 2.0)]
    bad = {"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1.0, "dur": 1.0, "args": {"External id": 2, "Input type": 7}}
    got = _collect([*events, bad], promised=True)
    # THEN the good pair is joined, and the kernel of the ill-typed op counts as without one
    assert got.result({TRITON}).by_name == {TRITON: {"bf16": [1, 2.0]}}
    assert got.kernels_without_op == 1


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


@given(st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=25), st.floats(allow_nan=False), st.booleans()))
@settings(max_examples=300, deadline=None)
def test_an_external_id_of_any_json_type_is_read_or_left_unknown(raw: Any) -> None:
    # GIVEN an External id of any JSON type (ROCm writes numbers as strings), as the parser keeps it (JSON text)
    text = msgspec.json.encode(raw)
    # WHEN read THEN never an exception: the integer loose_int reads from the value, else unknown
    assert op_types.ext_of_text(text) == loose_int(raw)
    # AND the parser's decode of an event never fails on it (the other args are read as before)
    event = {"ph": "X", "cat": "kernel", "name": "k", "ts": 0.0, "dur": 1.0, "args": {"External id": raw, "stream": 7}}
    decoded = parse._ONE_DECODER.decode(msgspec.json.encode(event))
    assert decoded.args is not None
    assert decoded.args.stream == 7


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


def test_the_cli_flag_turns_the_op_types_off(tmp_path: Any) -> None:
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
