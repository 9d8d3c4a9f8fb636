"""glibc's malloc, fixed to give big blocks back: called by the processes ProfStack owns (the CLI, the Lambda
handler, ``--jobs`` workers, the bench), not on import, since it is a setting of the whole process.

glibc serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KB at start) with its own mmap and unmaps it on
free. But each time it frees such a block it raises the threshold to that block's size, up to 32 MB, so after the
parse frees its first multi-MB buffer, arrays of up to that size live in the heap. There a growing array moves
to the heap's top on each realloc and leaves a hole that later blocks only partly fill: the heap ends far above
what is live. Setting the threshold once turns the adjustment off, of the trim threshold too, which then stays
at 128 KB: each batch's freed buffers at the heap's top went back to the system and came back, a page fault per
4 KB (100 MB trace: 0.26 -> 0.30 s). So the trim threshold is set as well, to 32 MB, the heap's spare top.
Measured on df_index_resolver's ``profile_memory`` copies (bench/README.md, target 4), peak RSS untuned / mmap
2 MB / mmap 2 MB + trim 32 MB: 2 GB 147 / 134 / 137 MB, 4 GB 146 / 141 / 141 MB; time 8.7 / 8.4 / 7.9 s and
15.3 / 14.4 / 13.2 s; the bench's 100 MB trace 0.26 / 0.30 / 0.26 s. (mmap 512 KB: 15-35 % longer at 1-2 GB.)
"""

from __future__ import annotations

import ctypes
import platform
import sys

#: mallopt's parameter numbers (malloc.h) and the thresholds set: mmap above a batch's buffers (1-2 MB), below the
#: columns; the heap's top trimmed only beyond 32 MB free
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 2 << 20
TRIM_THRESHOLD_BYTES = 32 << 20

_done: bool | None = None


def tune_malloc() -> bool:
    """Fix glibc's mmap and trim thresholds at ``MMAP_THRESHOLD_BYTES`` and ``TRIM_THRESHOLD_BYTES`` (once per
    process; a fork inherits them). False, and nothing changed, where the C library is not glibc (musl, macOS) or
    refuses."""
    global _done  # noqa: PLW0603 - one setting per process
    if _done is None:
        _done = False
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):  # pragma: no cover - a glibc without mallopt
                return False
            mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
            mallopt.restype = ctypes.c_int
            _done = (
                mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
            )
    return _done
