"""Precision from evidence, not from words (#43 item 3).

Before: cuDNN's fused attention kernels (``..._wgmma_f16_...``, run for fp16 and bf16 alike) read as fp16 from a name
token, so every bf16 job showed 3-9 % "fp16" that never ran; DeepEP's dispatch kernels, which move FP8 tokens as
``int4`` with ``float*`` scales beside them, read as fp32 (14.8 % fp32 on DeepSeek-V3's FP8 training trace, whose
real fp32 work is 0.6 %). The names below are real: from kernels' sources (repository and path in
docs/analysis.md, "Kernel families") and from public traces.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, precision

# cuDNN's generated SDPA kernels (NVIDIA cudnn-frontend, the name PyTorch's cuDNN attention runs on H100/H200 for
# fp16 and bf16 queries alike: aten/src/ATen/native/cudnn/MHA.cpp builds the graph with the query's dtype)
CUDNN_FPROP = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
CUDNN_BPROP = "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x1x1_cga1x1x1_kernel0_0"
# DeepEP (deepseek-ai/DeepEP csrc/kernels/internode.cu): dispatch(int4* recv_x, float* recv_x_scales, ...), as
# written in DeepSeek's public V3 training trace (github.com/deepseek-ai/profile-data, train.json)
DEEPEP_DISPATCH = (
    "void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*, long*, float*, "
    "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*, int*, int*, int*, int*, "
    "int const*, int const*, int const*, int const*, int, int, int, int, int, bool const*, void*, int, int, void**, "
    "int, int, int, int, bool)"
)
DEEPEP_INTRANODE = (
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int4 const*, "
    "float const*, long const*, float const*, bool const*, int const*, int, int, int, int, int, int, int, int, "
    "void**, int, int, int)"
)
DEEPEP_COMBINE = (
    "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*, "
    "int4 const*, float const*, int4 const*, int4 const*, int const*, int const*, "
    "dpsk::ep::internode::SourceMeta const*, int const*, int const*, int const*, int, int, int, int, void*, int, int, "
    "void**, int, int, int)"
)
DEEPSEEK_EXPAND = (
    "cuda::expand_to_fused_with_scales_impl(int4 const*, int4*, float const*, float*, int const*, int const*, int, "
    "int, int, int, int)"
)
# PyTorch's own fp32 kernels: the float is a template argument (the data), which always counts
TOPK_FP32 = (
    "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, "
    "unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<float, "
    "unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int)"
)
LAYERNORM_BF16 = (
    "void layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, "
    "__nv_bfloat16, float, unsigned int, 7168u, 1u, 1u, 4u, 16u>, false, false, false, false>(layer_norm::FwdParams)"
)
# Composable Kernel, left mangled by ROCm's Kineto (AMD TraceLens' MI300X resnet trace): `t` is ck::bhalf_t (ushort)
CK_CONV_MANGLED = (
    "_ZN2ck16tensor_operation6device12_GLOBAL__N_149kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffleINS_34Gridwise"
    "GemmMultipleD_xdl_cshuffleItttftNS_5TupleIJEEEtNS0_12element_wise11PassThroughES8_S8_LNS_25InMemoryDataOperation"
    "EnumE0ELi1ELi256ELi128ELi64ELi32ELi8ELi8ELi32ELi32ELi2ELi1ENS_8SequenceIJLi4ELi64ELi1EEEE"
)
CK_WGRAD_MANGLED = (
    "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops"
    "_bwd_weightILi64EttftLNS_25InMemoryDataOperationEnumE1ENS_16TensorDescriptorINS_5TupleIJ"
)
CK_DEMANGLED_USHORT = (
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<unsigned short, unsigned short, float, "
    "unsigned short, 256, 128>, true>(ck::GridwiseGemm_xdl_cshuffle_v3::Argument)"
)
BF16, HALF, FLOAT = "c10::BFloat16", "c10::Half", "float"
TYPED_BF16 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int)"
TYPED_HALF = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>(int)"


def test_a_16_bit_token_does_not_fix_a_type() -> None:
    # GIVEN cuDNN's generated attention kernels and MMA shapes that take fp16 or bf16 (fp32 accumulation, k = 16)
    # THEN the name says "16-bit", not fp16 (before: fp16, from the token `f16`)
    for name in (CUDNN_FPROP, CUDNN_BPROP, "cutlass_80_tensorop_s16816gemm_relu_128x128_32x3_nn_align8"):
        assert precision.name_reading(name) == ("other", "16bit")
        assert precision.read(name) == ("other", "none")
    # AND tokens that do fix a type still do: cuBLASLt and CUTLASS spell bf16 `bf16`, so their `f16` is fp16
    assert precision.read("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64") == ("fp16", "name")
    assert precision.read("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8") == ("bf16", "name")
    assert precision.read("cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8") == ("fp16", "name")
    # AND Volta's HMMA takes fp16 only (before: tf32; volta_s884gemm was int8 from its "_s8")
    assert precision.read("volta_s884gemm_64x64_ldg8_f2f_nn") == ("fp16", "name")


def test_pointers_beside_an_opaque_payload_are_scales_not_the_payload() -> None:
    # GIVEN DeepEP's dispatch (FP8 tokens as int4, float* scales) and DeepSeek's fused expand-with-scales
    # THEN their float pointers say nothing (before: fp32); the trace does not say what they move
    for name in (DEEPEP_DISPATCH, DEEPEP_INTRANODE, DEEPSEEK_EXPAND):
        assert precision.read(name) == ("other", "none")
    # AND a type in the template arguments is the payload's: DeepEP's combine moves bf16
    assert precision.read(DEEPEP_COMBINE) == ("bf16", "types")
    # AND template arguments always count: PyTorch's fp32 top-k, a bf16 LayerNorm accumulating in float
    assert precision.read(TOPK_FP32) == ("fp32", "types")
    assert precision.read(LAYERNORM_BF16) == ("bf16", "types")
    # AND a float passed by value is a scalar (an epsilon, a scale), not the data
    assert precision.read("void foo(int const*, long*, float)") == ("other", "none")
    assert precision.read("void bar(float const*, float*, int, float)") == ("fp32", "types")


def test_composable_kernel_bf16_is_its_ushort() -> None:
    # GIVEN CK kernels whose bf16 is ck::bhalf_t = ushort: mangled (`t`) and demangled (`unsigned short`)
    # THEN they are bf16 from their types (before: int8, from "_s8" in the mangled substitution `ES8_`)
    assert precision.read(CK_CONV_MANGLED) == ("bf16", "types")
    assert precision.read(CK_WGRAD_MANGLED) == ("bf16", "types")
    assert precision.read(CK_DEMANGLED_USHORT) == ("bf16", "types")
    # AND outside CK an unsigned short is an index, and a mangled name's text is no naming scheme
    assert precision.read("void at::native::index_kernel<unsigned short>(unsigned short*)") == ("other", "none")
    assert precision.name_reading("_ZN2at6native4kernelIiEEvPKS_8_s8imma") == ("other", "none")


_PAYLOAD = st.sampled_from(["int4", "int4 const", "void", "void const", "unsigned char", "uint4", "char"])
_SCALE = st.sampled_from(["float", "float const", "double"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(_PAYLOAD.map(lambda t: f"{t}*"), _SCALE.map(lambda t: f"{t}*"), st.just("int")), max_size=8),
    _PAYLOAD,
    st.sampled_from(["ns::dispatch", "void deep_ep::k<8, 768, true>", "void combine<false, 8>"]),
)
def test_an_opaque_payload_never_reads_as_fp32_from_its_scales(params: list[str], payload: str, head: str) -> None:
    # GIVEN a kernel with an opaque payload pointer among float pointers and ints, no type in its template arguments
    name = f"{head}({', '.join([f'{payload}*', *params])})"
    # THEN its class is not fp32: the floats beside the payload are scales
    assert precision.read(name)[0] != "fp32"


def _trace(kernels: list[tuple[str, list[str] | None, float]], **header: Any) -> bytes:
    """One op -> one launch -> one kernel per (name, op input types or None, µs)."""
    cpu: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6}
    ]
    gpu: list[dict[str, Any]] = []
    for i, (name, types, dur) in enumerate(kernels):
        ts = 1000.0 * i + 10
        args: dict[str, Any] = {"External id": i + 1}
        if types is not None:
            args["Input type"] = types
        cpu.append({"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1, "ts": ts, "dur": 8.0,
                    "args": args})  # fmt: skip
        cpu.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1,
                    "dur": 2.0, "args": {"correlation": i + 1}})  # fmt: skip
        gpu.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 5, "dur": dur,
                    "args": {"stream": 7, "correlation": i + 1, "device": 0, "External id": i + 1}})  # fmt: skip
    return json.dumps({"schemaVersion": 1, **header, "traceEvents": cpu + gpu}).encode()


def _rank(data: bytes) -> dict[str, Any]:
    summary = analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions(include_last_step=True)).summary
    rank: dict[str, Any] = summary["ranks"][0]
    return rank


def _mix(rank: dict[str, Any]) -> dict[str, float]:
    return {p["precision"]: p["pct"] for p in rank["precision"]}


def _row(rank: dict[str, Any], name: str) -> tuple[str, str]:
    row = next(k for k in rank["top_kernels_by_time"] if k["name"] == name)
    return row["precision"], row["precision_source"]


def test_a_bf16_job_has_no_fp16_attention() -> None:
    # GIVEN a bf16 training step without record_shapes: cuDNN attention (70 µs) and typed bf16 elementwise kernels
    rank = _rank(_trace([(CUDNN_FPROP, None, 50.0), (CUDNN_BPROP, None, 20.0), (TYPED_BF16, None, 30.0)]))
    # THEN all of it is bf16 (before: 70 % fp16); the attention's class came from the rank's typed kernels
    assert _mix(rank) == {"bf16": 100.0}
    assert _row(rank, CUDNN_FPROP) == ("bf16", "context")
    (share,) = rank["precision"]
    assert share["from_context_time_us"] == 70.0
    # AND an fp16 job's attention is fp16, by the same evidence
    half = _rank(_trace([(CUDNN_FPROP, None, 50.0), (TYPED_HALF, None, 50.0)]))
    assert _mix(half) == {"fp16": 100.0}


def test_the_operators_types_decide_a_16_bit_kernel_before_the_context() -> None:
    # GIVEN cuDNN attention launched by a bf16 op (record_shapes on) in a rank whose typed kernels are fp16
    rank = _rank(_trace([(CUDNN_FPROP, [BF16, BF16, BF16], 60.0), (TYPED_HALF, [HALF], 40.0)], record_shapes=1))
    # THEN its operator decides (bf16), the context does not
    assert _row(rank, CUDNN_FPROP) == ("bf16", "op_types")
    assert _mix(rank) == {"bf16": 60.0, "fp16": 40.0}
    # AND an operator that says fp32 cannot make a 16-bit kernel fp32: the context decides
    mixed = _rank(_trace([(CUDNN_FPROP, [FLOAT], 60.0), (TYPED_BF16, [BF16], 40.0)], record_shapes=1))
    assert _row(mixed, CUDNN_FPROP) == ("bf16", "context")


def test_without_evidence_a_16_bit_kernel_stays_unknown() -> None:
    # GIVEN cuDNN attention alone, and cuDNN attention beside both fp16 and bf16 typed kernels
    alone = _rank(_trace([(CUDNN_FPROP, None, 100.0)]))
    both = _rank(_trace([(CUDNN_FPROP, None, 50.0), (TYPED_BF16, None, 25.0), (TYPED_HALF, None, 25.0)]))
    # THEN it is "other", from nothing: never a guess
    assert _row(alone, CUDNN_FPROP) == ("other", "none")
    assert _row(both, CUDNN_FPROP) == ("other", "none")
    assert _mix(both) == {"other": 50.0, "bf16": 25.0, "fp16": 25.0}


def test_an_fp8_job_is_not_fp32_from_its_dispatch_scales() -> None:
    # GIVEN DeepSeek-V3's FP8 MoE pattern: DeepEP dispatch (FP8 tokens + float* scales), bf16 combine, an fp8 GEMM
    fp8_gemm = "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(Params)"
    rank = _rank(_trace([(DEEPEP_DISPATCH, None, 30.0), (DEEPEP_COMBINE, None, 30.0), (fp8_gemm, None, 40.0)]))
    # THEN no fp32 (before: the dispatch's 30 % was fp32); the dispatch's payload is unknown from the trace
    assert _mix(rank) == {"other": 30.0, "bf16": 30.0, "fp8": 40.0}
