"""`make sanitize`: the C engine built with AddressSanitizer and UndefinedBehaviorSanitizer, and its tests run on it.

    python -m scripts.sanitize [pytest args...]

The package is copied to a temporary folder (without the regular build), the module compiled there with
`-fsanitize=address,undefined` (and `-fno-sanitize-recover`: the first finding stops the run), and the native
tests run with that copy first on the path and the sanitizer runtimes preloaded into Python (an unsanitized
interpreter loading a sanitized module needs them first). Leak detection is off: CPython keeps objects alive until
exit by design, which LeakSanitizer would report at every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g", "-O1")
NATIVE_TESTS = (
    "tests/unit/analysis/test_reader_native.py",
    "tests/unit/analysis/test_consume_native.py",
    "tests/unit/analysis/test_gpu_native.py",
    "tests/unit/analysis/test_memory_op_log.py",
    "tests/unit/analysis/test_hostile_input.py",
    "tests/unit/analysis/test_exact_time.py",
)


def _runtime(name: str) -> str:
    gcc = shutil.which("gcc") or "gcc"
    path = subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout  # noqa: S603 - gcc asked where its own runtime is
    if not Path(path.strip()).is_file():
        raise SystemExit(f"sanitize: gcc has no {name} (Debian: apt-get install libasan8 libubsan1)")
    return str(Path(path.strip()).resolve())


def build(into: Path) -> Path:
    """A copy of the profstack package with the sanitized module built inside it."""
    sys.path.insert(0, str(REPO))
    from profstack.analysis import native_build

    pkg = into / "profstack"
    shutil.copytree(REPO / "profstack", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    out = pkg / "analysis" / f"_gpuaccel{sysconfig.get_config_var('EXT_SUFFIX')}"
    # -O2 of the regular flags is overridden by the later -O1 (better stacks); every warning is still an error
    built = native_build.build(out, extra=SANITIZE)
    if built is None:
        raise SystemExit("sanitize: no C compiler")
    return built


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="profstack-sanitize-") as tmp:
        module = build(Path(tmp))
        print(f"sanitize: built {module.name} with {' '.join(SANITIZE)}")
        env = dict(os.environ)
        env["LD_PRELOAD"] = f"{_runtime('libasan.so')}:{_runtime('libubsan.so')}"
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
        env["PYTHONPATH"] = os.pathsep.join([tmp, str(REPO)])
        # the copy must come first: run from its folder (python puts the working folder first on sys.path)
        check = "from profstack.analysis import native, _gpuaccel; print(native.backend(), _gpuaccel.__file__)"
        probe = [sys.executable, "-c", check]
        where = subprocess.run(probe, env=env, cwd=tmp, capture_output=True, text=True, check=False)  # noqa: S603
        if where.returncode != 0 or not where.stdout.startswith(f"c {tmp}"):
            print(where.stdout, where.stderr, file=sys.stderr)
            raise SystemExit("sanitize: the sanitized module did not load")
        tests = [str(REPO / t) for t in (argv or NATIVE_TESTS)]
        # --import-mode=append: the repository goes after the copy on sys.path, so its tests run on the copy
        opts = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--import-mode=append", f"--rootdir={REPO}"]
        cmd = [sys.executable, "-m", "pytest", *opts, *tests]
        return subprocess.run(cmd, env=env, cwd=tmp, check=False).returncode  # noqa: S603 - our own test run


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
