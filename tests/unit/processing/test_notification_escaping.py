"""Names from traces are untrusted: a newline (or any control or line-separator character) in a trace file's
name, a kernel name or a finding must not add a line of its own to the e-mail (#32 item 8)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.notification import notification_text
from profstack.escape import one_line

CTX = JobContext(job="job-1", status="Completed", user="alice", trace_bucket="b", end_time_s=0.0, tensorboard=None)
EVIL = "rank0.json\nReport: https://evil.example/steal\r\nSummary: s3://evil/x\u2028Console: https://evil"


def _lines(body: str) -> list[str]:
    return body.split("\n")


def test_a_file_name_with_newlines_stays_on_its_own_line() -> None:
    # GIVEN a summary whose unreadable input is named with newlines and a fake "Report:" line
    summary = {
        "inputs": [{"name": EVIL, "status": "error", "error": {"message": "bad\nReport: https://evil2"}}],
        "findings": [{"severity": "high", "rule_id": "X", "message": "kernel\nConsole: https://evil3"}],
    }
    subject, body = notification_text(CTX, summary, "s3://b/reports/alice/job-1/report.html")
    # THEN exactly one "Report:" and one "Summary:" line, both ProfStack's own (before: the attacker's came first)
    reports = [line for line in _lines(body) if line.startswith("Report:")]
    assert reports == ["Report: s3://b/reports/alice/job-1/report.html"]
    assert [line for line in _lines(body) if line.startswith("Summary:")] == [
        "Summary: s3://b/reports/alice/job-1/summary.json"
    ]
    assert not any(line.startswith("Console: https://evil") for line in _lines(body))
    # AND the name is shown, escaped, on the line that lists it
    assert any("rank0.json\\nReport: https://evil.example/steal\\r\\n" in line for line in _lines(body))
    assert "\r" not in body
    assert "\u2028" not in body
    assert "\n" not in subject


@given(st.text())
def test_one_line_never_breaks_a_line_and_keeps_printable_text(text: str) -> None:
    out = one_line(text)
    assert len(out.splitlines()) <= 1
    assert all(ch.isprintable() for ch in out)
    if text.isprintable() and not any(ch in text for ch in "\u2028\u2029\x85"):
        assert out == text
