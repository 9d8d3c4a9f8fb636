"""The benchmark trace generator writes valid Kineto traces of the requested size."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bench.generate import DEFAULT_SOURCE, MB, generate, load_source


def test_generates_parseable_trace_of_requested_size_with_fresh_ids(tmp_path: Path) -> None:
    # GIVEN the real ns-resolution trace as source and a 20 MB target (more than one copy of it)
    out = tmp_path / "trace.json"

    # WHEN generating, with a gzip copy
    size = generate(out, 20, gzip_copy=True)

    # THEN the file is within one event of the target and parses as a Kineto trace
    assert 20 * MB <= size < 20 * MB + 20_000
    trace = json.loads(out.read_text())
    assert trace["distributedInfo"]["rank"] == 0
    events = trace["traceEvents"]
    # AND replicated steps are renumbered, kernels keep unique correlation ids, and copies do not overlap
    steps = [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert len(steps) == len(set(steps)) > 5
    kernels = [e for e in events if e.get("cat") == "kernel"]
    correlations = [k["args"]["correlation"] for k in kernels]
    assert len(correlations) == len(set(correlations))
    runtime_corr = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    assert set(correlations) <= runtime_corr
    metadata = [e for e in events if e.get("ph") == "M"]
    assert len(metadata) == len(load_source(DEFAULT_SOURCE).metadata)  # emitted once, not per copy
    # AND the gzip copy decompresses to the same bytes
    assert gzip.decompress((tmp_path / "trace.json.gz").read_bytes()) == out.read_bytes()


def test_small_target_cuts_inside_the_first_copy(tmp_path: Path) -> None:
    # GIVEN a 2 MB target, smaller than the 15 MB source
    out = tmp_path / "small.json"

    # WHEN generating
    size = generate(out, 2)

    # THEN a valid trace of about 2 MB comes out
    assert 2 * MB <= size < 2 * MB + 20_000
    assert len(json.loads(out.read_text())["traceEvents"]) > 1000


def test_without_shapes_the_same_events_lose_only_the_shape_args(tmp_path: Path) -> None:
    from bench.generate import SHAPE_KEYS, SHAPES_SOURCE

    # GIVEN the record_shapes source, generated with and without the shape args, the same number of events
    with_shapes, without = tmp_path / "with.json", tmp_path / "without.json"
    generate(with_shapes, 2, SHAPES_SOURCE)
    n = len(json.loads(with_shapes.read_text())["traceEvents"]) - len(load_source(SHAPES_SOURCE).metadata)
    generate(without, 0, SHAPES_SOURCE, shapes=False, max_events=n)
    a, b = json.loads(with_shapes.read_text()), json.loads(without.read_text())
    # THEN the second has the same events, without any shape arg, and a header that says record_shapes was off
    assert len(a["traceEvents"]) == len(b["traceEvents"])
    assert (a["record_shapes"], b["record_shapes"]) == (1, 0)
    shaped = 0
    for x, y in zip(a["traceEvents"], b["traceEvents"], strict=True):
        stripped = x
        if "args" in x:
            shaped += any(k in x["args"] for k in SHAPE_KEYS)
            stripped = {**x, "args": {k: v for k, v in x["args"].items() if k not in SHAPE_KEYS}}
        assert stripped == y
    assert shaped > 100
