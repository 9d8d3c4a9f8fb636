"""Build the wheels a user installs without a compiler: manylinux x86_64 and aarch64, one per supported CPython.

    python -m scripts.wheels [--out dist] [--python 3.11 ...] [--arch x86_64 aarch64]

How, offline and with no Docker:
- the C engine is compiled once per (CPython, architecture) by zig's clang (``ziglang`` from PyPI) against glibc 2.17
  (``-target <arch>-linux-gnu.2.17``), with the house flags (profstack/analysis/native_build.py, -Werror included)
  and the headers of that CPython as this machine has it (pyenv's builds, or ``python3.X`` on PATH). The public
  headers an extension uses are the same on x86_64 and aarch64 (LP64, little-endian); scripts/arm64_check.py
  proves the aarch64 module by running it under qemu-user on Debian's arm64 CPython.
- the pure wheel (``pip wheel`` with PROFSTACK_BUILD_NATIVE=0) is copied once per target with the module added,
  ``Root-Is-Purelib: false``, the platform tag and a new RECORD;
- ``auditwheel show`` checks each wheel's symbol floor against the manylinux policy its tag claims, and the build
  fails when a wheel needs more than its tag promises.

The pure wheel is kept too: on any other platform ``pip install`` takes it and the engine runs its Python loop,
saying so (``profstack --version``). A CPython whose headers this machine lacks is reported, not skipped silently.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profstack.analysis import native_build  # noqa: E402

#: CPython versions the project supports (pyproject's requires-python >= 3.11) that get a native wheel
PYTHONS = ("3.11", "3.12", "3.13")
ARCHS = ("x86_64", "aarch64")
GLIBC = "2.17"  # manylinux2014: every glibc Linux since CentOS 7, Amazon Linux 2 and the Lambda runtimes included
PLATFORM = {arch: f"manylinux_2_17_{arch}.manylinux2014_{arch}" for arch in ARCHS}


@dataclass(frozen=True)
class Target:
    python: str  # "3.11"
    arch: str  # "x86_64" | "aarch64"
    include: Path

    @property
    def tag(self) -> str:
        return "cp" + self.python.replace(".", "")

    @property
    def module(self) -> str:
        return f"_gpuaccel.cpython-{self.tag[2:]}-{self.arch}-linux-gnu.so"


def find_include(version: str) -> Path | None:
    """The C headers of CPython ``version`` on this machine: this interpreter's when it is that version, else
    pyenv's build, else ``python3.X`` on PATH."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        own = Path(sysconfig.get_paths()["include"])
        if (own / "Python.h").is_file():
            return own
    candidates: list[Path] = []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(Path(on_path))
    for exe in candidates:
        out = subprocess.run(  # noqa: S603 - an interpreter of this machine, asked for its include dir
            [str(exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
            capture_output=True,
            text=True,
            check=False,
        )
        include = Path(out.stdout.strip())
        if out.returncode == 0 and (include / "Python.h").is_file():
            return include
    return None


def compile_module(target: Target, out_dir: Path) -> Path:
    out = out_dir / target.arch / target.tag / target.module
    out.parent.mkdir(parents=True, exist_ok=True)
    zig = (sys.executable, "-m", "ziglang", "cc", "-target", f"{target.arch}-linux-gnu.{GLIBC}")
    # native_build's flags and sources; no debug info, stripped: what a user downloads
    native_build.build(out, extra=("-g0", "-s"), compiler=zig, python_include=target.include)
    return out


def pure_wheel(out_dir: Path) -> Path:
    """The py3-none-any wheel (no module): the base every native wheel is made from, and the fallback for others."""
    for old in out_dir.glob("profstack-*-py3-none-any.whl"):
        old.unlink()
    for stale in (ROOT / "build").glob("lib*"):  # setuptools copies into build/lib and never removes a file there
        shutil.rmtree(stale)
    env = {**os.environ, "PROFSTACK_BUILD_NATIVE": "0"}
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out_dir),
        str(ROOT),
    ]
    subprocess.run(cmd, check=True, env=env)  # noqa: S603 - pip on our own tree
    (wheel,) = out_dir.glob("profstack-*-py3-none-any.whl")
    return wheel


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def native_wheel(pure: Path, module: Path, target: Target, out_dir: Path) -> Path:
    """``pure`` with ``module`` added under profstack/analysis/, re-tagged for ``target``, with a fresh RECORD."""
    name, version = pure.name.split("-")[:2]
    tag = f"{target.tag}-{target.tag}-{PLATFORM[target.arch]}"
    out = out_dir / f"{name}-{version}-{tag}.whl"
    dist_info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(pure) as src:
        files = {info.filename: src.read(info) for info in src.infolist() if not info.is_dir()}
    files[f"profstack/analysis/{target.module}"] = module.read_bytes()
    wheel_meta = files[f"{dist_info}/WHEEL"].decode()
    wheel_meta = re.sub(r"^Root-Is-Purelib: .*$", "Root-Is-Purelib: false", wheel_meta, flags=re.M)
    wheel_meta = re.sub(r"^Tag: .*\n?", "", wheel_meta, flags=re.M).rstrip("\n") + "\n"
    wheel_meta += "".join(f"Tag: {target.tag}-{target.tag}-{p}\n" for p in PLATFORM[target.arch].split("."))
    files[f"{dist_info}/WHEEL"] = wheel_meta.encode()
    record = f"{dist_info}/RECORD"
    files.pop(record, None)
    lines = [_record_line(n, d) for n, d in sorted(files.items())] + [f"{record},,"]
    files[record] = ("\n".join(lines) + "\n").encode()
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for n in sorted(files, key=lambda n: (n.startswith(dist_info), n)):  # dist-info last, as the spec asks
            info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(info, files[n])
    tmp.replace(out)
    return out


def audit(wheel: Path, arch: str) -> str:
    """``auditwheel show``'s verdict; raises when the wheel needs a newer manylinux than its tag claims."""
    proc = subprocess.run(  # noqa: S603 - auditwheel from the pinned requirements
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=False
    )
    text = " ".join(proc.stdout.split())
    floor = re.search(r'consistent with the following platform tag: "manylinux_2_(\d+)_(\w+)"', text)
    if proc.returncode != 0 or floor is None:
        raise SystemExit(f"wheels: auditwheel could not read {wheel.name}: {proc.stdout}{proc.stderr}")
    needs = f"manylinux_2_{floor.group(1)}_{floor.group(2)}"
    if floor.group(2) != arch or int(floor.group(1)) > int(GLIBC.split(".")[1]):
        raise SystemExit(f"wheels: {wheel.name} needs {needs}, more than its manylinux_{GLIBC.replace('.', '_')} tag")
    return needs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--python", nargs="+", default=list(PYTHONS))
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), choices=ARCHS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pure = pure_wheel(args.out)
    built: list[dict[str, object]] = [{"wheel": pure.name, "bytes": pure.stat().st_size, "engine": "python"}]
    missing: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.python:
            include = find_include(version)
            if include is None:
                missing.append(version)
                continue
            for arch in args.arch:
                target = Target(version, arch, include)
                wheel = native_wheel(pure, compile_module(target, Path(tmp)), target, args.out)
                floor = audit(wheel, arch)
                built.append({"wheel": wheel.name, "bytes": wheel.stat().st_size, "engine": "native", "floor": floor})
    for row in built:
        print(json.dumps(row))
    if missing:
        print(f"wheels: no native wheel for CPython {', '.join(missing)}: no headers on this machine", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
