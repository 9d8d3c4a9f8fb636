"""`ProfStackFunction`: the one way ProfStack builds a Lambda function.

x86_64, one Python runtime, its own IAM role, an explicit log group with retention and
Powertools settings. No X-Ray active tracing: no ProfStack code emits subsegments (a Powertools
Tracer would add aws-xray-sdk to every bundle and patch botocore at cold start), so tracing would
record only what the REPORT log line and the Lambda metrics already hold, for a `Resource: "*"`
grant on every role; the structured logs and EMF metrics are the diagnostics.

Code is bundled locally without Docker: each function gets only what its handler imports
(`bundle_plan.plan_bundle`: our modules, found by following imports, next to the wheels of just the
requirements/runtime.txt lines they need, installed for the Lambda platform), with their bytecode
compiled for the runtime's Python (`compile_bytecode`: Lambda cannot write `__pycache__`, so a bundle
without it recompiles every imported module at each cold start). The asset hash covers every input, so
a change to that function's code or pins (and only that) produces a new asset.

The runtime is the Python the tests and mypy run on (3.11; tests/infra/test_lambda_bundles.py
checks that they agree), so the code that is tested is the code that runs.

x86_64, not arm64: the functions that run the engine carry its C module (`ENGINE_MODULE`, built by `make install`
for CPython 3.11 on x86_64 with glibc symbols no newer than 2.14, so it loads on Lambda's Amazon Linux), which
reads traces 2.5x faster than the Python loop; that outweighs arm64's 20 % lower price per GB-second
(bench/README.md, "Lambda architecture"). An arm64 module needs a cross-build this repository does not have
yet; a bundle without the module runs the Python loop and says so once per cold start (PROFSTACK_EXPECT_ENGINE).
"""

from __future__ import annotations

import compileall
import hashlib
import os
import platform
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.components.bundle_plan import BundlePlan, plan_bundle
from stacks.components.nag import acknowledge

REPO_ROOT = Path(__file__).resolve().parents[2]
# The Python of the tests and mypy (pyproject's requires-python floor and tool.mypy.python_version).
# AWS deprecates the python3.11 runtime on 2027-06-30: move runtime, tests and mypy together.
RUNTIME = lambda_.Runtime.PYTHON_3_11
RUNTIME_PYTHON_VERSION = "3.11"
ARCHITECTURE = lambda_.Architecture.X86_64
PIP_PLATFORM = "manylinux2014_x86_64"
#: the C engine as the Lambda runtime imports it (CPython 3.11, x86_64), bundled beside profstack/analysis/native.py
ENGINE_MODULE = Path("profstack") / "analysis" / "_gpuaccel.cpython-311-x86_64-linux-gnu.so"
NATIVE_LOADER = Path("profstack") / "analysis" / "native.py"
REQUIREMENTS = REPO_ROOT / "requirements" / "runtime.txt"
CONSTRAINTS = REPO_ROOT / "requirements" / "constraints.txt"  # pins the transitive dependencies too
_BUNDLER_VERSION = "3"  # bump when the bundling steps change (3: bytecode compiled into the bundle)
# CloudWatch Logs retention days (profstack.config.LOG_RETENTION_DAYS) -> RetentionDays member name.
_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def log_retention(days: int) -> logs.RetentionDays:
    """The RetentionDays member for a config value (profstack.config.LOG_RETENTION_DAYS: only these days)."""
    return getattr(logs.RetentionDays, _RETENTION_NAMES[days])  # type: ignore[no-any-return]


def code_asset_hash(plan: BundlePlan, *, root: Path | None = None) -> str:
    """Hash of everything that goes into one function's bundle, plus the bundling settings."""
    base = root or REPO_ROOT
    digest = hashlib.sha256()
    digest.update(f"{_BUNDLER_VERSION}|{RUNTIME_PYTHON_VERSION}|{PIP_PLATFORM}".encode())
    digest.update("\n".join(plan.requirements).encode())
    digest.update((base / "requirements" / "constraints.txt").read_bytes())
    for rel in plan.files:
        digest.update(str(rel).encode())
        digest.update((base / rel).read_bytes())
    return digest.hexdigest()


def _requirements_hash(platform: str) -> str:
    pins = REQUIREMENTS.read_bytes() + CONSTRAINTS.read_bytes()
    return hashlib.sha256(f"{RUNTIME_PYTHON_VERSION}|{platform}".encode() + pins).hexdigest()[:16]


