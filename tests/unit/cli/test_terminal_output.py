"""What `profstack reports list`, `reports diff`, `diff` and every e-mail print is escaped by the one rule
(profstack/escape.py, #42 item 13). Before: a finding or kernel name with ESC / BEL reached the user's terminal raw
from `reports list` and `reports diff` (an OSC 52 clipboard write, an erased line)."""

from __future__ import annotations

import copy
import json
import unicodedata
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from lambdas.trace_processor import aws, report_index
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.notification import notification_text
from profstack import layout
from profstack.cli import main
from profstack.report import index as idx

BUCKET = "profstack-traces-test"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"
NOW = datetime.now(UTC).replace(microsecond=0)
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: writes "rm -rf ~" into the user's clipboard
ERASE = "\x1b[2K\r"  # erase the line, back to its start
HOSTILE = st.text(alphabet=st.characters(exclude_categories=()), min_size=1, max_size=40)


def unsafe(text: str) -> list[str]:
    """Characters a terminal or mail reader acts on, but the line break."""
    return [
        ch
        for ch in text
        if ch != "\n"
        and (unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"} or (ch.isspace() and ch != " "))
    ]


def _summary(kernel: str, finding: str) -> dict[str, Any]:
    summary: dict[str, Any] = copy.deepcopy(json.loads(FIXTURE.read_text()))
    summary["findings"][0]["message"] = finding
    summary["findings"][0]["severity"] = "critical"
    for rank in summary["ranks"]:
        for k in rank.get("top_kernels_by_time") or []:
            k["name"] = kernel
    return summary


def _publish(s3: Any, job: str, *, kernel: str, finding: str, status: str, hours_ago: float) -> None:
    prefix = layout.job_reports_prefix("alice", job)
    summary = _summary(kernel, finding)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}summary.json", Body=json.dumps(summary).encode())
    row = idx.index_row(summary, job=job, status="Completed", ended_at=NOW - timedelta(hours=hours_ago))
    row["status"] = status  # index.json is read back untrusted: a row as anyone who could write it would write it
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}{idx.ROW_FILE}", Body=idx.dumps(row))
    report_index.commit_row(s3, BUCKET, "alice", row)


@pytest.fixture
def env(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("PROFSTACK_BUCKET", BUCKET)
    monkeypatch.setenv("PROFSTACK_USER", "alice")


def _bucket() -> Any:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    return s3


def test_reports_list_and_diff_print_a_clipboard_write_as_visible_characters(
    env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_aws():
        s3 = _bucket()
        # GIVEN two of alice's jobs whose top finding and kernel names carry an OSC 52 clipboard write and an
        # erase-line sequence, and a row whose status does too
        _publish(s3, "job-a", kernel=f"k{CLIPBOARD}", finding=f"idle {ERASE}FAKE", status=f"Done{ERASE}", hours_ago=2)
        _publish(s3, "job-b", kernel=f"k{CLIPBOARD}", finding="fine", status="Completed", hours_ago=1)
        # WHEN she lists them, as a table and as JSON, and compares them
        assert main(["reports", "list"]) == 0
        table = capsys.readouterr()
        assert main(["reports", "list", "--json"]) == 0
        listed = capsys.readouterr()
        assert main(["reports", "diff", "job-a", "job-b"]) == 0
        diffed = capsys.readouterr()
    # THEN no ESC, BEL or carriage return reached the terminal; each shows as its escape, on its own row
    for out in (table.out, table.err, listed.out, diffed.out, diffed.err):
        assert unsafe(out) == [], out
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in diffed.out
    assert "idle \\x1b[2K FAKE" in table.out  # the row keeps a finding on one line; ESC stays visible
    assert "Done\\x1b[2K\\r" in table.out
    assert len(table.out.splitlines()) == 3  # the header and two rows: no line of the attacker's
    # AND the JSON still reads back as exactly what the row holds
    rows = {r["job"]: r for r in json.loads(listed.out)}
    assert rows["job-a"]["status"] == f"Done{ERASE}"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kernel=HOSTILE, finding=HOSTILE, status=HOSTILE)
def test_whatever_a_row_or_summary_holds_reports_list_and_diff_print_nothing_unsafe(
    env: None, capsys: pytest.CaptureFixture[str], kernel: str, finding: str, status: str
) -> None:
    capsys.readouterr()
    with mock_aws():
        s3 = _bucket()
        _publish(s3, "job-a", kernel=kernel, finding=finding, status=status, hours_ago=2)
        _publish(s3, "job-b", kernel=kernel + "x", finding=finding, status="Completed", hours_ago=1)
        codes = [
            main(["reports", "list"]),
            main(["reports", "list", "--json"]),
            main(["reports", "diff", "job-a", "job-b"]),
        ]
        captured = capsys.readouterr()
    assert codes == [0, 0, 0]
    assert unsafe(captured.out) == []
    assert unsafe(captured.err) == []


@settings(max_examples=60, deadline=None)
@given(name=HOSTILE, message=HOSTILE, reason=HOSTILE)
def test_every_e_mail_leaves_with_an_ascii_subject_and_a_body_without_control_characters(
    name: str, message: str, reason: str
) -> None:
    # GIVEN a summary and a FailureReason holding anything at all
    ctx = JobContext(job="job-1", status="Failed", user="alice", trace_bucket="b", end_time_s=0.0, tensorboard=None)
    summary = {
        "inputs": [{"name": name, "status": "failed", "error": {"message": message}}],
        "findings": [{"severity": "critical", "rule_id": "X", "message": message, "recommendation": name}],
    }
    describe = {"TrainingJobName": "job-1", "TrainingJobStatus": "Failed", "FailureReason": reason}
    subject, body = notification_text(ctx, summary, "s3://b/r.html", describe=describe)
    # WHEN it is published (the one way every e-mail leaves: lambdas/trace_processor/aws.publish)
    sns = boto3.client("sns", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sns) as stub:
        sent: dict[str, Any] = {}

        def capture(params: dict[str, Any], **_: Any) -> None:
            sent.update(params)

        sns.meta.events.register("provide-client-params.sns.Publish", capture)
        stub.add_response("publish", {"MessageId": "1"})
        aws.publish(sns, topic_arn="arn:aws:sns:us-east-1:123456789012:t", subject=subject + name, message=body,
                    attributes={"job": "job-1"})  # fmt: skip
    # THEN the subject is one line of printable ASCII under 100 characters, and the body has no control character
    assert all(" " <= ch <= "~" for ch in sent["Subject"])
    assert len(sent["Subject"]) < 100
    assert unsafe(sent["Message"]) == []
    # AND the report link is ProfStack's own line, once
    assert [line for line in sent["Message"].split("\n") if line.startswith("Report:")] == ["Report: s3://b/r.html"]


def test_the_backfill_listing_prints_a_jobs_owner_tag_as_visible_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli.reanalyze import Candidate, _print_candidates

    # GIVEN a job whose creator wrote a clipboard write into its owner tag (any tag value SageMaker accepts)
    hostile = Candidate(job="job-1", status="Completed", ended=NOW, owner=f"bob{CLIPBOARD}{ERASE}", action="queue")
    # WHEN an administrator lists the jobs a backfill would queue
    _print_candidates([hostile], NOW - timedelta(days=1), NOW)
    out = capsys.readouterr().out
    # THEN nothing a terminal acts on reaches it, and the tag is still readable
    assert not unsafe(out), unsafe(out)
    assert "bob" in out
