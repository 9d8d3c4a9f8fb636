"""Build ``_gpuaccel``, the C per-op loop of the GPU accumulator, in place.

    python -m profstack.analysis.native_build [--out PATH]

Uses the C compiler on PATH (``cc``, else ``gcc``) with this interpreter's headers and extension suffix. Without
a compiler it says so and exits 0: the Python loop gives the same results, only slower (profstack/analysis/native.py).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
#: the flags every build uses (this script, and setup.py's Extension for `pip install` / `pip wheel`).
#: -ffp-contract=off: no fused multiply-add (Python rounds a * b + c twice; FMA once)
COMPILE_FLAGS = (
    "-O2",
    "-std=c11",
    "-ffp-contract=off",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fno-strict-aliasing",
    "-fvisibility=hidden",  # the units share functions with each other, not with the process
)
FLAGS = ("-shared", "-fPIC", *COMPILE_FLAGS)


def sources() -> list[Path]:
    """The C sources of the module: one unit per concern in csrc/ (csrc/README.md says which is which)."""
    return sorted(CSRC.glob("*.c"))


def include_dirs() -> list[Path]:
    return [CSRC]


def target() -> Path:
    return HERE / f"_gpuaccel{sysconfig.get_config_var('EXT_SUFFIX')}"


def build(
    out: Path | None = None,
    *,
    extra: tuple[str, ...] = (),
    compiler: tuple[str, ...] | None = None,
    python_include: Path | None = None,
) -> Path | None:
    """Compile into ``out`` (default: beside the source). None without a compiler; raises when compiling fails.

    ``compiler`` (default: ``cc`` or ``gcc`` on PATH) and ``python_include`` (default: this interpreter's headers)
    are what a cross-build changes (scripts/wheels.py: zig's clang for another CPython and architecture)."""
    if compiler is None:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return None
        compiler = (cc,)
    out = out or target()
    tmp = out.with_name(out.name + ".tmp")
    includes = [f"-I{d}" for d in include_dirs()]
    headers = python_include or Path(sysconfig.get_paths()["include"])
    cmd = [*compiler, *FLAGS, *extra, f"-I{headers}", *includes, *map(str, sources()), "-o", str(tmp), "-lm"]
    subprocess.run(cmd, check=True)  # noqa: S603 - the compiler found on PATH (or given), our own source and flags
    tmp.replace(out)  # atomic: a process importing meanwhile sees the old module or the new one
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to write the module (default: beside the source)")
    args = parser.parse_args(argv)
    try:
        out = build(args.out)
    except subprocess.CalledProcessError as exc:
        print(f"native_build: compiling csrc/ failed (exit {exc.returncode})", file=sys.stderr)
        return 1
    if out is None:
        print(
            "native_build: no C compiler (cc or gcc) on PATH; the GPU accumulator runs its loop in Python",
            file=sys.stderr,
        )
    else:
        print(f"native_build: built {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
