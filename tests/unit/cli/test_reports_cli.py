"""`profstack reports list|open|get|diff` on moto: the user's own reports/<user>/, read with the index the
processor writes (lambdas/trace_processor/report_index.py), or from the job folders without it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from moto import mock_aws

from lambdas.trace_processor import report_index
from profstack import layout
from profstack.cli import main
from profstack.report import index as idx

BUCKET = "profstack-traces-test"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"
NOW = datetime.now(UTC).replace(microsecond=0)


def _summary(step_p50_us: float) -> dict[str, Any]:
    summary: dict[str, Any] = copy.deepcopy(json.loads(FIXTURE.read_text()))
    for rank in summary["ranks"]:
        rank["steps"]["p50_us"] = step_p50_us
    summary["cost"] = {"total_usd": 12.5, "duration_s": 5400.0}
    return summary


def publish(s3: Any, user: str, job: str, *, hours_ago: float, step_p50_us: float, index: bool = True) -> None:
    """What the processor leaves for one job: summary, page, a timeline, a partial, the row file and the index."""
    prefix = layout.job_reports_prefix(user, job)
    summary = _summary(step_p50_us)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}summary.json", Body=json.dumps(summary).encode())
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}report.html", Body=b"<html>report</html>")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}perfetto/rank-0.trace.json.gz", Body=b"\x1f\x8bgz")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}partials/00000/summary.json", Body=b"{}")
    family = job.rsplit("-", 1)[0]
    row = idx.index_row(summary, job=job, status="Completed", ended_at=NOW - timedelta(hours=hours_ago), family=family)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}{idx.ROW_FILE}", Body=idx.dumps(row))
    if index:
        report_index.commit_row(s3, BUCKET, user, row)


@pytest.fixture
def s3(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("PROFSTACK_TRACE_BUCKET", BUCKET)
    monkeypatch.delenv("PROFSTACK_BUCKET", raising=False)
    monkeypatch.setenv("PROFSTACK_USER", "alice")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        publish(client, "alice", "bert-1", hours_ago=50, step_p50_us=120_000.0)
        publish(client, "alice", "bert-2", hours_ago=2, step_p50_us=180_000.0)
        publish(client, "alice", "gpt-1", hours_ago=10, step_p50_us=90_000.0)
        publish(client, "bob", "bob-secret-1", hours_ago=1, step_p50_us=1.0)
        yield client


def test_list_shows_the_users_jobs_newest_first_with_their_columns(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN alice lists her reports
    assert main(["reports", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    # THEN a header, then her three jobs newest first, with status, duration, step p50, GPU idle, cost, top finding
    assert out[0].split()[:3] == ["job", "status", "ended"]
    assert [line.split()[0] for line in out[1:]] == ["bert-2", "gpt-1", "bert-1"]
    assert "180.0 ms" in out[1]
    assert "1 h 30 min" in out[1]
    assert "$12.50" in out[1]
    assert "Completed" in out[1]
    top = json.loads(FIXTURE.read_text())["findings"][0]
    assert f"[{top['severity']}] {top['rule_id']}" in out[1]
    # AND nothing of bob's
    assert not [line for line in out if "bob" in line]


def test_list_filters_by_since_and_family_and_prints_json(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN alice asks for the last day's jobs, and for family bert, as JSON
    assert main(["reports", "list", "--since", "1d", "--json"]) == 0
    recent = json.loads(capsys.readouterr().out)
    assert main(["reports", "list", "--family", "bert", "--json"]) == 0
    bert = json.loads(capsys.readouterr().out)
    assert main(["reports", "list", "--since", (NOW - timedelta(hours=20)).date().isoformat(), "--json"]) == 0
    dated = json.loads(capsys.readouterr().out)
    # THEN the rows match, newest first, with the index's fields
    assert [r["job"] for r in recent] == ["bert-2", "gpt-1"]
    assert [r["job"] for r in bert] == ["bert-2", "bert-1"]
    assert {r["job"] for r in dated} >= {"bert-2", "gpt-1"}
    assert "bert-1" not in {r["job"] for r in dated}
    assert set(recent[0]) == set(idx.FIELDS)


def test_list_without_an_index_reads_the_job_row_files(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN alice's index.json gone, and one job folder without a row file (reported before the index existed)
    s3.delete_object(Bucket=BUCKET, Key="reports/alice/index.json")
    s3.put_object(Bucket=BUCKET, Key="reports/alice/old-job/summary.json", Body=b"{}")
    # WHEN she lists
    assert main(["reports", "list", "--json"]) == 0
    captured = capsys.readouterr()
    # THEN every job with a row file, newest first, and a note about the one without
    assert [r["job"] for r in json.loads(captured.out)] == ["bert-2", "gpt-1", "bert-1"]
    assert "1 job folder(s) have no index row" in captured.err


def test_open_prints_a_presigned_url_of_the_report(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN alice opens a job's report without a browser
    assert main(["reports", "open", "gpt-1", "--print", "--expires", "600"]) == 0
    url = capsys.readouterr().out.strip()
    # THEN a SigV4 presigned GET of exactly that report.html, valid for the time asked
    parsed = urlparse(url)
    assert parsed.path.endswith("/reports/alice/gpt-1/report.html")
    query = parse_qs(parsed.query)
    assert query["X-Amz-Expires"] == ["600"]
    assert "X-Amz-Signature" in query


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ("no-such-job", "no report for job 'no-such-job' under s3://profstack-traces-test/reports/alice/"),
        ("bob-secret-1", "no report for job 'bob-secret-1' under s3://profstack-traces-test/reports/alice/"),
        ("../bob/bob-secret-1", "'../bob/bob-secret-1' is not a training job name"),
    ],
)
def test_open_and_get_refuse_what_is_not_one_of_the_users_reports(
    s3: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, job: str, message: str
) -> None:
    # WHEN alice names a job that is not hers (bob's, by name or by path) THEN one line, exit status 2
    for argv in (["reports", "open", job, "--print"], ["reports", "get", job, str(tmp_path / "x")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("profstack: error: ")
        assert message in err
        assert err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_get_downloads_summary_report_and_timelines(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # WHEN alice downloads a job
    assert main(["reports", "get", "bert-2", str(tmp_path / "bert-2")]) == 0
    out = capsys.readouterr().out
    # THEN its summary, report, row and Perfetto timeline, and not the pipeline's partials
    files = sorted(str(p.relative_to(tmp_path / "bert-2")) for p in (tmp_path / "bert-2").rglob("*") if p.is_file())
    assert files == ["index-row.json", "perfetto/rank-0.trace.json.gz", "report.html", "summary.json"]
    assert json.loads((tmp_path / "bert-2" / "summary.json").read_text())["cost"]["total_usd"] == 12.5
    assert "ui.perfetto.dev" in out


def test_diff_compares_two_jobs_by_name(s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN alice compares two of her jobs by name
    html = tmp_path / "diff.html"
    assert main(["reports", "diff", "bert-1", "bert-2", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    # THEN the step time change of the two summaries, labelled by job name, text and HTML
    assert "step p50" in out
    assert "120.000 ms" in out
    assert "180.000 ms" in out
    assert "+50.0%" in out
    assert "bert-1" in out
    assert "bert-2" in out
    assert "+50.0%" in html.read_text()


def test_a_missing_user_is_a_one_line_error(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PROFSTACK_USER")
    assert main(["reports", "list"]) == 2
    assert "pass --user U or set PROFSTACK_USER" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("since", "expected"),
    [("2w", timedelta(weeks=2)), ("36h", timedelta(hours=36)), ("7d", timedelta(days=7))],
)
def test_since_takes_weeks_hours_and_days(since: str, expected: timedelta) -> None:
    from profstack.cli.reports import parse_since

    assert parse_since(since, NOW) == NOW - expected
    assert parse_since("2026-11-30", NOW) == datetime(2026, 11, 30, tzinfo=UTC)


@pytest.mark.parametrize("since", ["yesterday", "7", "-1d", "1y"])
def test_a_since_it_cannot_read_is_a_one_line_error(s3: Any, capsys: pytest.CaptureFixture[str], since: str) -> None:
    assert main(["reports", "list", f"--since={since}"]) == 2
    err = capsys.readouterr().err
    assert f"--since {since!r}: use 7d, 12h, 2w, or a date like 2026-11-30" in err


def _reader_role(name: str) -> str:
    iam = boto3.client("iam", region_name="us-east-1")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    return str(
        iam.create_role(RoleName=name, Path="/profstack/users/alice/", AssumeRolePolicyDocument=json.dumps(trust))[
            "Role"
        ]["Arn"]
    )


def test_from_a_laptop_the_reader_role_is_assumed_and_used_for_listing_and_presigning(
    s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN alice's report reader role, given by ARN (outside SageMaker: the role her access policy may assume)
    arn = _reader_role("alice-report-reader")
    # WHEN she lists and opens her reports as that role
    assert main(["reports", "list", "--role", arn, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["job"] for r in rows] == ["bert-2", "gpt-1", "bert-1"]
    assert main(["reports", "open", "gpt-1", "--print", "--role", arn]) == 0
    query = parse_qs(urlparse(capsys.readouterr().out.strip()).query)
    # THEN the URL is signed with the assumed role's temporary credentials, not the caller's own
    assert not query["X-Amz-Credential"][0].startswith("testing")  # the fixture's own key id
    assert "X-Amz-Security-Token" in query


def test_reader_finds_the_role_by_its_stack_export(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the TensorBoard stack's export naming alice's reader role (stacks/components/user_workspace.py)
    from tests.conftest import EXAMPLE_CONFIG

    arn = _reader_role("alice-report-reader")
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"Reader": {"Value": arn, "Export": {"Name": "profstack-report-reader-alice"}}},
    }
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    cloudformation.create_stack(StackName="profstack-tensorboard", TemplateBody=json.dumps(template))
    # WHEN alice asks with --reader
    code = main(["reports", "list", "--reader", "--config", str(EXAMPLE_CONFIG), "--region", "us-east-1", "--json"])
    # THEN her reports are listed as that role; bob asking for his finds no export of his own
    assert code == 0
    assert {r["job"] for r in json.loads(capsys.readouterr().out)} == {"bert-1", "bert-2", "gpt-1"}
    assert (
        main(["reports", "list", "--reader", "--user", "bob", "--config", str(EXAMPLE_CONFIG), "--region", "us-east-1"])
        == 2
    )
    assert "no export profstack-report-reader-bob" in capsys.readouterr().err
