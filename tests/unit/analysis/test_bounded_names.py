"""Hostile names stay bounded (issue 11, item 3): long names are cut with a hash, strings longer than
MAX_STRING_BYTES are cut in the byte stream before the JSON splitter buffers them, and names beyond the
per-file limit fold into one "other" row, with a warning, and the summary marked incomplete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import BytesTraceSource, analyze
from profstack.analysis import parse as parse_module
from profstack.analysis.jsonstream import EventStream, raw_events
from profstack.analysis.parse import MAX_NAME_CHARS, MAX_STRING_BYTES, _LongStrings, bounded_name
from tests.unit.analysis.hostile_traces import analyse_in_child, distinct_kernel_names, one_huge_name

PEAK_RSS_LIMIT_MB = 300


@given(seed=st.text(min_size=1, max_size=20), a=st.text(), b=st.text())
@settings(max_examples=50)
def test_long_names_are_cut_to_a_fixed_length_and_stay_distinct(seed: str, a: str, b: str) -> None:
    # GIVEN two names longer than the limit that differ only after it
    prefix = (seed * MAX_NAME_CHARS)[:MAX_NAME_CHARS]
    x, y = prefix + "x" + a, prefix + "y" + b
    # THEN both are cut to the limit, end in a hash, and stay apart; a short name is kept as it is
    assert len(bounded_name(x)) == MAX_NAME_CHARS
    assert bounded_name(x) != bounded_name(y)
    assert bounded_name(x) == bounded_name(x)
    assert bounded_name(x).startswith(prefix[:100])
    assert bounded_name("aten::mm") == "aten::mm"


_pieces = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.sampled_from(['"', "\\", "\\u", "é", "\u20ac", "\U0001f600", "\n", "\\\\\\"]),
)
_strings = st.lists(_pieces, max_size=8).map("".join)
_long = st.tuples(_strings, st.integers(min_value=MAX_STRING_BYTES - 8, max_value=3 * MAX_STRING_BYTES), _strings)


@given(
    items=st.lists(st.one_of(_strings, _long), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=1, max_value=4 * MAX_STRING_BYTES), max_size=8),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_stream_filter_cuts_only_long_strings_and_keeps_valid_json(items: list[Any], cuts: list[int]) -> None:
    # GIVEN JSON with short strings (escapes, quotes, non-ASCII) and long ones, split into arbitrary chunks
    values = [s if isinstance(s, str) else s[0] + "A" * s[1] + s[2] for s in items]
    data = json.dumps({"traceEvents": [{"name": v, "args": {"k": v}} for v in values]}, ensure_ascii=False).encode()
    chunks, pos = [], 0
    for size in cuts:
        chunks.append(data[pos : pos + size])
        pos += size
    chunks.append(data[pos:])
    # WHEN filtered
    out = b"".join(_LongStrings().filter(iter(c for c in chunks if c)))
    # THEN it is still valid JSON with the same shape
    decoded = json.loads(out)
    got = [e["name"] for e in decoded["traceEvents"]]
    assert len(got) == len(values)
    for original, kept in zip(values, got, strict=True):
        encoded = len(json.dumps(original, ensure_ascii=False).encode()) - 2
        if encoded < MAX_STRING_BYTES:
            assert kept == original  # short strings pass byte for byte
        else:
            assert " [cut: +" in kept
            assert len(kept.encode()) <= MAX_STRING_BYTES + 64
    # AND distinct long strings stay distinct
    long_pairs = {(o, k) for o, k in zip(values, got, strict=True) if " [cut: +" in k}
    assert len({o for o, _ in long_pairs}) == len({k for _, k in long_pairs})


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    chunks, pos = [], 0
    for size in cuts:
        chunks.append(data[pos : pos + size])
        pos += size
    chunks.append(data[pos:])
    return [c for c in chunks if c]


def _events_through(chunks: list[bytes], *, resolve: bool) -> tuple[list[bytes], int]:
    """The raw events an EventStream splits from the filtered chunks, with the filter wired as the parse
    wires it (``resolve``) or counting quotes on its own."""
    strings = _LongStrings()
    stream = EventStream(strings.filter(iter(chunks)), max_value_bytes=1 << 30, read_size_hint=1 << 12)
    if resolve:
        strings.resolve = stream.unparsed
    return list(raw_events(stream)), strings.strings_cut


@given(
    items=st.lists(st.one_of(_strings, _long), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=4 * MAX_STRING_BYTES), max_size=10),
    pad=st.integers(min_value=0, max_value=3 * MAX_STRING_BYTES),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_filter_wired_to_the_splitter_cuts_exactly_what_the_counting_filter_cuts(
    items: list[Any], cuts: list[int], pad: int
) -> None:
    # GIVEN events with short strings (escapes, quotes) and long ones, after quote-dense padding that
    # passes the filter's fast path, split into arbitrary chunks
    values = [s if isinstance(s, str) else s[0] + "A" * s[1] + s[2] for s in items]
    padding = [{"name": "k", "ts": i} for i in range(pad // 16)]
    doc = {"traceEvents": [*padding, *({"name": v, "args": {"k": v}} for v in values), *padding]}
    chunks = _split(json.dumps(doc, ensure_ascii=False).encode(), cuts)
    # WHEN filtered into the splitter, with the state recovered from the splitter's unparsed bytes
    got, cut = _events_through(chunks, resolve=True)
    # THEN the events (and the strings cut) are those of the filter that counts every quote
    want, want_cut = _events_through(chunks, resolve=False)
    assert got == want
    assert cut == want_cut
    assert [json.loads(e) for e in got] == [json.loads(e) for e in want]


def test_a_long_string_opened_in_a_fast_chunk_is_cut_in_the_next_exact_one() -> None:
    # GIVEN a long string that starts at the end of a backslash-free chunk and goes on, escapes included,
    # in the next chunk
    head = json.dumps({"traceEvents": [{"name": "k", "ts": i} for i in range(2000)]})[:-2] + ', {"name": "'
    body = "A" * 100 + "\\n" + "B" * (2 * MAX_STRING_BYTES) + '"}]}'
    chunks = [head.encode(), body.encode()]
    # WHEN filtered into the splitter
    got, cut = _events_through(chunks, resolve=True)
    # THEN the string is cut like the counting filter cuts it, and the JSON stays valid
    assert (got, cut) == _events_through(chunks, resolve=False)
    assert cut == 1
    assert " [cut: +" in json.loads(got[-1])["name"]
    assert len(got) == 2001


def _kernel_trace(names: list[str]) -> bytes:
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1e7}
    events: list[dict[str, Any]] = [step]
    for i, name in enumerate(names):
        ts, corr = 10 + 10 * i, {"correlation": i + 1}
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1, "args": corr})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": ts + 2, "dur": 4, "args": {"stream": 7, **corr}})
    return json.dumps({"traceEvents": events}).encode()


def test_names_beyond_the_per_file_limit_fold_into_one_other_row_per_kernel_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN 300 distinct compute kernels and 100 distinct NCCL kernels, and a per-file limit of 50 names
    names = [f"gemm_{i}" for i in range(300)] + [f"ncclKernel_AllReduce_{i}" for i in range(100)]
    data = _kernel_trace(names)
    full = analyze([BytesTraceSource(data, name="rank0.json")]).summary
    monkeypatch.setattr(parse_module, "MAX_NAMES_PER_FILE", 50)
    # WHEN analysed
    result = analyze([BytesTraceSource(data, name="rank0.json")])
    summary = result.summary
    # THEN the result is marked incomplete, with a warning that counts what was folded
    assert summary["complete"] is False
    assert full["complete"] is True
    (warning,) = [w for w in summary["warnings"] if w["error_type"] == "NamesFoldedError"]
    assert "folded into one 'other' row" in warning["message"]
    # 401 names reach the symbol table (400 kernels + cudaLaunchKernel): 50 kept, 351 folded
    assert "(351 events)" in warning["message"]
    # AND the input itself was read completely (not a truncated file)
    assert [i["status"] for i in summary["inputs"]] == ["ok"]
    rank, full_rank = summary["ranks"][0], full["ranks"][0]
    # AND totals, the compute/communication split and the kernel count are unchanged
    assert rank["temporal_breakdown"] == full_rank["temporal_breakdown"]
    assert rank["communication"]["comm_time_us"] == full_rank["communication"]["comm_time_us"]
    top = {k["name"]: k for k in rank["top_kernels_by_count"]}
    other_compute = top["[other kernels beyond ProfStack's per-file name limit]"]
    other_comm = top["ncclKernel [other communication kernels beyond ProfStack's per-file name limit]"]
    assert other_comm["kernel_type"] == "COMMUNICATION"
    assert other_compute["count"] + other_comm["count"] == 351
    assert other_comm["count"] == 100


@pytest.mark.slow
def test_a_million_distinct_kernel_names_stay_bounded(tmp_path: Path) -> None:
    # GIVEN a .json.gz with 1,000,000 distinct kernel names (written streaming, never held)
    path = distinct_kernel_names(tmp_path / "names.pt.trace.json.gz", 1_000_000)
    # WHEN analysed in a fresh process
    found = analyse_in_child(path)
    # THEN peak memory stays under the limit and the summary and report stay small
    assert found["peak_rss_mb"] < PEAK_RSS_LIMIT_MB, found["peak_rss_mb"]
    assert found["summary_bytes"] < 1 << 20
    assert found["report_bytes"] < 2 << 20
    summary = found["summary"]
    # AND every kernel still counts, the excess folded into one row, and the result says it is incomplete
    assert summary["complete"] is False
    assert any(w["error_type"] == "NamesFoldedError" for w in summary["warnings"])
    rank = summary["ranks"][0]
    assert sum(k["count"] for k in rank["top_kernels_by_count"]) >= 1_000_000 - parse_module.MAX_NAMES_PER_FILE
    print(f"1M distinct names: {found['peak_rss_mb']:.0f} MB peak RSS, {found['seconds']:.1f} s")


@pytest.mark.slow
def test_one_200_mb_name_in_a_small_gzip_stays_bounded(tmp_path: Path) -> None:
    # GIVEN a ~0.2 MB .json.gz holding one 200 MB kernel name between ordinary kernels
    path = one_huge_name(tmp_path / "huge.pt.trace.json.gz", 200 << 20, after=1000)
    assert path.stat().st_size < 1 << 20
    # WHEN analysed and trimmed into a timeline in a fresh process (the pipeline's two passes)
    found = analyse_in_child(path)
    # THEN memory, summary, report and timeline stay bounded
    assert found["peak_rss_mb"] < PEAK_RSS_LIMIT_MB, found["peak_rss_mb"]
    assert found["summary_bytes"] < 1 << 20
    assert found["report_bytes"] < 2 << 20
    assert found["timeline_bytes"] < 1 << 20
    summary = found["summary"]
    kernels = {k["name"]: k for k in summary["ranks"][0]["top_kernels_by_count"]}
    # AND the events after the huge one still count, and the huge name is kept shortened, hashed
    assert kernels["after"]["count"] == 1000
    assert kernels["before"]["count"] == 10
    (huge,) = [k for k in kernels if k.startswith("huge_")]
    assert len(huge) <= MAX_NAME_CHARS
    assert "#" in huge[-20:]
    # AND the shortening is said, without marking the result incomplete (nothing was lost)
    assert any(w["error_type"] == "LongNamesError" for w in summary["warnings"])
    assert summary["complete"] is True
    print(f"200 MB name: {found['peak_rss_mb']:.0f} MB peak RSS, {found['seconds']:.1f} s")
