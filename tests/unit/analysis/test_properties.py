"""Property-based tests (hypothesis) of the streaming parser and the interval arithmetic."""

from __future__ import annotations

import itertools
import json
import struct
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, BytesTraceSource, analyze, native
from profstack.analysis.errors import NOT_RECORDED
from profstack.analysis.intervals import intersection_length, merge, merge_columns, partition_by_set, total
from profstack.analysis.jsonstream import EventStream
from profstack.analysis.stats import histogram, sorted_histogram_counts

# ---------------------------------------------------------------- intervals vs brute force


int_intervals = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (float(t[0]), float(t[0] + t[1]))), max_size=25
)


def cells(ivs: list[tuple[float, float]]) -> set[int]:
    return {x for s, e in ivs for x in range(int(s), int(e))}


@given(int_intervals)
def test_union_length_matches_brute_force(ivs: list[tuple[float, float]]) -> None:
    merged = merge(ivs)
    assert total(merged) == len(cells(ivs))
    # merged intervals are sorted and disjoint
    assert all(a[1] < b[0] for a, b in itertools.pairwise(list(merged)))


ANY_FLOATS = st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 1.0, 1e15, -3.5]))


@settings(max_examples=300)
@given(st.lists(st.tuples(ANY_FLOATS, ANY_FLOATS), max_size=40), st.sampled_from(["C", "Python"]))
def test_merge_of_two_columns_is_merge_of_their_intervals(pairs: list[tuple[float, float]], loop: str) -> None:
    # GIVEN start and duration columns of any floats (NaN, infinities, -0.0 and negative durations among them)
    starts, durs = array("d", (p[0] for p in pairs)), array("d", (p[1] for p in pairs))
    with pytest.MonkeyPatch.context() as mp:
        if loop == "Python":
            mp.setattr(native, "ACCEL", None)
        # WHEN merged from the columns, in C (union_spans) or in Python
        got = merge_columns(starts, durs)
    # THEN the intervals are those merge finds from their tuples, bit for bit
    want = merge((s, s + d) for s, d in zip(starts, durs, strict=True))
    assert [struct.pack("<dd", *iv) for iv in got] == [struct.pack("<dd", *iv) for iv in want]


@given(int_intervals, int_intervals)
def test_intersection_matches_brute_force(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> None:
    assert intersection_length(merge(a), merge(b)) == len(cells(a) & cells(b))


@given(st.lists(int_intervals, min_size=1, max_size=3))
def test_partition_by_set_matches_brute_force(groups: list[list[tuple[float, float]]]) -> None:
    parts = partition_by_set([merge(g) for g in groups])
    sets = [cells(g) for g in groups]
    expected: dict[int, int] = {}
    for x in set().union(*sets):
        mask = sum(1 << i for i, s in enumerate(sets) if x in s)
        expected[mask] = expected.get(mask, 0) + 1
    assert {k: v for k, v in parts.items() if v} == {k: float(v) for k, v in expected.items()}


@given(st.lists(st.floats(-1e7, 1e7, allow_nan=False), max_size=60))
def test_sorted_histogram_counts_match_the_per_value_histogram(values: list[float]) -> None:
    # GIVEN any values WHEN counted sorted (one bisect per edge) THEN the buckets equal histogram()'s
    assert sorted_histogram_counts(sorted(values)) == histogram(values)["counts"]


# ---------------------------------------------------------------- generated traces

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def traces(draw: st.DrawFn, max_steps: int = 3, max_launches: int = 6) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    t = 0
    for step in range(draw(st.integers(1, max_steps))):
        start = t
        for _ in range(draw(st.integers(0, max_launches))):
            corr = len(events) + 1
            name = draw(names)
            stream = draw(st.sampled_from([7, 20]))
            lt = t + draw(st.integers(0, 5))
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": lt, "dur": 3, "args": {"correlation": corr, "cbid": 211}})  # fmt: skip
            kts = lt + draw(st.integers(3, 40))
            events.append({"ph": "X", "cat": draw(st.sampled_from(["kernel", "gpu_memcpy", "Kernel"])),
                           "name": draw(st.sampled_from(["ncclKernel_x", "Memcpy HtoD (Pinned -> Device)", name])),
                           "pid": 0, "tid": stream, "ts": kts, "dur": draw(st.integers(0, 30)),
                           "args": {"stream": stream, "correlation": corr, "bytes": 64}})  # fmt: skip
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": lt, "dur": 2})
            t = lt + 4
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": start, "dur": max(t - start, 1)})  # fmt: skip
        events.append({"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": start, "cat": "ac2g", "name": "ac2g"})
        # its finish: a flow start without one is a launch whose GPU row is missing (FlowsToNowhereError, #34)
        events.append({"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": start, "cat": "ac2g", "name": "ac2g", "bp": "e"})
        t += draw(st.integers(1, 50))
    return events


def kineto_layout(events: list[dict[str, Any]], extra_after: bool) -> bytes:
    """libkineto's own layout: one event per item, separated by '\\n  },\\n  {'."""
    body = ",\n".join(
        "  {\n    " + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in e.items()) + "\n  }" for e in events
    )
    head = '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "GPU"}\n  ],\n'
    tail = ',\n  "INFO": [\n  {"a": 1},\n  {"b": "},{"}\n  ]' if extra_after else ""
    return (head + '  "traceEvents": [\n' + body + "\n  ]" + tail + ',\n  "traceName": "x"\n}').encode()


