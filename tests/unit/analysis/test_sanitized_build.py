"""`make sanitize` in the suite, bounded: the C engine built with ASan and UBSan runs the hostile-input tests
(crafted collisions, deep nesting, the subnormal width, and the fuzz run of mutated traces) without a finding."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def _has(name: str) -> bool:
    gcc = shutil.which("gcc")
    if gcc is None:
        return False
    found = subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True, text=True, check=False)
    return Path(found.stdout.strip()).is_file()


@pytest.mark.skipif(not (_has("libasan.so") and _has("libubsan.so")), reason="no gcc sanitizer runtimes here")
def test_the_hostile_input_tests_pass_on_a_sanitized_build() -> None:
    # WHEN the sanitized engine runs the hostile-input tests THEN no sanitizer finding stops it and every test passes
    run = subprocess.run(
        [sys.executable, "-m", "scripts.sanitize", "tests/unit/analysis/test_hostile_input.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert "passed" in run.stdout
    assert "ERROR: AddressSanitizer" not in run.stderr
    assert "runtime error:" not in run.stderr
