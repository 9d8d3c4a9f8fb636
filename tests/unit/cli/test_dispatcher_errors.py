"""The dispatcher: every failure is one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from profstack import cli
from tests.conftest import REPO_ROOT


def test_missing_region_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN no region anywhere (config is env-agnostic, no AWS_REGION)
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    # WHEN a command needs AWS THEN one line says what to set, exit 2
    assert cli.main(["users", "list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # (the message names the variables botocore and the CLI really read)
    assert err == [
        "profstack: error: cloudformation client: no AWS region: pass --region, set environment.region in the "
        "config, or set AWS_REGION or AWS_DEFAULT_REGION (or `region` in your AWS config profile)"
    ]


@pytest.mark.parametrize(
    ("env", "given", "expected"),
    [
        ({"AWS_REGION": "eu-west-1"}, None, "eu-west-1"),  # botocore alone would ignore AWS_REGION
        ({"AWS_DEFAULT_REGION": "us-west-2"}, None, "us-west-2"),
        ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, None, "eu-west-1"),
        ({"AWS_REGION": "eu-west-1"}, "ap-south-1", "ap-south-1"),  # --region or the config wins
    ],
)
def test_aws_region_works_as_well_as_aws_default_region(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], given: str | None, expected: str
) -> None:
    # GIVEN only these region variables (no profile file)
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # WHEN the CLI creates a client THEN it is in the expected region
    from profstack.cli import _aws

    assert _aws.make_client("s3", given).meta.region_name == expected


def _boom(_: argparse.Namespace) -> int:
    raise KeyError("unexpected")


def _parser_with_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    from profstack.cli import migrate

    monkeypatch.setattr(migrate, "run_smprof", _boom)  # bound when the parser is built


def test_a_bug_is_one_line_with_a_debug_switch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a handler with a bug
    _parser_with_bug(monkeypatch)
    monkeypatch.delenv("PROFSTACK_DEBUG", raising=False)
    # WHEN it runs THEN exit 3 and one line naming the error and the debug switch
    assert cli.main(["migrate", "smprof", "x.py"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["profstack: internal error: KeyError: 'unexpected' (PROFSTACK_DEBUG=1 shows the traceback)"]
    # WHEN PROFSTACK_DEBUG is set THEN the real exception propagates
    monkeypatch.setenv("PROFSTACK_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["migrate", "smprof", "x.py"])


def _cli_without_boto3(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter where boto3/botocore cannot be imported (a plain `pip install`)."""
    code = (
        "import sys\n"
        "for m in ('boto3', 'botocore', 's3transfer'): sys.modules[m] = None\n"
        "from profstack.cli import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False)


def test_without_the_aws_extra_local_commands_work_and_aws_ones_say_what_to_install() -> None:
    # GIVEN a Python without boto3/botocore (a plain `pip install profstack`)
    # WHEN a local command runs THEN it works
    local = _cli_without_boto3("config", "check", "config/profstack.yaml", "--allow-example-values")
    assert local.returncode == 0, local.stderr
    # WHEN an AWS command runs, with its own options THEN one line says what to install into which Python, exit 2
    aws = _cli_without_boto3("tensorboard", "start", "--user", "alice", "--apply")
    assert aws.returncode == 2
    install = f"run `{sys.executable} -m pip install 'boto3>=1.34,<2'` (docs/first-report.md, Install)"
    assert aws.stderr.strip().splitlines() == [
        f"profstack: error: `profstack tensorboard` talks to AWS and needs boto3, which is not installed in "
        f"{sys.prefix}: {install}"
    ]
    # AND never the `profstack[aws]` of a package that is not on PyPI
    assert "profstack[aws]" not in aws.stderr
    # AND a command whose boto3 import is deep inside it says the same kind of line
    deep = _cli_without_boto3("legacy", "audit", "--days", "1")
    assert deep.returncode == 2
    assert deep.stderr.strip().splitlines() == [
        "profstack: error: this command talks to AWS and needs boto3, which is not installed in "
        f"{sys.prefix}: {install}"
    ]
