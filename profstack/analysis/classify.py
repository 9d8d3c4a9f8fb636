"""Name-based classification of GPU ops: HTA kernel type, precision, Tensor Core use, memcpy direction."""

from __future__ import annotations

import re
from functools import lru_cache

from profstack.analysis import precision

COMPUTATION = "COMPUTATION"
COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
OTHER = "OTHER"
#: the classes of HTA's kernel-type breakdown; OTHER (e.g. ``Stream Sync``) is busy GPU time in none of them
KERNEL_TYPES = (COMPUTATION, COMMUNICATION, MEMORY)

# HTA 0.6.1 (hta/common/types.py): communication, memory, and the names that are not computation
_COMM_RE = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_MEM_RE = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)"
    r"|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)"
)


def kernel_type(name: str) -> str:
    """HTA 0.6.1's ``get_kernel_type``: COMMUNICATION, MEMORY, COMPUTATION, else OTHER (first match wins)."""
    if _COMM_RE.match(name):
        return COMMUNICATION
    if _MEM_RE.match(name):
        return MEMORY
    if not _NOT_COMPUTE_RE.match(name):
        return COMPUTATION
    return OTHER


def type_index(name: str) -> int:
    """Index into :data:`KERNEL_TYPES`, or ``len(KERNEL_TYPES)`` for OTHER."""
    kt = kernel_type(name)
    return KERNEL_TYPES.index(kt) if kt != OTHER else len(KERNEL_TYPES)


PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "other")

_TENSOR_CORE_MARKERS = (
    "884",
    "1688",
    "16816",
    "16832",
    "hmma",
    "imma",
    "tensorop",
    "xmma",
    "wgmma",
    "gmma",
    "_mma",
    "mma_",
    "tcgen05",
    "flash_fwd",
    "flash_bwd",
    "fmha",
)


def precision_of(name: str) -> str:
    """The precision class of a computation kernel: from its argument types, names only as a fallback
    (``profstack.analysis.precision``; ``precision.read`` also says which)."""
    return precision.read(name)[0]


def uses_tensor_cores(name: str) -> bool:
    low = name.lower()
    return any(marker in low for marker in _TENSOR_CORE_MARKERS)


MEMCPY_DIRECTIONS = ("HtoD", "DtoH", "DtoD", "PtoP", "HtoH")


def memcpy_direction(name: str) -> str:
    """``Memcpy HtoD (Pageable -> Device)`` -> ``HtoD``; anything unrecognised -> ``other``."""
    parts = name.split()
    if len(parts) >= 2:
        token = parts[1]
        if token in MEMCPY_DIRECTIONS:
            return token
    for direction in MEMCPY_DIRECTIONS:
        if direction in name:
            return direction
    return "other"


# Kernels that change a tensor's precision rather than compute in it (FP8 quantise/dequantise, casts,
# dtype conversions): counted apart from math precision, or an FP8 recipe's casts read as FP8 math.
_WORD_RE = re.compile(r"[a-z0-9]+")
_CONVERSION_WORDS = ("quant", "dequant", "cast", "convert", "conversion")


# `<precision>..._to_<precision>` (fbgemm's `_float_to_hfp8_gpu`, `_FP8rowwise_to_float_cuda_kernel`): a conversion
_PREC_WORD = r"(?:h?fp8|fp16|bf16|bfloat16|half|float|fp32|int8|e4m3|e5m2|f8|f16|f32)"
_TO_RE = re.compile(rf"{_PREC_WORD}[a-z0-9]*_to_{_PREC_WORD}", re.IGNORECASE)


@lru_cache(maxsize=65536)  # asked of each kernel name by the main pass and several analyzers; ~50 µs a long name
def is_conversion(name: str) -> bool:
    """Quantise / dequantise / cast / convert kernels (``cast_transpose_fp8``, ``scaled_fp8_quant``): a word
    of the name starts with one of ``_CONVERSION_WORDS`` (so ``broadcast`` is not a cast), or the name says
    ``<precision>_to_<precision>`` (``_FP8rowwise_to_float``)."""
    return any(w.startswith(_CONVERSION_WORDS) for w in _WORD_RE.findall(name.lower())) or bool(_TO_RE.search(name))


_COMPUTATION_INDEX = KERNEL_TYPES.index(COMPUTATION)


@lru_cache(maxsize=65536)  # asked once per name and file by the main pass, and per rank
def follows(name: str) -> bool:
    """Whether the main pass follows the operators of kernels of this name (``op_types.Collector``): those whose
    names ``untyped_computation`` may return, a computation kernel, not a conversion, that ``ops_can_tell``."""
    return type_index(name) == _COMPUTATION_INDEX and not is_conversion(name) and ops_can_tell(name)


def ops_can_tell(name: str) -> bool:
    """Whether the launching ops' input types may decide this kernel's precision: its name holds no argument types,
    and says nothing or only a kernel family's default (`sgemm`, `igemm`). A data-type word or Tensile's code in
    the name is the kernel's own statement, and beats the ops' types: a fused op takes bf16 and quantises inside,
    so Blackwell's `bmm_MxE4m3_MxE2m1...` under a bf16 op is fp8 math, as its name says."""
    return precision.read(name)[1] != "types" and precision.name_reading(name)[1] in ("mark", "16bit", "none")


#: TensorFlow's consumer side of tf.data: the op a training step runs for its next batch, which waits while the
#: pipeline produces it (eager: ``EagerLocalExecute: IteratorGetNext``; in a graph: ``<node>:IteratorGetNext``; its
#: kernel: ``IteratorGetNextOp::DoCompute``). The producer side (``Iterator::Map``, ``PrefetchProduce`` ...) runs on
#: tf.data's own threads, overlapping the step, and is not a wait.
_TF_INPUT_WAIT_RE = re.compile(r"(?:^|[\s:])IteratorGetNext(?:Sync|AsOptional)?(?:Op::DoCompute)?\Z")


def is_input_wait_name(name: str) -> bool:
    """Whether a host span of this name is the training loop waiting for its next batch from TensorFlow's tf.data
    (what torch's ``enumerate(DataLoader)#...__next__`` annotation is in a Kineto trace)."""
    return _TF_INPUT_WAIT_RE.search(name) is not None
