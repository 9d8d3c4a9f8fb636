"""Which code may import which: stacks/ imports no Lambda runtime code (names both need live in
profstack/), and importing a handler creates no AWS client."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PENDING: set[str] = set()  # modules allowed to break the rule for now: none


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_stacks_import_no_lambda_runtime_code() -> None:
    # GIVEN every module of the CDK app WHEN its imports are read THEN none is under lambdas/
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted(m for m in _imported_modules(path) if m.split(".")[0] == "lambdas")
        for path in sorted((REPO_ROOT / "stacks").rglob("*.py"))
    }
    offenders = {path: mods for path, mods in offenders.items() if mods and path not in PENDING}
    assert offenders == {}
    # AND app.py neither
    assert not any(m.split(".")[0] == "lambdas" for m in _imported_modules(REPO_ROOT / "app.py"))


@pytest.mark.parametrize(
    ("module", "environ"),
    [
        ("lambdas.tensorboard_app.on_event", {"DOMAIN_ID": "d-abcdefghijkl"}),
        ("lambdas.tensorboard_app.is_complete", {"DOMAIN_ID": "d-abcdefghijkl"}),
        (
            "lambdas.idle_reaper.handler",
            {"DOMAIN_ID": "d-abcdefghijkl", "IDLE_TTL_MINUTES": "60", "USER_PROFILES": '["a"]'},
        ),
    ],
)
def test_importing_a_handler_validates_its_env_and_creates_no_client(
    monkeypatch: pytest.MonkeyPatch, module: str, environ: dict[str, str]
) -> None:
    from lambdas.common import clients

    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.sagemaker.cache_clear()
    sys.modules.pop(module, None)
    # WHEN the module loads (cold start)
    loaded = importlib.import_module(module)
    # THEN it has a handler and no SageMaker client was made yet
    assert callable(loaded.handler)
    assert clients.sagemaker.cache_info().currsize == 0
    sys.modules.pop(module, None)