def wheelhouse(platform: str = PIP_PLATFORM) -> Path:
    """Wheels of requirements/runtime.txt for `platform` (the Lambda's by default), fetched by `make install`."""
    return REPO_ROOT / "build" / "lambda-wheels" / _requirements_hash(platform)


def _pip_for_lambda(*args: str, platform: str = PIP_PLATFORM, requirements: Sequence[str] | None = None) -> list[str]:
    reqs = list(requirements) if requirements is not None else ["-r", str(REQUIREMENTS)]
    return [
        sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check",
        "--platform", platform, "--implementation", "cp", "--python-version", RUNTIME_PYTHON_VERSION,
        "--only-binary=:all:", "-c", str(CONSTRAINTS), *reqs,
    ]  # fmt: skip


def fetch_wheels(platform: str = PIP_PLATFORM) -> Path:
    """Download the wheels once (network: PyPI). Synth then bundles offline."""
    target = wheelhouse(platform)
    if not (target / ".complete").exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([*_pip_for_lambda("download", platform=platform), "--dest", str(target)], check=True)  # noqa: S603
        (target / ".complete").touch()
    return target


def host_platform() -> str:
    """The pip platform tag of this machine, for bundles that tests import here."""
    return f"manylinux2014_{platform.machine()}"


class MissingWheelsError(RuntimeError):
    """Lambda wheels were not fetched; synth stays offline and says how to fix it."""


def installed_requirements(requirements: Sequence[str], *, platform: str = PIP_PLATFORM) -> Path:
    """A folder holding exactly `requirements` installed for `platform` from the fetched wheels (offline).

    Installed once per requirement set, pins and platform under build/lambda-sites/, then reused: the
    functions of one app share two or three requirement sets, so a synth installs each set once.
    """
    wheels = wheelhouse(platform)
    if not (wheels / ".complete").exists():
        raise MissingWheelsError(
            f"Lambda wheels missing in {wheels}: run `make install` "
            "(or `.venv/bin/python -m stacks.components.python_function --fetch`)"
        )
    key = hashlib.sha256(
        f"{_BUNDLER_VERSION}|{RUNTIME_PYTHON_VERSION}|{platform}|".encode()
        + "\n".join(requirements).encode()
        + CONSTRAINTS.read_bytes()
    ).hexdigest()[:16]
    site = REPO_ROOT / "build" / "lambda-sites" / key
    if not (site / ".complete").exists():
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir(parents=True)
        if requirements:
            subprocess.run(  # noqa: S603 - fixed argv, no shell
                [
                    *_pip_for_lambda("install", platform=platform, requirements=requirements),
                    "--no-compile",
                    "--no-index",
                    "--find-links",
                    str(wheels),
                    "--target",
                    str(site),
                ],
                check=True,
            )
        compile_bytecode(site)
        (site / ".complete").touch()
    return site


#: where Lambda unpacks a bundle: the paths the compiled bytecode names (tracebacks, ``__file__`` of code objects)
LAMBDA_TASK_ROOT = "/var/task"


def compile_bytecode(folder: Path, files: Sequence[Path] | None = None) -> bool:
    """Byte-compile ``files`` (default: every ``.py`` under ``folder``) for the Lambda's Python.

    Lambda cannot write ``__pycache__`` (its code folder is read-only), so without these every cold start
    compiles every module it imports again: 1.6 s of CPU for the trace processor's imports against 0.6 s
    with them (measured on this machine's core, see bench/README.md). Checked-hash pycs: the interpreter
    uses one only while the source beside it has the hash it was compiled from, whatever the zip's
    timestamps, so a pyc can never stand in for other code. Compiled only by the runtime's own Python
    version (its bytecode differs per version; the tests run that version): with another interpreter this
    returns False and the bundle ships sources alone, which still work.
    """
    if f"{sys.version_info.major}.{sys.version_info.minor}" != RUNTIME_PYTHON_VERSION:
        return False
    paths = sorted(folder.rglob("*.py")) if files is None else [folder / f for f in files if f.suffix == ".py"]
    for path in paths:
        # quiet=2: a file that does not compile (a package's Python 2 example) fails at import, as it would without
        compileall.compile_file(
            path,
            quiet=2,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
            stripdir=str(folder),
            prependdir=LAMBDA_TASK_ROOT,
        )
    return True


