"""trim_trace: a Perfetto-loadable window of steps, streamed."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from profstack.analysis import BytesTraceSource, FileTraceSource, StepWindowError, trim_trace

RANK0 = "hta/trace_filter/sampled_rank-0.json.gz"


def test_trim_keeps_only_the_step_window(traces_dir: Path) -> None:
    # GIVEN a two-step trace WHEN trimmed to its second step
    out = io.BytesIO()
    written = trim_trace(FileTraceSource(traces_dir / RANK0), out, steps=(552, 552), max_events=None)
    doc = json.loads(out.getvalue())
    # THEN it is a Chrome-trace object whose timed events overlap the step, plus metadata events
    events = doc["traceEvents"]
    assert written == len(events)
    step = next(e for e in events if e.get("name") == "ProfilerStep#552")
    lo, hi = step["ts"], step["ts"] + step["dur"]
    timed = [e for e in events if e.get("ph") != "M"]
    assert timed
    assert all(e["ts"] <= hi and e["ts"] + e.get("dur", 0) >= lo for e in timed)
    assert not any(e.get("name") == "ProfilerStep#551" for e in events)
    assert doc["distributedInfo"]["rank"] == 0
    full = json.loads(gzip.decompress((traces_dir / RANK0).read_bytes()))["traceEvents"]
    assert len(timed) < len([e for e in full if e.get("ph") != "M"])


def test_trim_gzip_and_max_events(traces_dir: Path) -> None:
    # GIVEN a cap of 100 events and gzip output
    out = io.BytesIO()
    trim_trace(FileTraceSource(traces_dir / RANK0), out, steps=None, max_events=100, compress=True)
    # THEN the output is gzip JSON with at most 100 non-metadata events
    doc = json.loads(gzip.decompress(out.getvalue()))
    assert len([e for e in doc["traceEvents"] if e.get("ph") != "M"]) == 100


def test_trim_unknown_steps_is_typed() -> None:
    # GIVEN a trace without step 99 WHEN trimming to it THEN StepWindowError with a one-line message
    data = json.dumps({"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1, "dur": 2}]}).encode()
    with pytest.raises(StepWindowError) as info:
        trim_trace(BytesTraceSource(data, name="x.json"), io.BytesIO(), steps=(99, 99), max_events=None)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("x.json")
