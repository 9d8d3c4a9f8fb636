"""Where `profstack reports` finds the trace bucket, and what it says when it cannot: one environment variable
(`PROFSTACK_TRACE_BUCKET`, the name migrated launchers read too), its deprecated spelling, and an error that asks
for `--bucket` outside a checkout instead of blaming a config file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from profstack.cli import main

BUCKET = "profstack-traces-test"


@pytest.fixture
def s3(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("PROFSTACK_TRACE_BUCKET", "PROFSTACK_BUCKET", "PROFSTACK_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROFSTACK_USER", "alice")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def test_outside_a_checkout_it_asks_for_the_bucket(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an engineer's machine: no config file here, no bucket given
    monkeypatch.chdir(tmp_path)
    # WHEN they list their reports
    assert main(["reports", "list", "--user", "alice"]) == 2
    # THEN one line asks for what is missing (--bucket or the variable) and says where it looked, no config blame
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("profstack: error: which trace bucket? pass --bucket BUCKET or set PROFSTACK_TRACE_BUCKET")
    assert str(tmp_path) in line
    assert "config file not found" not in line


def test_the_trace_bucket_variable_is_read(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the variable migrated launchers read WHEN reports are listed THEN it names the bucket, silently
    monkeypatch.setenv("PROFSTACK_TRACE_BUCKET", BUCKET)
    assert main(["reports", "list", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert captured.err == ""


def test_the_old_spelling_still_works_with_a_warning(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN only the older PROFSTACK_BUCKET WHEN reports are listed THEN it works, and one line says what to set
    monkeypatch.setenv("PROFSTACK_BUCKET", BUCKET)
    assert main(["reports", "list", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert captured.err.strip().splitlines() == [
        "profstack: warning: $PROFSTACK_BUCKET is deprecated; set $PROFSTACK_TRACE_BUCKET instead "
        "(the same name migrated launchers read)"
    ]


def test_two_variables_naming_different_buckets_is_an_error(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN both spellings, naming different buckets WHEN reports are listed THEN it refuses to guess
    monkeypatch.setenv("PROFSTACK_TRACE_BUCKET", BUCKET)
    monkeypatch.setenv("PROFSTACK_BUCKET", "someone-elses-bucket")
    assert main(["reports", "list"]) == 2
    err = capsys.readouterr().err
    assert "name different buckets" in err
    assert "--bucket" in err
    # AND --bucket settles it
    assert main(["reports", "list", "--bucket", BUCKET, "--json"]) == 0
