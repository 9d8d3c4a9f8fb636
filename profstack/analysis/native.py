"""The optional C accelerator: the engine's hot loops, and a JSON reader in front of msgspec.

``_gpuaccel.c`` (beside this file) transliterates ``GpuAccumulator._add_ops``, ``_Parser._consume_events`` and
three smaller loops, and reads a batch's JSON straight into the per-event loop (``decode_consume``, declining
to msgspec on anything it does not convert exactly): the same state, changed in the same order, with Python's
arithmetic (exact integers, int/float comparisons, the same rounding), so a summary is the same byte for byte
either way. ``make install`` builds it with the machine's C compiler
(``python -m profstack.analysis.native_build``); where there is none (a pip install without a compiler, the
Lambda's arm64 bundle, which ships Python sources only) the Python loop runs. ``PROFSTACK_ACCEL=python`` forces
the Python loop.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load() -> ModuleType | None:
    """The built C module, or None (not built, or ``PROFSTACK_ACCEL=python``)."""
    if os.environ.get("PROFSTACK_ACCEL", "").lower() == "python":
        return None
    try:
        return importlib.import_module("profstack.analysis._gpuaccel")
    except ImportError:
        return None


#: The module ``GpuAccumulator.add`` calls, looked up at each call so tests can swap it (None: Python).
ACCEL: ModuleType | None = load()


def backend() -> str:
    """``"c"`` or ``"python"``: which per-op loop runs now."""
    return "python" if ACCEL is None else "c"
