"""The C engine as a setuptools extension: `pip install .` and `pip wheel .` compile it wherever a C compiler
exists. Without one (or when compiling fails) the install still succeeds, says so once, and the engine runs its
Python loop: the same summaries, about 2.5x slower (profstack/analysis/native.py names the engine that ran).

The sources and flags are profstack/analysis/native_build.py's (one place; `make install` builds in place with
it), loaded by path so that a build needs nothing but setuptools.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_native_build", HERE / "profstack" / "analysis" / "native_build.py")
if _spec is None or _spec.loader is None:
    raise SystemExit("setup.py: profstack/analysis/native_build.py is missing")
native_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native_build)

NO_ENGINE = (
    "profstack: the C engine was not built ({why}); profstack will run the Python loop instead "
    "(the same results, about 2.5x slower). Install a C compiler and the Python headers to build it."
)


class OptionalBuildExt(build_ext):
    """build_ext that turns a missing compiler or a failed compile into one stated warning."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # setuptools raises several unrelated types for "no compiler"
            print(NO_ENGINE.format(why=f"{type(exc).__name__}: {exc}"), file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CCompilerError, DistutilsExecError, DistutilsPlatformError, OSError
            print(NO_ENGINE.format(why=f"{type(exc).__name__}: {exc}"), file=sys.stderr)


#: PROFSTACK_BUILD_NATIVE=0 makes the pure py3-none-any wheel that scripts/wheels.py adds a prebuilt module to
NATIVE = os.environ.get("PROFSTACK_BUILD_NATIVE", "1") != "0"

setup(
    ext_modules=[
        Extension(
            "profstack.analysis._gpuaccel",
            sources=[str(p.relative_to(HERE)) for p in native_build.sources()],
            include_dirs=[str(d.relative_to(HERE)) for d in native_build.include_dirs()],
            extra_compile_args=list(native_build.COMPILE_FLAGS),
            libraries=["m"],
            optional=True,
        )
    ]
    if NATIVE
    else [],
    cmdclass={"build_ext": OptionalBuildExt},
)
