"""The precision a computation kernel computes in, read from the kernel's argument types where its name carries
them, and from naming schemes only as a marked fallback.

Kineto writes a kernel's name as the toolchain demangles it: ``void ns::kernel<T1, T2, 128, (E)0>(T1 const*, ...)``.
The types in its template arguments and parameters (``c10::BFloat16``, ``__half``, ``cutlass::float_e4m3_t``,
``ck::bhalf_t``, ``__hip_bfloat16``...) say what it computes in; an enum value such as vLLM's
``(vllm::Fp8KVCacheDataType)0`` is a value (0 = "auto": no fp8), not a type, and is never read as one. Where several
data types occur, the narrowest wins (scales and accumulators are float: a ``cutlass::half_t`` GEMM accumulating in
``float`` is fp16). Integer types (``int``, ``long``, ``bool``, ``char``: indices, masks, bytes) say nothing.

Names without types (cuBLAS / cuDNN ``sm90_xmma_gemm_bf16bf16_bf16f32...``, ``ampere_fp16_s16816gemm...``,
hipBLASLt / rocBLAS Tensile ``Cijk_Ailk_Bljk_BBS_BH...``, Triton ``triton_poi_fused_...``) are read by the
library's naming scheme (Tensile's data-type code; cuBLAS / CUTLASS markers): that reading is marked ``"name"``.
A name with neither (Triton's, cuDNN helper kernels) is ``other`` with source ``"none"``: the trace does not say.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal, cast

Source = Literal["types", "name", "none"]

#: the classes, narrowest first (the order a kernel with several data types is decided in)
ORDER = ("fp8", "int8", "bf16", "fp16", "tf32", "fp32")

# The last component of a (qualified) type name -> class. CUDA / PyTorch / CUTLASS / CuTe, ROCm / HIP / CK /
# CK-tile / rocBLAS, and the standard's extended types.
#: the last component of a (qualified) type name -> its class
TYPE_CLASSES: dict[str, str] = {}
for _cls, _names in (
    (
        "fp8",
        "Float8_e4m3fn Float8_e5m2 Float8_e4m3fnuz Float8_e5m2fnuz __nv_fp8_e4m3 __nv_fp8_e5m2 __nv_fp8x2_e4m3 "
        "__nv_fp8x2_e5m2 __nv_fp8x4_e4m3 __nv_fp8x4_e5m2 float_e4m3_t float_e5m2_t f8_t bf8_t f8_fnuz_t bf8_fnuz_t "
        "f8_ocp_t bf8_ocp_t fp8_t fp8_e4m3_t fp8_e5m2_t __hip_fp8_e4m3 __hip_fp8_e5m2 __hip_fp8_e4m3_fnuz "
        "__hip_fp8_e5m2_fnuz __hip_fp8x2_e4m3_fnuz __hip_fp8x2_e5m2_fnuz hip_f8 hip_bf8",
    ),
    ("int8", "int8_t signed_char int8x4_t char4 int8x2_t"),
    (
        "bf16",
        "BFloat16 __nv_bfloat16 nv_bfloat16 __nv_bfloat162 nv_bfloat162 __hip_bfloat16 hip_bfloat16 __hip_bfloat162 "
        "bfloat16_t bfloat16 bhalf_t bhalf2_t bhalf4_t bhalf8_t bf16_t __bf16 rocblas_bfloat16",
    ),
    (
        "fp16",
        "Half __half half __half2 half2 half_t half2_t half4_t half8_t fp16_t _Float16 __fp16 rocblas_half "
        "__hip_half __hip_half2",
    ),
    ("tf32", "tfloat32_t tf32_t xfloat32_t"),
    ("fp32", "float float2 float4 double double2 fp32_t"),
):
    for _t in _names.split():
        TYPE_CLASSES[_t] = _cls

# An enum constant written as a cast, `(ns::Enum)3`, and C++ literals: values, never types.
_ENUM_VALUE_RE = re.compile(r"\(\s*[A-Za-z_][\w:]*\s*\)\s*-?\d+[uUlL]*")
_IDENT_RE = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")
_SIGNED_CHAR_RE = re.compile(r"(?<![\w])signed\s+char\b")

# Tensile (rocBLAS, hipBLASLt) solution names: Cijk_<A index>_<B index>_<data types>_..., the types' first code
# being A's and B's type (DataType.toChar in Tensile's Common/DataType): S float, D double, H half, B bfloat16,
# X xfloat32, I8 / 4xi8 int8, F8 / B8 (and F8N / B8N, OCP) the fp8 kinds, C / Z complex, I int32.
_TENSILE_RE = re.compile(r"(?:^|[^\w])Cijk_[A-Za-z]+_[A-Za-z]+_([0-9A-Za-z]+)_")
_TENSILE_CODES = (
    ("4xi8", "int8"),
    ("F8N", "fp8"),
    ("B8N", "fp8"),
    ("F8", "fp8"),
    ("B8", "fp8"),
    ("I8", "int8"),
    ("S", "fp32"),
    ("D", "fp32"),
    ("H", "fp16"),
    ("B", "bf16"),
    ("X", "tf32"),
    ("C", "other"),
    ("Z", "other"),
    ("I", "other"),
)

# Naming-scheme markers (cuBLAS / cuDNN / CUTLASS / cuBLASLt xmma and sm90 kernels, MIOpen, flash-attention
# builds), on the lower-cased name. Used only where the name holds no type. Data-type words first (narrowest class
# first wins), then kernel-family marks: a family mark names a default type its family may override in the same
# name (MIOpen's `igemm_fwd_gtcx2_nhwc_bf16_...` is an implicit GEMM in bf16, not cuBLAS's int8 `igemm`).
_DTYPE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fp8", ("e4m3", "e5m2", "fp8", "f8f8", "float8")),
    ("int8", ("int8", "i8i8", "s8s8", "u8s8")),
    ("bf16", ("bf16", "bfloat16", "__nv_bfloat16")),
    ("fp16", ("f16", "fp16", "half")),
    ("tf32", ("tf32", "xf32")),
    ("fp32", ("float", "f32", "fp32", "double", "fp64")),
)
_FAMILY_MARKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("int8", ("i8816", "imma", "_s8", "igemm")),
    ("fp16", ("h884", "h1688", "h16816", "hgemm", "hmma", "h884gemm", "s884gemm_fp16")),
    ("tf32", ("s1688", "s16816", "s884")),
    ("fp32", ("sgemm", "scudnn", "_sgemm", "dgemm")),
)
_MARKERS = _DTYPE_WORDS + _FAMILY_MARKS

# MIOpen's data-movement kernels name an element width (`batched_transpose_32x32_half`: 16-bit elements, bf16's
# too), not a data type: a family default the launching ops' types override
_MIOPEN_WIDTH_RE = re.compile(r"^batched_transpose_\w*?_(half|dword|byte)$")
_MIOPEN_WIDTHS = {"half": "fp16", "dword": "fp32", "byte": "other"}

# Itanium-mangled names (ROCm's Kineto leaves some as written: `_ZN7ck_tile6kentryI...DF16b...`): identifiers are
# length-prefixed (`6bhalf_t`), C++23's extended floating types have codes (`DF16b` std::bfloat16_t, `DF16_`
# std::float16_t / _Float16, `Dh` half). Single-letter builtins (`f` float) are not read: too easily a false match.
_MANGLED_CODES = (("DF16b", "bf16"), ("DF16_", "fp16"), ("Dh", "fp16"))


def _types(text: str) -> set[str]:
    found: set[str] = set()
    for ident in _IDENT_RE.findall(text):
        last = ident.rsplit("::", 1)[-1].strip()
        cls = TYPE_CLASSES.get(last)
        if cls is not None:
            found.add(cls)
    if _SIGNED_CHAR_RE.search(text):  # two words in a demangled name ("unsigned char" is bytes: not matched)
        found.add("int8")
    return found


def _mangled_types(name: str) -> set[str]:
    """The classes of the types an Itanium-mangled name spells: its length-prefixed identifiers that are type names,
    and the extended floating-point type codes outside identifiers."""
    found: set[str] = set()
    i, n = 2, len(name)
    while i < n:
        c = name[i]
        if c == "L":  # a literal, `Li512E` (its digits are a value, not a length): skipped whole
            end = name.find("E", i + 1)
            i = n if end < 0 else end + 1
            continue
        if c.isdigit():
            j = i
            while j < n and name[j].isdigit():
                j += 1
            length = int(name[i:j]) if j - i <= 4 else 0
            ident = name[j : j + length]
            cls = TYPE_CLASSES.get(ident)
            if cls is not None:
                found.add(cls)
            i = j + max(length, 0) if length else j
            continue
        for code, cls in _MANGLED_CODES:
            if name.startswith(code, i):
                found.add(cls)
                i += len(code) - 1
                break
        i += 1
    return found


def _signature(name: str) -> str:
    """The template arguments and parameters of a demangled name (empty without any), enum values removed."""
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=-1)
    if cut < 0:
        return ""
    return _ENUM_VALUE_RE.sub(" ", name[cut:])


def _tensile(name: str) -> str | None:
    m = _TENSILE_RE.search(name)
    if m is None:
        return None
    code = m.group(1)
    for prefix, cls in _TENSILE_CODES:
        if code.startswith(prefix):
            return cls
    return None


@lru_cache(maxsize=65536)
def read(name: str) -> tuple[str, Source]:
    """(class, source): the class from the argument types (``"types"``), else from the library's naming scheme
    (``"name"``, a fallback), else ``("other", "none")``."""
    found = _mangled_types(name) if name.startswith("_Z") else (_types(sig) if (sig := _signature(name)) else set())
    for cls in ORDER:
        if cls in found:
            return cls, "types"
    cls = named(name)
    return cls, "name" if cls != "other" else "none"


def named(name: str) -> str:
    """The class the name's naming scheme says (Tensile's data-type code, else cuBLAS / CUTLASS markers), enum
    values aside; ``other`` where it says none. The precision a conversion kernel names (``cast_to_fp8<float>``
    converts to fp8 whatever its argument types) and the fallback of :func:`read`."""
    return name_reading(name)[0]


NameBasis = Literal["tensile", "word", "mark", "none"]


@lru_cache(maxsize=65536)
def name_reading(name: str) -> tuple[str, NameBasis]:
    """(class, what in the name said it): Tensile's data-type code, a data-type word (`bf16`, `half`, `float`), a
    kernel-family mark (`sgemm`, `h884`, `igemm`: a default its family may override), or nothing (`other`). A
    family mark or nothing is what the launching ops' input types can improve on (profstack.analysis.op_types)."""
    tensile = _tensile(name)
    if tensile is not None:
        return tensile, "tensile"
    width = _MIOPEN_WIDTH_RE.search(name)
    if width is not None:  # an element width, not a data type: the same kernel moves bf16
        return _MIOPEN_WIDTHS[width.group(1)], "mark"
    low = _ENUM_VALUE_RE.sub(" ", name).lower()
    for table, basis in ((_DTYPE_WORDS, "word"), (_FAMILY_MARKS, "mark")):
        for cls, markers in table:
            if any(m in low for m in markers):
                return cls, cast(NameBasis, basis)
    return "other", "none"
