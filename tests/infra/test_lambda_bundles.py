"""Each Lambda function's bundle holds exactly what its handler imports, and imports under the runtime's Python.

The bundles are built for this machine's platform from the same pins as the Lambda's (x86_64) bundles,
then each handler module is imported in a fresh interpreter that sees only the bundle and the standard
library (`python -I -S`): a module the bundle lacks fails here, not at a cold start in AWS.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stacks.components import python_function as pf
from stacks.components.bundle_plan import BundleError, plan_bundle
from tests.infra.conftest import SynthesizedApp

pytestmark = pytest.mark.slow


# Values of the shape each environment model expects, for variables that are deploy-time tokens.
_TOKEN_VALUES = {
    "DOMAIN_ID": "d-000000000000",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:placeholder",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:placeholder",
    "READER_ROLE_ARN": "arn:aws:iam::123456789012:role/placeholder",
    "TRACE_KEY_ARN": "arn:aws:kms:us-east-1:123456789012:key/placeholder",
}


def _functions(synthesized: SynthesizedApp) -> dict[str, dict[str, Any]]:
    """Handler module -> environment (tokens replaced by placeholders) of every function in the app."""
    found: dict[str, dict[str, Any]] = {}
    for template in synthesized.templates.values():
        for resource in template.get("Resources", {}).values():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            props = resource["Properties"]
            if not str(props.get("Handler", "")).startswith("lambdas."):
                continue  # CDK's own provider framework functions
            env = props.get("Environment", {}).get("Variables", {})
            module = props["Handler"].rsplit(".", 1)[0]
            found[module] = {
                k: v if isinstance(v, str) else _TOKEN_VALUES.get(k, "placeholder") for k, v in env.items()
            }
    return found


def test_the_runtime_is_the_python_the_tests_run_on() -> None:
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == pf.RUNTIME_PYTHON_VERSION
    assert pf.RUNTIME.name == f"python{pf.RUNTIME_PYTHON_VERSION}"


def test_every_function_in_the_app_is_covered(synthesized: SynthesizedApp) -> None:
    modules = set(_functions(synthesized))
    assert {"lambdas.trace_processor.handler", "lambdas.tensorboard_app.on_event", "lambdas.idle_reaper.handler"} <= (
        modules
    )


#: functions that reuse another function's code by design (issue 36: the live analyser verifies owners, scopes its
#: reads and analyses exactly as the trace processor does; its dispatcher carries none of it)
REUSES = {"lambdas.live_analysis.handler": ("trace_processor",)}


def test_each_bundle_imports_in_isolation_and_carries_only_what_it_needs(
    synthesized: SynthesizedApp, tmp_path: Path
) -> None:
    # GIVEN this machine's wheels for the runtime's pins (fetched once, as `make install` does)
    pf.fetch_wheels(pf.host_platform())
    sizes: dict[str, int] = {}
    engines: dict[str, str] = {}
    for module, env in sorted(_functions(synthesized).items()):
        plan = pf.with_engine(plan_bundle(module))
        out = tmp_path / module
        # one install per requirement set, shared (and compiled once) by the functions that use it
        site = pf.installed_requirements(plan.requirements, platform=pf.host_platform())
        # WHEN the function's bundle (its code files, then its requirements: both folders together are
        # exactly what write_bundle puts in one asset) is on sys.path with nothing else but the stdlib
        pf.write_bundle(replace(plan, requirements=()), out, platform=pf.host_platform())
        path = [str(out), str(site)]
        code = f"import sys; sys.path[:0] = {path!r}; import {module}; print(sys.modules[{module!r}].handler)"
        code += "; n = sys.modules.get('profstack.analysis.native'); print('engine', n.backend() if n else '-')"
        run = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env={"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", **env},
        )
        # THEN it imports and exposes `handler`
        assert run.returncode == 0, f"{module}: {run.stderr[-1500:]}"
        engines[module] = run.stdout.split("engine ")[-1].strip()
        # AND no other function's code or the CLI came along
        files = {p.relative_to(out).as_posix() for p in out.rglob("*.py") if p.parts[len(out.parts)] == "lambdas"}
        own = module.split(".")[1]
        allowed = {own, "common", "__init__.py", *REUSES.get(module, ())}
        assert all(f.split("/")[1] in allowed for f in files), (module, files)
        assert not (out / "profstack" / "cli").exists()
        # the codemod and the account audit stay out (the processor tags legacy rule output: rule_output.py)
        assert not (out / "profstack" / "migrate" / "smprof.py").exists()
        assert not (out / "profstack" / "migrate" / "legacy_profiler.py").exists()
        sizes[module] = sum(
            p.stat().st_size
            for folder in (out, site)
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
    # AND the functions that analyse traces run the C engine from their bundle (before: they shipped Python sources
    # only, and production ran the Python loop), where this checkout built it
    for module in ("lambdas.trace_processor.handler", "lambdas.trace_processor.analyze_file"):
        expected = "c" if (pf.REPO_ROOT / pf.ENGINE_MODULE).is_file() else "python"
        assert engines[module] == expected, (module, engines[module])
        assert ((tmp_path / module / pf.ENGINE_MODULE).is_file()) is (expected == "c")
    # AND the TensorBoard app functions do not carry the analysis engine or its decoder
    for module in sizes:
        if module.startswith("lambdas.tensorboard_app"):
            assert not (tmp_path / module / "profstack" / "analysis").exists()
            assert "msgspec==0.23.0" not in plan_bundle(module).requirements
    print(json.dumps(sizes, indent=1))


def test_an_unpinned_third_party_import_is_an_error_at_synth(tmp_path: Path) -> None:
    # GIVEN a handler that imports a package runtime.txt does not pin
    (tmp_path / "lambdas" / "fn").mkdir(parents=True)
    (tmp_path / "lambdas" / "__init__.py").write_text("")
    (tmp_path / "lambdas" / "fn" / "__init__.py").write_text("")
    (tmp_path / "lambdas" / "fn" / "handler.py").write_text("import requests\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "runtime.txt").write_text("boto3==1.44.5\n")
    # WHEN planned THEN a clear error names the importer and the module
    with pytest.raises(BundleError, match=r"lambdas\.fn\.handler imports 'requests'"):
        plan_bundle("lambdas.fn.handler", root=tmp_path)


def test_type_checking_imports_are_not_bundled(tmp_path: Path) -> None:
    (tmp_path / "lambdas" / "fn").mkdir(parents=True)
    (tmp_path / "lambdas" / "__init__.py").write_text("")
    (tmp_path / "lambdas" / "fn" / "__init__.py").write_text("")
    (tmp_path / "lambdas" / "fn" / "handler.py").write_text(
        "from typing import TYPE_CHECKING\nimport boto3\nif TYPE_CHECKING:\n    from mypy_boto3_s3 import S3Client\n"
    )
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "runtime.txt").write_text("msgspec==0.23.0\nboto3==1.44.5\n")
    plan = plan_bundle("lambdas.fn.handler", root=tmp_path)
    assert plan.requirements == ("boto3==1.44.5",)
    assert plan.third_party == ("boto3",)
