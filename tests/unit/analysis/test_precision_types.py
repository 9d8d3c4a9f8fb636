"""Precision is read from the kernel's argument types, and from naming schemes only as a marked fallback (#34 item 3).

Before: vLLM kernels whose template arguments hold ``(vllm::Fp8KVCacheDataType)0`` (an enum value: "auto", no fp8)
counted as fp8, 74.7 % of MI300X compute was "other" (hipBLASLt's Tensile names were not read), Composable Kernel's
``ck::bhalf_t`` (bf16) read as fp16 ("half"), and fbgemm's fp8 <-> float conversions counted as fp8 math.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze, classify, precision
from profstack.analysis.sources import BytesTraceSource
from tests.unit.analysis.synth import TraceBuilder

VLLM_ROCM_ATTN = (
    "void vllm::paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0, 16, 128, 256, false, 1>(__hip_bfloat16 const*, __hip_bfloat16 const*, "
    "__hip_bfloat16 const*, int, float, int const*, int const*, int, float const*, int, int, int, float*, float*, "
    "__hip_bfloat16*, __hip_bfloat16*, int, float const*, float const*)"
)
VLLM_CUDA_CACHE = (
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
    "(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, "
    "long, int, int, int, float const*, float const*)"
)
HIPBLASLT_BF16 = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_"
    "EPS0_GRVWA8_GRVWB8_GSUAMB_IU1_K1_LBSPPA2048_LBSPPB2048_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT8_8"
)
ROCBLAS_FP16 = "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE"
TENSILE_FP32 = "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1"
TENSILE_FP8 = "Cijk_Alik_Bljk_F8B8HS_BH_Bias_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1"
CK_BF16 = (
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, "
    "ck::tensor_layout::gemm::ColumnMajor, ck::tensor_layout::gemm::RowMajor, ck::bhalf_t, ck::bhalf_t, float, "
    "ck::bhalf_t, ck::tensor_operation::element_wise::PassThrough, 256, 256, 128, 64, 8, 8, 32, 32, 4, 2, "
    "(ck::BlockGemmPipelineScheduler)0, (ck::BlockGemmPipelineVersion)3, ck::bhalf_t, ck::bhalf_t>, true, "
    "(ck::InMemoryDataOperationEnum)0, 2, (ck::TailNumber)1>(ck::GridwiseGemm_xdl_cshuffle_v3::Argument)"
)
CK_TILE_FP8 = "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<ck_tile::fp8_t, float, ck_tile::bf16_t>>(void)"
TRITON = "triton_poi_fused_add_mul_native_layer_norm_0"
CUTLASS_BF16 = (
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"
)
CUBLAS_SM90 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
CUBLAS_FP16 = "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_tn"
CUTLASS_HALF_TYPES = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::half_t, cute::tuple<long, cute::C<1>, long>, float>>>"
    "(cutlass::gemm::kernel::GemmUniversal::Params)"
)
FBGEMM_DEQUANT = (
    "void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, int, "
    "int, float*, bool)"
)


def test_types_in_the_signature_decide_and_enum_values_are_not_types() -> None:
    # GIVEN vLLM's bf16 kernels with the "auto" KV-cache enum (Fp8KVCacheDataType)0 in their template arguments
    # THEN they are bf16, read from their types (before: fp8 from the enum's name)
    assert precision.read(VLLM_ROCM_ATTN) == ("bf16", "types")
    assert precision.read(VLLM_CUDA_CACHE) == ("bf16", "types")
    # AND Composable Kernel's ck::bhalf_t is bf16 (before: fp16, from "half"); CK-tile's fp8_t with float
    # accumulation is fp8; a CUTLASS half_t GEMM accumulating in float is fp16, not fp32
    assert precision.read(CK_BF16) == ("bf16", "types")
    assert precision.read(CK_TILE_FP8) == ("fp8", "types")
    assert precision.read(CUTLASS_HALF_TYPES) == ("fp16", "types")


def test_rocm_and_cuda_naming_schemes_are_read_as_a_marked_fallback() -> None:
    # GIVEN GEMM kernels whose names carry no type: hipBLASLt / rocBLAS (Tensile) and cuBLAS / CUTLASS
    # THEN Tensile's data-type code is read (before: "other" for every ROCm GEMM), and all are marked "name"
    assert precision.read(HIPBLASLT_BF16) == ("bf16", "name")
    assert precision.read(ROCBLAS_FP16) == ("fp16", "name")
    assert precision.read(TENSILE_FP32) == ("fp32", "name")
    assert precision.read(TENSILE_FP8) == ("fp8", "name")
    assert precision.read(CUTLASS_BF16) == ("bf16", "name")
    assert precision.read(CUBLAS_SM90) == ("bf16", "name")
    assert precision.read(CUBLAS_FP16) == ("fp16", "name")
    # AND a Triton kernel's name says nothing: other, from nothing (never a guess)
    assert precision.read(TRITON) == ("other", "none")


def test_a_fp8_to_float_kernel_is_a_conversion_not_fp8_math() -> None:
    # GIVEN fbgemm's dequantisation kernel (a conversion, whatever its types)
    # THEN it is a conversion (before: fp8 math)
    assert classify.is_conversion(FBGEMM_DEQUANT)
    assert not classify.is_conversion("void at::native::broadcast_kernel<float>(float*)")


_TYPE_NAMES = sorted(precision.TYPE_CLASSES)
_ENUMS = st.from_regex(r"[a-z]{1,6}::(Fp8|BF16|Half|Float8_e4m3fn|Int8)[A-Za-z]{0,12}", fullmatch=True)


@given(
    st.lists(st.sampled_from(_TYPE_NAMES), min_size=1, max_size=5),
    st.lists(st.tuples(_ENUMS, st.integers(min_value=-3, max_value=99)), max_size=3),
    st.sampled_from(["ns::kernel", "void at::native::k", "ck::kernel_gemm", "void fmha_fwd"]),
)
def test_the_narrowest_argument_type_decides_and_enum_values_never_do(
    types: list[str], enums: list[tuple[str, int]], head: str
) -> None:
    # GIVEN a demangled name with these types as template arguments and parameters, and enum values among them
    args = [*(f"cute::{t}" if i % 2 else t for i, t in enumerate(types)), *(f"({e}){v}" for e, v in enums)]
    name = f"{head}<{', '.join(args)}, 128, true>({types[0]} const*, int, long)"
    expected = next(c for c in precision.ORDER if c in {precision.TYPE_CLASSES[t] for t in types})
    # THEN the class is the narrowest type's, read from the types
    assert precision.read(name) == (expected, "types")


def _trace(kernels: list[tuple[str, float]]) -> bytes:
    tb = TraceBuilder()
    t = 0.0
    for name, dur in kernels:
        tb.gpu(name, t, t + 1.0, dur)
        t += dur + 2.0
    return tb.to_bytes()


def test_the_summary_says_where_each_precision_was_read() -> None:
    # GIVEN an MI300X-like serving trace: hipBLASLt bf16 GEMMs (names only), vLLM attention (types), Triton
    data = _trace([(HIPBLASLT_BF16, 600.0), (VLLM_ROCM_ATTN, 300.0), (TRITON, 100.0)])
    summary: dict[str, Any] = dict(analyze([BytesTraceSource(data, name="r0.json")], AnalysisOptions()).summary)
    rank = summary["ranks"][0]
    shares = {p["precision"]: p for p in rank["precision"]}
    # THEN bf16 is 90 % of compute (before: 30 % fp8 and 70 % other), 600 µs of it read from names only
    assert shares["bf16"]["pct"] == 90.0
    assert shares["bf16"]["from_name_time_us"] == 600.0
    assert "fp8" not in shares
    assert shares["other"]["time_us"] == 100.0
    # AND each top kernel says where its precision came from
    src = {k["name"]: (k["precision"], k["precision_source"]) for k in rank["top_kernels_by_time"]}
    assert src[HIPBLASLT_BF16] == ("bf16", "name")
    assert src[VLLM_ROCM_ATTN] == ("bf16", "types")
    assert src[TRITON] == ("other", "none")
    json.dumps(summary)  # plain JSON


def test_the_report_marks_precision_read_from_names() -> None:
    from profstack.report import render_html

    # GIVEN the same trace's summary
    data = _trace([(HIPBLASLT_BF16, 600.0), (VLLM_ROCM_ATTN, 300.0), (TRITON, 100.0)])
    page = render_html(analyze([BytesTraceSource(data, name="r0.json")], AnalysisOptions()).summary)
    # THEN the kernel table marks the name-only reading, and the precision card says how much time it covers
    assert "bf16*" in page
    assert "Precision * from the kernel name only (its naming scheme)" in page
    assert "60.0% of the time only from kernel names" in page


# real kernel names from AMD's TraceLens test traces (samples/traces/tracelens/, MI210 / MI300 / vLLM on ROCm)
MIOPEN_IGEMM_BF16 = "igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt32x256x32_wt16x64x4_ws1x1_wr1x2_ta1x4x1x1_1x8x1x32_gkgs"
CK_TILE_MANGLED = (
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16b"
    "DF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShape"
)
AT_MANGLED_HALF = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIN3c104HalfEEEEvT1_"


def test_a_dtype_word_in_the_name_beats_a_family_mark() -> None:
    # GIVEN MIOpen's implicit-GEMM convolution in bf16 ("igemm" is also cuBLAS's int8 GEMM family)
    # THEN the data-type word decides (before: int8, 33 % of the MI210 trace's compute); cuBLAS's igemm stays int8
    assert precision.read(MIOPEN_IGEMM_BF16) == ("bf16", "name")
    assert precision.read("cublasLt_igemm_kernel_nt") == ("int8", "name")
    assert precision.read("volta_h884gemm_64x64_ldg8_nn") == ("fp16", "name")
    assert precision.read("cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4") == ("tf32", "name")
    # AND MIOpen's transposes name an element width ("half": 16-bit, bf16's too): a family default, not a data
    # type, so the launching ops' types may decide it (the MI300X resnet trace's 19 % "fp16" was bf16)
    assert precision.name_reading("batched_transpose_32x32_half") == ("fp16", "mark")
    assert precision.name_reading("batched_transpose_16x64_dword") == ("fp32", "mark")
    assert precision.name_reading("gemm_bf16_kernel") == ("bf16", "word")


def test_mangled_names_are_read_by_their_types() -> None:
    # GIVEN names ROCm's Kineto left mangled: C++23's std::bfloat16_t (DF16b), and c10::Half spelt 3c10 4Half
    # THEN their types decide (before: "f16" in DF16b read as fp16, from the name)
    assert precision.read(CK_TILE_MANGLED) == ("bf16", "types")
    assert precision.read(AT_MANGLED_HALF) == ("fp16", "types")
    # AND a literal's digits (Li512E) are no identifier length, a lone `f` (float) says nothing
    assert precision.read("_Z6kernelIfEvPT_") == ("other", "none")


@given(st.text(alphabet="_ZNIEL0123456789DFbhfabcdeHalfBflot", max_size=80))
def test_the_mangled_name_reader_never_fails(tail: str) -> None:
    # GIVEN any string that starts like a mangled name WHEN read THEN a class and a source, never an exception
    cls, source = precision.read("_Z" + tail)
    assert cls in (*precision.ORDER, "other")
    assert source in ("types", "name", "none")
