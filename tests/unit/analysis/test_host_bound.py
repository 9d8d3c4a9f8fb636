"""The host-side span columns (sync calls, GPU-side syncs, annotations, DataLoader spans) grow with the file;
beyond ``parse.HOST_SPAN_BUDGET_BYTES`` the rows of later batches are left out, counted and warned of, so that a
file's memory stays bounded at any size."""

from __future__ import annotations

import json
from typing import Any

import pytest

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, native, parse
from tests.unit.analysis.neutral import engine_neutral

from .synth import busy_steps


def big_trace(n: int) -> bytes:
    """A healthy trace, then ``n`` annotations and ``n`` host syncs inside its analysed steps (several 1 MB
    batches)."""
    tb = busy_steps(n_steps=4)
    for i in range(n):
        t = 100.0 + (i % 2700)
        tb.cpu(f"region_{i % 5}", t, 0.5, cat="user_annotation")
        tb.runtime("cudaDeviceSynchronize", t + 0.5, 0.25)
    return tb.to_bytes()


def run(data: bytes) -> dict[str, Any]:
    result = analyze([BytesTraceSource(data, "rank0.pt.trace.json")], AnalysisOptions(top_k=10))
    return json.loads(json.dumps(engine_neutral(result.summary)))


def cut_messages(s: dict[str, Any]) -> list[str]:
    return [e["message"] for e in s["errors"] + s["warnings"] if e["error_type"] == "HostSpansCutError"]


def annotation_count(s: dict[str, Any]) -> int:
    return sum(a["count"] for a in s["ranks"][0]["annotations"]["cpu"])


DATA = big_trace(12_000)


def test_within_the_budget_nothing_is_cut() -> None:
    # GIVEN a trace of 12,000 annotations and syncs, WHEN analysed with the default bound
    s = run(DATA)
    # THEN every row counts and there is no warning
    assert len(DATA) > 2 << 20
    assert cut_messages(s) == []
    assert annotation_count(s) == 12_000
    assert s["complete"]


@pytest.mark.parametrize("accel", ["C", "Python"])
def test_beyond_the_budget_later_rows_are_left_out_with_a_warning(accel: str) -> None:
    # GIVEN a bound the first batch already passes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parse, "HOST_SPAN_BUDGET_BYTES", 1000)
        if accel == "Python":
            mp.setattr(native, "ACCEL", None)
        # WHEN analysed (by the C reader or the Python loop)
        s = run(DATA)
    # THEN the rows of later batches are left out and counted, the warning says what, and the result is partial
    kept = annotation_count(s)
    assert 0 < kept < 12_000
    (msg,) = cut_messages(s)
    assert f"{12_000 - kept:,} annotations" in msg
    assert "sync calls" in msg
    assert s["complete"] is False


def test_the_columns_kept_are_bounded_whatever_the_file_holds() -> None:
    # GIVEN a bound of 50 KB
    seen: list[int] = []
    real = parse._HostBound.after_batch

    def spy(self: parse._HostBound, fd: parse.FileData) -> None:
        real(self, fd)
        seen.append(sum(len(getattr(fd, c)) * getattr(fd, c).itemsize for _, cols in parse.HOST_COLUMNS for c in cols))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parse, "HOST_SPAN_BUDGET_BYTES", 50_000)
        mp.setattr(parse._HostBound, "after_batch", spy)
        # WHEN files of 40,000 and 80,000 rows of each kind (1.6 and 3.3 MB of columns) are analysed
        for n in (40_000, 80_000):
            seen.clear()
            run(big_trace(n))
            # THEN the columns grow until they pass the bound, by one batch's rows (~19,000 events), and no more
            first = next(k for k, used in enumerate(seen) if used > 50_000)
            assert len(seen) > first + 3
            assert set(seen[first:]) == {seen[first]}
            assert seen[first] < 50_000 + 19_100 * 41
