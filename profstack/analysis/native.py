"""The optional C accelerator: the engine's hot loops, and a JSON reader in front of msgspec.

``csrc/`` (beside this file) transliterates ``GpuAccumulator._add_ops``, ``_Parser._consume_events`` and
three smaller loops, and reads a batch's JSON straight into the per-event loop (``decode_consume``, declining
to msgspec on anything it does not convert exactly): the same state, changed in the same order, with Python's
arithmetic (exact integers, int/float comparisons, the same rounding), so a summary is the same byte for byte
either way. ``make install`` builds it in place with the machine's C compiler
(``python -m profstack.analysis.native_build``), ``pip install .`` / ``pip wheel .`` through setup.py's Extension,
and the Lambda bundles carry the x86_64 build (stacks/components/python_function.py); where there is none the
Python loop runs and ``describe()`` says why. ``PROFSTACK_ACCEL=python`` forces the Python loop.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: why the Python loop runs (None when the C module loaded)
WHY_PYTHON: str | None = None


def load() -> ModuleType | None:
    """The built C module, or None (not built, or ``PROFSTACK_ACCEL=python``); WHY_PYTHON says which."""
    global WHY_PYTHON  # noqa: PLW0603 - one module-level fact, set once at import
    if os.environ.get("PROFSTACK_ACCEL", "").lower() == "python":
        WHY_PYTHON = "PROFSTACK_ACCEL=python"
        return None
    try:
        module = importlib.import_module("profstack.analysis._gpuaccel")
    except ImportError as exc:
        built = "not built (no C compiler when profstack was installed)"
        WHY_PYTHON = built if isinstance(exc, ModuleNotFoundError) else f"import failed: {exc}"[:300]
        return None
    WHY_PYTHON = None
    return module


#: The module ``GpuAccumulator.add`` calls, looked up at each call so tests can swap it (None: Python).
ACCEL: ModuleType | None = load()


def backend() -> str:
    """``"c"`` or ``"python"``: which per-op loop runs now."""
    return "python" if ACCEL is None else "c"


def reason() -> str | None:
    """Why the Python loop runs now (None: the C engine runs)."""
    if ACCEL is not None:
        return None
    return WHY_PYTHON or "the C module was swapped out (tests)"


def describe() -> str:
    """One line: `c`, or `python (<why>)`; `profstack --version` and `profstack analyze` print it."""
    why = reason()
    return backend() if why is None else f"{backend()} ({why})"


def generator(version: str) -> dict[str, str]:
    """The summary's `generator`: this profstack, and the engine that read the traces (schema 1.4)."""
    out = {"name": "profstack", "version": version, "engine": backend()}
    why = reason()
    if why is not None:
        out["engine_reason"] = why
    return out
