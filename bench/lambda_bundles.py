"""Size and cold-start import time of each Lambda function's bundle, against one bundle for all.

    .venv/bin/python -m bench.lambda_bundles [--repeat 5] [--out bench/results/lambda_bundles.json]

For every function in the app (found in the synthesized templates): its own bundle as
`stacks/components/python_function.write_bundle` builds it (only what its handler imports), and the
layout before per-function bundles (all of lambdas/ and profstack/ plus every requirement) for
comparison. Sizes are of the arm64 asset (unzipped, and zipped as CDK uploads it). Import time (own bundle only:
Python imports only what a handler imports, so files it never imports cost download, not import) is the
wall time of `import <handler module>` in a fresh interpreter that sees only the bundle (`python -I -S -B`,
this machine's wheels of the same pins), best of `--repeat` runs, on this machine's CPU rather than Lambda's
Graviton. `-B`: nothing is written, as on Lambda, whose code folder is read-only. Two columns: with the bytecode
the bundle ships (`python_function.compile_bytecode`), and with it removed, which is what every cold start paid
before bundles carried it (each compiled every imported module again). Sizes include that bytecode.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from stacks.components import python_function as pf
from stacks.components.bundle_plan import BundlePlan, plan_bundle

REPO_ROOT = Path(__file__).resolve().parent.parent
TOKEN_VALUES = {
    "DOMAIN_ID": "d-000000000000",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:placeholder",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:placeholder",
    "READER_ROLE_ARN": "arn:aws:iam::123456789012:role/placeholder",
    "TRACE_KEY_ARN": "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000",
}


def functions() -> dict[str, dict[str, str]]:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from profstack.config import load_config
    from stacks.profstack_app import build_profstack

    context = {**json.loads((REPO_ROOT / "cdk.json").read_text())["context"], "aws:cdk:bundling-stacks": []}
    app = cdk.App(context=context)
    stacks = build_profstack(app, load_config(REPO_ROOT / "config" / "profstack.yaml"))
    found: dict[str, dict[str, str]] = {}
    for stack in stacks.all():
        for res in Template.from_stack(stack).to_json().get("Resources", {}).values():
            props = res.get("Properties", {})
            if res["Type"] == "AWS::Lambda::Function" and str(props.get("Handler", "")).startswith("lambdas."):
                env = props.get("Environment", {}).get("Variables", {})
                found[props["Handler"].rsplit(".", 1)[0]] = {
                    k: v if isinstance(v, str) else TOKEN_VALUES.get(k, "placeholder") for k, v in env.items()
                }
    return found


def everything() -> BundlePlan:
    """The layout before per-function bundles: every code file and every runtime requirement."""
    files = tuple(
        sorted(
            p.relative_to(REPO_ROOT)
            for pkg in ("lambdas", "profstack")
            for p in (REPO_ROOT / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
    )
    reqs = tuple(
        ln.strip()
        for ln in (REPO_ROOT / "requirements" / "runtime.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    )
    return BundlePlan("*", files, reqs, ())


def sizes(folder: Path) -> tuple[int, int]:
    raw = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    with tempfile.TemporaryFile() as fh:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    zf.write(p, p.relative_to(folder).as_posix())
        zipped = fh.tell()
    return raw, zipped


def import_seconds(folder: Path, module: str, env: dict[str, str], repeat: int) -> float:
    code = f"import sys; sys.path.insert(0, {str(folder)!r}); import {module}"
    argv = [sys.executable, "-I", "-S", "-B", "-c", code]  # -B: writes no bytecode, like Lambda's read-only disk
    full_env = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", **env}
    first = subprocess.run(argv, env=full_env, check=False, capture_output=True, text=True)  # warms the page cache
    if first.returncode:
        raise RuntimeError(f"{module} does not import from its bundle: {first.stderr[-800:]}")
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=full_env, check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    base = [sys.executable, "-I", "-S", "-c", "pass"]
    t0 = time.perf_counter()
    subprocess.run(base, check=True)
    return best - min(time.perf_counter() - t0, best)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="import timings per bundle (best is kept)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" / "lambda_bundles.json")
    args = parser.parse_args()
    pf.fetch_wheels()
    pf.fetch_wheels(pf.host_platform())
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fns = functions()
        every = everything()
        for module, env in sorted(fns.items()):
            plan = plan_bundle(module)
            out = {}
            for label, p in (("own", plan), ("all-in-one", replace(every, handler_module=module))):
                arm = root / f"{label}-{module}-arm"
                pf.write_bundle(p, arm)
                host = root / f"{label}-{module}-host"
                pf.write_bundle(p, host, platform=pf.host_platform())
                raw, zipped = sizes(arm)
                out[label] = {"unzipped_mb": round(raw / 1e6, 1), "zipped_mb": round(zipped / 1e6, 1)}
                if label == "own":  # Python imports only what is imported: unused files cost download, not import
                    out[label]["import_ms"] = round(import_seconds(host, module, env, args.repeat) * 1000, 1)
                    for cache in list(host.rglob("__pycache__")):
                        shutil.rmtree(cache)
                    no_pyc = import_seconds(host, module, env, args.repeat)
                    out[label]["import_ms_without_bytecode"] = round(no_pyc * 1000, 1)
                shutil.rmtree(arm)
                shutil.rmtree(host)
            rows.append({"function": module, **out})
            own, one = out["own"], out["all-in-one"]
            print(
                f"{module:42} own {own['unzipped_mb']:5.1f} MB ({own['zipped_mb']:4.1f} zipped), "
                f"import {own['import_ms']:6.1f} ms ({own['import_ms_without_bytecode']:6.1f} without bytecode) "
                f"| all-in-one {one['unzipped_mb']:5.1f} MB "
                f"({one['zipped_mb']:4.1f} zipped)"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"functions": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
