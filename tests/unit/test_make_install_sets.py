"""`make demo` installs only what the demo needs; `make test` installs the test tooling on top (two requirement
sets, each behind its own stamp)."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

REQUIREMENTS = REPO_ROOT / "requirements"
#: what only tests and developers use: `make demo` must not install any of it
DEV_ONLY = {"pytest", "pytest-xdist", "hypothesis", "jsonschema", "tensorboard", "playwright", "pre-commit", "torch",
            "ruff", "mypy", "ziglang", "auditwheel", "pyelftools", "boto3-stubs", "types-pyyaml"}  # fmt: skip


def _rules() -> dict[str, list[str]]:
    """target -> prerequisites, with $(STAMPS) written as .stamps."""
    rules: dict[str, list[str]] = {}
    for line in (REPO_ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([$().A-Za-z0-9_/-]+):(?!=)\s*([^#]*?)\s*(?:##.*)?$", line)
        if match and not line.startswith("\t"):
            target = match.group(1).replace("$(STAMPS)", ".stamps")
            prerequisites = [p.replace("$(STAMPS)", ".stamps") for p in match.group(2).split()]
            rules[target] = prerequisites
    return rules


def _closure(target: str, rules: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    pending = [target]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending += rules.get(name, [])
    return seen


def _normal(name: str) -> str:
    """PEP 503: case and runs of `-_.` do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def _packages(name: str) -> set[str]:
    """Distribution names a requirements file installs, following its -r includes."""
    found: set[str] = set()
    for raw in (REQUIREMENTS / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found |= _packages(line[3:].strip())
        elif line:
            found.add(_normal(re.split(r"[=<>\[ ;]", line, maxsplit=1)[0]))
    return found


def test_make_demo_never_reaches_the_test_tooling() -> None:
    # GIVEN the Makefile's rules WHEN everything `make demo` depends on is followed
    rules = _rules()
    needs = _closure("demo", rules)
    # THEN it installs the demo set, and neither the test set nor the test MLflow server
    assert ".stamps/venv-demo" in needs
    assert ".stamps/venv" not in needs
    assert ".stamps/mlflow-venv" not in needs
    # AND `make test` installs both sets
    assert {".stamps/venv-demo", ".stamps/venv", ".stamps/mlflow-venv"} <= _closure("test", rules)


def test_the_demo_set_holds_no_test_tooling_and_the_dev_set_holds_it_all() -> None:
    demo, dev = _packages("demo.txt"), _packages("dev.txt")
    assert not demo & DEV_ONLY, demo & DEV_ONLY
    assert demo <= dev
    assert dev >= DEV_ONLY
    # what the demo runs: the CDK app, the CLI, the Lambda runtime, boto3, moto's server, cfn-lint
    assert {"aws-cdk-lib", "cdk-nag", "boto3", "moto", "cfn-lint", "aws-lambda-powertools", "pydantic"} <= demo


def test_every_requirement_is_pinned_in_the_constraints() -> None:
    constraints = {
        _normal(line.split("==", 1)[0])
        for line in (REQUIREMENTS / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    for name in ("demo.txt", "dev.txt"):
        loose = {
            line.split("#", 1)[0].strip()
            for line in (REQUIREMENTS / name).read_text().splitlines()
            if line.split("#", 1)[0].strip() and not line.startswith("-r ")
        }
        unpinned = sorted(r for r in loose if "==" not in r and not r.startswith(("types-", "boto3-stubs")))
        assert not unpinned, (name, unpinned)
        missing = sorted(
            p for p in _packages(name) if p not in constraints and not p.startswith(("types-", "boto3-stubs"))
        )
        assert not missing, (name, missing)
