"""Partial results name the file and the cause (from summary.json), not "see summary.json errors"."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from profstack.cli import main
from profstack.cli.analyze import partial_cause


def test_a_partial_run_names_the_unreadable_file_and_why(
    traces_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN one good trace and one cut short
    traces = tmp_path / "traces"
    traces.mkdir()
    good = traces_dir / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    shutil.copy(good, traces / "rank-0.json.gz")
    data = gzip.decompress(good.read_bytes())
    (traces / "rank-1.json").write_bytes(data[: len(data) // 3])
    # WHEN analysed
    rc = main(["analyze", str(traces), "--out", str(tmp_path / "out"), "--format", "json"])
    # THEN exit 1, and the last warning names the file and the cause, and where the rest is
    assert rc == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("profstack: warning: partial results: rank-1.json: ")
    assert "see summary.json errors" not in last


def test_the_cause_counts_the_others_and_says_where_they_are() -> None:
    summary = {
        "errors": [
            {
                "source": "a.json",
                "error_type": "TruncatedTraceError",
                "message": "a.json: truncated at 10",
                "fatal": False,
            },
            {"source": "b.json", "error_type": "CorruptGzipError", "message": "corrupt gzip", "fatal": True},
        ]
    }
    assert partial_cause(summary, [Path("out/summary.json")]) == (
        "a.json: truncated at 10 (TruncatedTraceError); 1 more in out/summary.json errors[]"
    )
    assert partial_cause({"errors": [], "inputs": [{"name": "c.json", "status": "partial"}]}) == "c.json: partial"