def _link_or_copy(src: str, dst: str) -> None:
    # hard links: the same bytes without copying tens of MB per function (a copy across file systems)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_bundle(plan: BundlePlan, out: Path, *, platform: str = PIP_PLATFORM) -> None:
    """The plan's requirements (installed for `platform`), then its code files, into `out`."""
    site = installed_requirements(plan.requirements, platform=platform)
    shutil.copytree(
        site, out, dirs_exist_ok=True, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(".complete")
    )
    for rel in plan.files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / rel, out / rel)
    compile_bytecode(out, plan.files)  # the requirements' bytecode came with the installed site


@jsii.implements(cdk.ILocalBundling)
class LocalPythonBundler:
    """Bundles without Docker or network: one function's wheels and code files."""

    def __init__(self, plan: BundlePlan) -> None:
        self.plan = plan

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: object) -> bool:
        write_bundle(self.plan, Path(output_dir))
        return True


def with_engine(plan: BundlePlan, *, root: Path | None = None) -> BundlePlan:
    """A bundle that loads the engine (native.py) also carries its built C module, when this checkout has one."""
    base = root or REPO_ROOT
    if NATIVE_LOADER not in plan.files or not (base / ENGINE_MODULE).is_file():
        return plan
    return replace(plan, files=tuple(sorted({*plan.files, ENGINE_MODULE})))


def bundled_code(handler_module: str) -> lambda_.Code:
    plan = with_engine(plan_bundle(handler_module))
    return lambda_.Code.from_asset(
        str(REPO_ROOT / "lambdas"),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=code_asset_hash(plan),
        bundling=cdk.BundlingOptions(
            # Never pulled: local bundling always succeeds or raises.
            image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-python{RUNTIME_PYTHON_VERSION}"),
            local=LocalPythonBundler(plan),
        ),
    )


@dataclass(frozen=True, kw_only=True)
class PowertoolsSettings:
    service: str
    metrics_namespace: str = "ProfStack"
    log_level: str = "INFO"


def stack_logs_key(scope: Construct) -> kms.IKey | None:
    """The KMS key the scope's stack encrypts its log groups with (the storage stack's LogsKey), or None."""
    return getattr(cdk.Stack.of(scope), "logs_key", None)


class ProfStackFunction(Construct):
    """A Lambda function with its own role and log group. Grant it what it needs with grant_*."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_module: str,
        description: str,
        log_retention: logs.RetentionDays,
        powertools: PowertoolsSettings,
        environment: Mapping[str, str] | None = None,
        timeout: cdk.Duration | None = None,
        memory_size: int = 512,
        reserved_concurrency: int | None = None,
        ephemeral_storage_mib: int | None = None,
        role_path: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention,
            encryption_key=stack_logs_key(self),
            removal_policy=cdk.RemovalPolicy.DESTROY,  # logs of a stateless function; retention bounds them
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Execution role of {construct_id}: {description}"[:1000],
            path=role_path,
        )
        self.log_group.grant_write(self.role)
        env = {
            "POWERTOOLS_SERVICE_NAME": powertools.service,
            "POWERTOOLS_METRICS_NAMESPACE": powertools.metrics_namespace,
            "POWERTOOLS_LOG_LEVEL": powertools.log_level,
            **(environment or {}),
        }
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=bundled_code(handler_module),
            handler=f"{handler_module}.handler",
            description=description,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            environment=env,
            timeout=timeout or cdk.Duration.minutes(1),
            memory_size=memory_size,
            reserved_concurrent_executions=reserved_concurrency,
            ephemeral_storage_size=(
                cdk.Size.mebibytes(ephemeral_storage_mib) if ephemeral_storage_mib is not None else None
            ),
        )
        runtime_reason = (
            f"{RUNTIME.name} is the Python that the tests, mypy and the isolated import check of this "
            "function's bundle run on (tests/infra/test_lambda_bundles.py), so the tested code is the code "
            "that runs; AWS deprecates it on 2027-06-30, and runtime, tests and mypy move together before then."
        )
        acknowledge(self.function, "AwsSolutions-L1", runtime_reason)
        acknowledge(self.function, "Serverless-LambdaLatestVersion", runtime_reason)


if __name__ == "__main__":
    if sys.argv[1:] != ["--fetch"]:
        sys.exit("usage: python -m stacks.components.python_function --fetch")
    print(f"Lambda wheels in {fetch_wheels().relative_to(REPO_ROOT)}")
    # the same pins for this machine, so tests import each function's bundle under the runtime's Python
    print(f"host wheels in {fetch_wheels(host_platform()).relative_to(REPO_ROOT)}")
