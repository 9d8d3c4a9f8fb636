"""glibc's malloc, fixed to give big blocks back: called by the processes ProfStack owns (the CLI, the Lambda
handler, ``--jobs`` workers, the bench), not on import, since it is a setting of the whole process.

glibc serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KB at start) with its own mmap and unmaps it on
free. But each time it frees such a block it raises the threshold to that block's size, up to 32 MB, so after the
parse frees its first multi-MB buffer, arrays of up to that size live in the heap. There a growing array moves
to the heap's top on each realloc and leaves a hole that later blocks only partly fill: the heap ends far above
what is live. Setting the threshold once turns the adjustment off. Measured on df_index_resolver's
``profile_memory`` copies (bench/README.md, target 4), peak RSS untuned / 2 MB / 4 MB / 512 KB: 1 GB 105 / 102 /
105 / 98 MB, 2 GB 143 / 133 / 135 / 132, 4 GB 150 / 140 / 144 / 139; time within 3 % of untuned at 2 and 4 MB,
but 15-35 % longer at 512 KB (a fresh mapping, and its page faults, for each batch's 1-2 MB of buffers).
"""

from __future__ import annotations

import ctypes
import platform
import sys

#: mallopt's parameter number (malloc.h) and the threshold set: above a batch's buffers (1-2 MB), below the columns
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 2 << 20

_done: bool | None = None


def tune_malloc() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD_BYTES`` (once per process; a fork inherits it). False, and
    nothing changed, where the C library is not glibc (musl, macOS) or refuses."""
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
            _done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    return _done
