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

Evidence, not words (#43 item 3). Some names say "16-bit float" without saying which: cuDNN's generated attention
kernels (``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_...``) run for fp16 and bf16 alike, and an MMA
shape with fp32 accumulation and k = 16 (``s16816``, ``s161616``) takes either. Such a name reads as ``other``
with the basis ``"16bit"``: the launching operators' input types, else the rank's own typed 16-bit kernels, decide
(``profstack.analysis.analyzers.kernels``). A kernel's parameters are its data only where they can be: a float
passed by value is a scalar (an epsilon, a scale), and where a parameter is an opaque payload (``int4*``, ``void*``,
``unsigned char*``: DeepEP's dispatch moves FP8 tokens as ``int4`` with ``float*`` scales beside them), float
pointers beside it are scales or weights, not the payload: they say nothing. Template arguments always count.
Composable Kernel spells bf16 ``ck::bhalf_t``, a typedef of ``ushort`` (``include/ck/utility/data_type.hpp``), so an
``unsigned short`` in a CK name (``t`` in its mangled form) is bf16.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

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

#: parameter base types that carry bytes, not a data type: a payload moved as raw vectors (DeepEP's ``int4*`` tokens),
#: a type-erased buffer (``void*``), bytes (``unsigned char*``, ``uint8_t*``, fp8 storage ``__nv_fp8_storage_t``)
OPAQUE_PAYLOAD = frozenset({
    "void", "char", "int4", "uint4", "int2", "uint2", "longlong2", "longlong4", "ulonglong2", "uint8_t", "byte",
    "__nv_fp8_storage_t", "__nv_fp8x2_storage_t", "__nv_fp8x4_storage_t",
})  # fmt: skip
_FLOAT_SCALARS = frozenset({"float", "double"})

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
    ("int8", ("i8816", "imma", "igemm")),
    ("fp16", ("h884", "h1688", "h16816", "hgemm", "hmma", "h884gemm", "s884gemm_fp16")),
    ("fp16", ("s884",)),  # Volta's HMMA (m8n8k4) takes fp16 only; fp32 accumulation
    ("tf32", ("s1688",)),  # m16n8k8 with fp32 accumulation: TF32 on Ampere (cuBLAS's cutlass_80_tensorop_s1688gemm)
    ("fp32", ("sgemm", "scudnn", "_sgemm", "dgemm")),
)
#: MMA shapes with fp32 accumulation and k = 16 (``s16816``, WMMA's ``s161616``): fp16 or bf16 inputs alike, so a
#: name with one of them and no data-type word says "16-bit float", not which
_SIXTEEN_BIT_MARKS = ("s16816", "s161616")
#: cuDNN's generated kernels (runtime fusion, SDPA) say ``f16`` for any 16-bit float: the same
#: ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_...`` runs an fp16 and a bf16 attention
_CUDNN_GENERATED_F16 = re.compile(r"cudnn_generated.*(?<![bp])f16")
_MARKERS = _DTYPE_WORDS + _FAMILY_MARKS

# MIOpen's data-movement kernels name an element width (`batched_transpose_32x32_half`: 16-bit elements, bf16's
# too), not a data type: a family default the launching ops' types override
_MIOPEN_WIDTH_RE = re.compile(r"^batched_transpose_\w*?_(half|dword|byte)$")
_MIOPEN_WIDTHS = {"half": "fp16", "dword": "fp32", "byte": "other"}

# Itanium-mangled names (ROCm's Kineto leaves some as written: `_ZN7ck_tile6kentryI...DF16b...`): identifiers are
# length-prefixed (`6bhalf_t`), C++23's extended floating types have codes (`DF16b` std::bfloat16_t, `DF16_`
# std::float16_t / _Float16, `Dh` half). Single-letter builtins (`f` float) are read only in Composable Kernel names
# (`_mangled_types`): elsewhere too easily a false match.
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
    and the extended floating-point type codes outside identifiers. In a Composable Kernel name (``_ZN2ck``,
    ``_ZN7ck_tile``), whose data types are template arguments, the single-letter builtin codes are read too: ``t``
    (unsigned short: ``ck::bhalf_t``, bf16) and ``f`` / ``d`` (float, double), once substitutions (``S8_``,
    ``St``), template parameters (``T_``) and literals are skipped."""
    found: set[str] = set()
    ck = name.startswith(("_ZN2ck", "_ZN7ck_tile"))
    i, n = 2, len(name)
    while i < n:
        i = _mangled_step(name, i, ck, found)
    return found


def _mangled_step(name: str, i: int, ck: bool, found: set[str]) -> int:
    """Read the mangled item at ``i`` into ``found``; the index after it."""
    n, c = len(name), name[i]
    if c == "L":  # a literal, `Li512E` (its digits are a value, not a length): skipped whole
        end = name.find("E", i + 1)
        return n if end < 0 else end + 1
    if c.isdigit():  # a length-prefixed identifier
        j = i
        while j < n and name[j].isdigit():
            j += 1
        length = int(name[i:j]) if j - i <= 4 else 0
        cls = TYPE_CLASSES.get(name[j : j + length])
        if cls is not None:
            found.add(cls)
        return j + length
    if c in "ST":  # a substitution (`S8_`, `S_`, `St`) or a template parameter (`T_`, `T0_`): no type here
        j = i + 1
        while j < n and (name[j].isdigit() or name[j].isupper()):
            j += 1
        return j + 1 if j < n and (name[j] == "_" or name[j].islower()) else j
    for code, code_cls in _MANGLED_CODES:
        if name.startswith(code, i):
            found.add(code_cls)
            return i + len(code)
    if c == "D":  # another D code (`Dn`, `Dp`, `Dv`...): not a float type
        return i + 2
    builtin = _CK_BUILTINS.get(c) if ck else None
    if builtin is not None:
        found.add(builtin)
    return i + 1


#: single-letter builtin type codes read in Composable Kernel names (ck::bhalf_t is a typedef of ushort)
_CK_BUILTINS = {"t": "bf16", "f": "fp32", "d": "fp32"}


def _signature(name: str) -> str:
    """The template arguments and parameters of a demangled name (empty without any), enum values removed."""
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=-1)
    if cut < 0:
        return ""
    return _ENUM_VALUE_RE.sub(" ", name[cut:])


_OPEN, _CLOSE = "<({[", ">)}]"


def _parameters(name: str) -> tuple[str, list[str]]:
    """(the name up to its parameter list, the parameters) of a demangled function name ending ``(...)``: the last
    top-level parenthesised group, split at its top-level commas. A name without one: (name, [])."""
    end = name.rstrip()
    if end.endswith(" const"):
        end = end[:-6].rstrip()
    if not end.endswith(")"):
        return name, []
    depth = 0
    for i in range(len(end) - 1, -1, -1):
        c = end[i]
        if c in _CLOSE:
            depth += 1
        elif c in _OPEN:
            depth -= 1
            if depth == 0:
                if c != "(":
                    return name, []
                return end[:i], _split_top(end[i + 1 : -1])
    return name, []


def _split_top(text: str) -> list[str]:
    out: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


_QUALIFIERS_RE = re.compile(r"\b(const|volatile|__restrict__|__restrict|struct|class|enum)\b")


def _base(param: str) -> tuple[str, bool]:
    """(the last component of a parameter's type, whether it is passed by pointer or reference); ``unsigned char``
    and ``signed char`` keep both words' meaning (bytes / int8)."""
    text = _QUALIFIERS_RE.sub(" ", param)
    indirect = "*" in text or "&" in text
    text = text.replace("*", " ").replace("&", " ").strip()
    if "<" in text:  # a class template (TensorInfo<float, unsigned int>): data, read whole
        return text, True
    words = text.split()
    if words[-2:-1] == ["unsigned"] and words[-1] == "char":
        return "char", indirect
    if words[-2:-1] == ["signed"] and words[-1] == "char":
        return "signed char", indirect
    last = words[-1] if words else ""
    return last.rsplit("::", 1)[-1], indirect


def _ck_ushort(text: str) -> set[str]:
    """bf16 where a Composable Kernel name spells ck::bhalf_t as the ``unsigned short`` it is a typedef of."""
    return {"bf16"} if re.search(r"\b(unsigned short|ushort)\b", text) else set()


def _typed(name: str) -> set[str]:
    """The classes a demangled name's types say: every type in its template arguments; of its parameters, those
    that can be data (pointers, references, class templates; not a float scalar), and no float pointer beside an
    opaque payload (``int4*``, ``void*``, bytes: the float is a scale or a weight, not what is moved)."""
    head, params = _parameters(name)
    cut = head.find("<")
    found = _types(_ENUM_VALUE_RE.sub(" ", head[cut:])) if cut >= 0 else set()
    ck = "ck::" in name or "ck_tile::" in name
    if ck and cut >= 0:
        found |= _ck_ushort(head[cut:])
    if not params:  # no parameter list at the end (a template only, or a suffix after it): the types anywhere
        return found if cut >= 0 else _types(_signature(name))
    from_params: set[str] = set()
    opaque = False
    for param in params:
        base, indirect = _base(param)
        if base in OPAQUE_PAYLOAD and indirect:
            opaque = True
            continue
        if base in _FLOAT_SCALARS and not indirect:
            continue  # a scalar argument (alpha, epsilon, a scale), not the data's type
        from_params |= _types(_ENUM_VALUE_RE.sub(" ", param))
        if ck:
            from_params |= _ck_ushort(param)
    if opaque:
        from_params.discard("fp32")
    return found | from_params


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
    found = _mangled_types(name) if name.startswith("_Z") else (_typed(name) if _signature(name) else set())
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


NameBasis = Literal["tensile", "word", "16bit", "mark", "none"]


@lru_cache(maxsize=65536)
def name_reading(name: str) -> tuple[str, NameBasis]:
    """(class, what in the name said it): Tensile's data-type code, a data-type word (`bf16`, `half`, `float`), a
    word or mark that says only "16-bit float" (``("other", "16bit")``: cuDNN's generated ``..._f16_...``, MMA shapes
    ``s16816``), a kernel-family mark (`sgemm`, `h884`, `igemm`: a default its family may override), or nothing
    (`other`). All but a data-type word and Tensile's code are what the launching ops' input types can improve on
    (profstack.analysis.op_types). A mangled name (``_Z...``) is read by its types only: its text is no scheme's."""
    tensile = _tensile(name)
    if tensile is not None:
        return tensile, "tensile"
    width = _MIOPEN_WIDTH_RE.search(name)
    if width is not None:  # an element width, not a data type: the same kernel moves bf16
        return _MIOPEN_WIDTHS[width.group(1)], "mark"
    if name.startswith("_Z"):
        return "other", "none"
    # the name itself, not its parameter types (already read as types: a `float*` scale is no "float" word)
    low = _ENUM_VALUE_RE.sub(" ", _parameters(name)[0]).lower()
    for cls, markers in _DTYPE_WORDS:
        if any(m in low for m in markers):
            if cls == "fp16" and _CUDNN_GENERATED_F16.search(low) and "fp16" not in low and "half" not in low:
                return "other", "16bit"
            return cls, "word"
    if any(m in low for m in _SIXTEEN_BIT_MARKS):
        return "other", "16bit"
    for cls, markers in _FAMILY_MARKS:
        if any(m in low for m in markers):
            return cls, "mark"
    return "other", "none"


def is_16bit(name: str) -> bool:
    """Whether the name says "16-bit float" without saying which (``name_reading``'s ``"16bit"``)."""
    return name_reading(name)[1] == "16bit"