def minified(events: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"INFO": [{"x": "},{"}], "traceEvents": events, "baseTimeNanoseconds": 0}, separators=(",", ":")
    ).encode()


def pretty(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}, indent=2, ensure_ascii=False).encode()


def rank_summary(data: bytes, validate: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    result = analyze([BytesTraceSource(data, name="t.json")], AnalysisOptions(top_k=50))
    # complete, or read whole and short only of what it did not record (#34: a trace without any launch lists GPUs
    # it never used)
    assert result.complete or all(e.error_type in NOT_RECORDED for e in result.errors), [
        e.message for e in result.errors
    ]
    if validate is not None:
        validate(result.summary)
    rank: dict[str, Any] = result.summary["ranks"][0]
    # the libkineto layout's header lists GPUs (deviceProperties), which a trace without GPU activity is judged by
    # (DevicesWithoutActivityError, #34): completeness may differ, the analysis may not
    omit = ("sources", "device", "distributed", "complete", "completeness")
    return {k: v for k, v in rank.items() if k not in omit}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=traces(), extra_after=st.booleans())
def test_parse_is_layout_independent(
    events: list[dict[str, Any]], extra_after: bool, summary_validator: Callable[[dict[str, Any]], None]
) -> None:
    # GIVEN one trace written in libkineto's layout, minified, and re-serialised with indent=2
    # WHEN each is analysed THEN the rank summaries are identical (and the summary is schema-valid)
    reference = rank_summary(kineto_layout(events, extra_after), summary_validator)
    assert rank_summary(minified(events)) == reference
    assert rank_summary(pretty(events)) == reference


def stream_events(chunks: list[bytes], read_hint: int) -> list[Any]:
    stream = EventStream(iter(chunks), max_value_bytes=1 << 20, read_size_hint=read_hint)
    out: list[Any] = []
    gen: Iterator[memoryview | list[bytes]] = stream.batches()
    for batch in gen:
        if isinstance(batch, memoryview):
            try:
                out.extend(msgspec.json.decode(batch, type=list[dict[str, Any]]))
            except msgspec.DecodeError:
                stream.reject()
        else:
            out.extend(msgspec.json.decode(raw) for raw in batch)
    return out


@settings(max_examples=12, deadline=None)
@given(traces(max_steps=2, max_launches=3), st.sampled_from(["kineto", "minified", "pretty"]), st.integers(1, 64))
def test_every_chunk_boundary_gives_the_same_events(events: list[dict[str, Any]], layout: str, hint: int) -> None:
    # GIVEN a small trace WHEN its bytes are split into two chunks at every offset
    data = {"kineto": kineto_layout(events, True), "minified": minified(events), "pretty": pretty(events)}[layout]
    expected = json.loads(data)["traceEvents"]
    for cut in range(len(data) + 1):
        # THEN the stream yields exactly the original events
        assert stream_events([data[:cut], data[cut:]], hint) == expected, cut


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=40), st.integers(1, 8))
def test_resumable_scanner_matches_one_shot(text: str, step: int) -> None:
    # GIVEN a JSON value holding an arbitrary string (escapes, quotes, backslashes)
    from profstack.analysis.jsonstream import ScanState, scan_value_end

    for value in (json.dumps(text).encode(), json.dumps({"a": [text, {"b": text}]}).encode()):
        full = scan_value_end(value + b" ", 0)
        # WHEN the bytes arrive a few at a time and the scan resumes THEN it ends at the same place
        st = ScanState()
        buf = bytearray()
        end = -1
        for i in range(0, len(value), step):
            buf += value[i : i + step]
            end = scan_value_end(buf + b" ", 0, st) if i + step >= len(value) else scan_value_end(buf, 0, st)
            if end >= 0:
                break
        assert end == full == len(value)


def test_the_header_peek_reads_no_further_than_trace_events() -> None:
    # GIVEN a trace whose metadata comes before a large traceEvents array, fed in 64 KB chunks
    head = b'{"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 4}, "traceEvents": ['
    body = b",".join(b'{"ph": "X", "name": "op", "ts": %d, "dur": 1, "pid": 1, "tid": 1}' % i for i in range(200_000))
    data = head + body + b'], "deviceProperties": []}'
    pulled = 0

    def chunks() -> Iterator[bytes]:
        nonlocal pulled
        for i in range(0, len(data), 1 << 16):
            pulled += 1
            yield data[i : i + (1 << 16)]

    stream = EventStream(chunks(), max_value_bytes=1 << 20)
    # WHEN its header is read THEN the metadata before traceEvents, after one chunk of ~200 (not the 4 MB
    # a first batch would fill), and the keys after the events are not seen
    assert stream.header() == {"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 4}}
    assert stream.saw_trace_events
    assert pulled == 1
