"""Run the aarch64 wheel on an arm64 CPython (Debian's, under qemu-user) and compare its summaries with x86_64's.

    python -m scripts.arm64_check [--dist dist] [--root build/arm64-root] [--out build/arm64-check]

A cross-compiled module is only proven by running it. This script:
1. builds the cp311 wheels for x86_64 and aarch64 (scripts/wheels.py), unless --dist already holds them;
2. makes an arm64 Debian bookworm root with its CPython 3.11 (``debootstrap --foreign``, whose packages are
   unpacked, not configured: nothing runs inside it but the interpreter), once, under --root;
3. installs each wheel with its dependencies (the pins of requirements/constraints.txt, binary wheels for that
   platform) into a folder of its own, with this machine's pip;
4. analyses every sample trace folder of samples/traces/ with each: x86_64 natively, aarch64 under
   ``qemu-aarch64-static`` (Debian's qemu-user-static);
5. fails unless both name the C engine and their summaries are equal (the engine-neutral comparison the tests use).

Needs root, Debian's debootstrap and qemu-user-static (``apt-get install debootstrap qemu-user-static``) and the
package registries; not part of ``make test``. ``make arm64-check`` runs it. Timings under emulation say nothing
about arm64 speed and are not reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = "3.11"  # Debian bookworm's CPython, and the Lambda runtime's
SAMPLES = ROOT / "samples" / "traces"
MIRROR = "http://deb.debian.org/debian"


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kw)  # noqa: S603 - fixed tools, our own arguments


def wheels(dist: Path) -> dict[str, Path]:
    tag = "cp" + PY.replace(".", "")

    def found() -> dict[str, list[Path]]:
        pattern = f"profstack-*-{tag}-{tag}-manylinux_2_17_{{}}.*.whl"
        return {arch: sorted(dist.glob(pattern.format(arch))) for arch in ("x86_64", "aarch64")}

    if not all(found().values()):
        run([sys.executable, "-m", "scripts.wheels", "--out", str(dist), "--python", PY], cwd=ROOT)
    return {arch: paths[-1] for arch, paths in found().items()}


def arm64_root(root: Path) -> Path:
    python = root / "usr" / "bin" / f"python{PY}"
    if python.is_file():
        return python
    for tool in ("debootstrap", "qemu-aarch64-static", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise SystemExit(f"arm64_check: {tool} is missing: apt-get install debootstrap qemu-user-static")
    root.mkdir(parents=True, exist_ok=True)
    run(
        [
            "debootstrap",
            "--foreign",
            "--arch=arm64",
            "--variant=minbase",
            f"--include=python{PY},libpython{PY}-stdlib",
            "bookworm",
            str(root),
            MIRROR,
        ],
        stdout=subprocess.DEVNULL,
    )
    for deb in sorted((root / "var" / "cache" / "apt" / "archives").glob("*.deb")):
        run(["dpkg-deb", "-x", str(deb), str(root)])
    if not python.is_file():
        raise SystemExit(f"arm64_check: no {python} after unpacking bookworm's arm64 packages")
    return python


def install(wheel: Path, target: Path, arch: str) -> None:
    """``wheel`` and its dependencies' binary wheels for ``arch`` (glibc up to bookworm's 2.36) into ``target``."""
    if target.exists():
        shutil.rmtree(target)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            *(x for glibc in ("2_17", "2_28", "2_34") for x in ("--platform", f"manylinux_{glibc}_{arch}")),
            "--python-version",
            PY,
            "--implementation",
            "cp",
            "--target",
            str(target),
            "-c",
            str(ROOT / "requirements" / "constraints.txt"),
            str(wheel),
        ]
    )


def trace_dirs() -> list[Path]:
    """Every folder of samples/traces/ that holds a trace (a file ending .json or .json.gz)."""
    dirs = {p.parent for p in SAMPLES.rglob("*.json*") if p.name.endswith((".json", ".json.gz"))}
    return sorted(d for d in dirs if "reference_values" not in d.parts)


def analyse(
    interpreter: list[str], site: Path, trace: Path, out: Path, env: dict[str, str]
) -> tuple[dict[str, Any], float]:
    if out.exists():
        shutil.rmtree(out)
    # from a folder of its own: run from the checkout, ``-c`` would import the checkout's profstack, not the wheel's
    code = (
        "import sys, profstack; from profstack.cli import main\n"
        f"assert profstack.__file__.startswith({str(site)!r}), profstack.__file__\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    start = time.perf_counter()
    proc = subprocess.run(  # noqa: S603 - the interpreter under test, our own CLI
        [*interpreter, "-c", code, "analyze", str(trace), "--out", str(out), "--format", "json"],
        env={**env, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"},
        capture_output=True,
        text=True,
        check=False,
        cwd=out.parent,
    )
    elapsed = time.perf_counter() - start
    summary = out / "summary.json"
    if not summary.is_file():
        raise SystemExit(
            f"arm64_check: {' '.join(interpreter[:1])} wrote no summary for {trace}: {proc.stderr[-2000:]}"
        )
    return json.loads(summary.read_text()), elapsed


def neutral(summary: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.unit.analysis.neutral import engine_neutral

    return engine_neutral(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--root", type=Path, default=ROOT / "build" / "arm64-root")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "arm64-check")
    args = parser.parse_args(argv)
    built = wheels(args.dist)
    arm_python = arm64_root(args.root)
    sites = {arch: args.out / f"site-{arch}" for arch in built}
    install(built["x86_64"], sites["x86_64"], "x86_64")
    install(built["aarch64"], sites["aarch64"], "aarch64")
    host = shutil.which(f"python{PY}")
    if host is None:
        raise SystemExit(f"arm64_check: no python{PY} on PATH for the x86_64 side")
    interpreters = {
        "x86_64": [host],
        "aarch64": [
            shutil.which("qemu-aarch64-static") or "qemu-aarch64-static",
            "-L",
            str(args.root),
            str(arm_python),
        ],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    rows, failures = [], 0
    for trace in trace_dirs():
        results = {
            arch: analyse(cmd, sites[arch], trace, args.out / arch / trace.name, env)
            for arch, cmd in interpreters.items()
        }
        engines = {arch: r[0].get("generator", {}).get("engine") for arch, r in results.items()}
        same = neutral(results["x86_64"][0]) == neutral(results["aarch64"][0])
        ok = same and set(engines.values()) == {"c"}
        failures += not ok
        rows.append(
            {
                "trace": str(trace.relative_to(ROOT)),
                "engines": engines,
                "equal_summaries": same,
                "seconds": {arch: round(r[1], 2) for arch, r in results.items()},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    print(f"arm64_check: {len(rows) - failures} of {len(rows)} sample folders: C engine on both, equal summaries")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
