"""`profstack analyze` on a FIFO or a device says "not a regular file", not "no such file" (issue 11 item 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profstack.analysis import TraceError, discover_sources


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_a_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.pt.trace.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        discover_sources([fifo])


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_is_not_a_regular_file() -> None:
    with pytest.raises(TraceError, match="not a regular file"):
        discover_sources(["/dev/null"])


def test_a_missing_path_is_still_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        discover_sources([tmp_path / "missing.json"])


def test_the_cli_prints_the_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    fifo = tmp_path / "x.pt.trace.json"
    os.mkfifo(fifo)
    code = main(["analyze", str(fifo), "--out", str(tmp_path / "out")])
    assert code != 0
    err = capsys.readouterr().err
    assert "not a regular file" in err
    assert "no such file" not in err
