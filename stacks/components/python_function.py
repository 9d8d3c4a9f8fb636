"""`ProfStackFunction`: the one way ProfStack builds a Lambda function.

arm64, one Python runtime, its own IAM role, an explicit log group with retention,
X-Ray tracing and Powertools settings. Code is bundled locally without Docker:
`lambdas/` and `profstack/` are copied next to the wheels of requirements/runtime.txt
installed for the Lambda platform. The asset hash covers every input, so a change to
the code or the pins (and only that) produces a new asset.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME = lambda_.Runtime.PYTHON_3_14
RUNTIME_PYTHON_VERSION = "3.14"
ARCHITECTURE = lambda_.Architecture.ARM_64
PIP_PLATFORM = "manylinux2014_aarch64"
REQUIREMENTS = REPO_ROOT / "requirements" / "runtime.txt"
CONSTRAINTS = REPO_ROOT / "requirements" / "constraints.txt"  # pins the transitive dependencies too
CODE_PACKAGES = ("lambdas", "profstack")
_BUNDLER_VERSION = "1"  # bump when the bundling steps change
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "*.egg-info")


def _source_files() -> list[Path]:
    files: list[Path] = [REQUIREMENTS, CONSTRAINTS]
    for package in CODE_PACKAGES:
        files.extend(
            p for p in sorted((REPO_ROOT / package).rglob("*")) if p.is_file() and "__pycache__" not in p.parts
        )
    return files


def code_asset_hash() -> str:
    """Hash of everything that goes into the bundle, plus the bundling settings."""
    digest = hashlib.sha256()
    digest.update(f"{_BUNDLER_VERSION}|{RUNTIME_PYTHON_VERSION}|{PIP_PLATFORM}".encode())
    for path in _source_files():
        digest.update(str(path.relative_to(REPO_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _requirements_hash() -> str:
    pins = REQUIREMENTS.read_bytes() + CONSTRAINTS.read_bytes()
    return hashlib.sha256(f"{RUNTIME_PYTHON_VERSION}|{PIP_PLATFORM}".encode() + pins).hexdigest()[:16]


def wheelhouse() -> Path:
    """Lambda-platform wheels of requirements/runtime.txt, fetched by `make install`."""
    return REPO_ROOT / "build" / "lambda-wheels" / _requirements_hash()


def _pip_for_lambda(*args: str) -> list[str]:
    return [
        sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check",
        "--platform", PIP_PLATFORM, "--implementation", "cp", "--python-version", RUNTIME_PYTHON_VERSION,
        "--only-binary=:all:", "-r", str(REQUIREMENTS), "-c", str(CONSTRAINTS),
    ]  # fmt: skip


def fetch_wheels() -> Path:
    """Download the wheels once (network: PyPI). Synth then bundles offline."""
    target = wheelhouse()
    if not (target / ".complete").exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([*_pip_for_lambda("download"), "--dest", str(target)], check=True)  # noqa: S603
        (target / ".complete").touch()
    return target


class MissingWheelsError(RuntimeError):
    """Lambda wheels were not fetched; synth stays offline and says how to fix it."""


@jsii.implements(cdk.ILocalBundling)
class LocalPythonBundler:
    """Bundles without Docker or network: installs fetched platform wheels, then copies our packages."""

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: object) -> bool:
        wheels = wheelhouse()
        if not (wheels / ".complete").exists():
            raise MissingWheelsError(
                f"Lambda wheels missing in {wheels}: run `make install` "
                "(or `.venv/bin/python -m stacks.components.python_function --fetch`)"
            )
        out = Path(output_dir)
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [
                *_pip_for_lambda("install"),
                "--no-compile",
                "--no-index",
                "--find-links",
                str(wheels),
                "--target",
                str(out),
            ],
            check=True,
        )
        for package in CODE_PACKAGES:
            shutil.copytree(REPO_ROOT / package, out / package, dirs_exist_ok=True, ignore=_IGNORED)
        return True


def bundled_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(REPO_ROOT / "lambdas"),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=code_asset_hash(),
        bundling=cdk.BundlingOptions(
            # Never pulled: local bundling always succeeds or raises.
            image=cdk.DockerImage.from_registry("public.ecr.aws/sam/build-python3.14"),
            local=LocalPythonBundler(),
        ),
    )


@dataclass(frozen=True, kw_only=True)
class PowertoolsSettings:
    service: str
    metrics_namespace: str = "ProfStack"
    log_level: str = "INFO"


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
            code=bundled_code(),
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
            tracing=lambda_.Tracing.ACTIVE,
        )


if __name__ == "__main__":
    if sys.argv[1:] != ["--fetch"]:
        sys.exit("usage: python -m stacks.components.python_function --fetch")
    print(f"Lambda wheels in {fetch_wheels().relative_to(REPO_ROOT)}")
