"""gzip is inflated by ISA-L (isal) when it imports, else zlib: same bytes, same summaries, same errors, same budget."""

from __future__ import annotations

import gzip
import io
import json
import zlib

import pytest

from profstack.analysis import (
    AnalysisOptions,
    BytesTraceSource,
    CorruptGzipError,
    DecompressionBombError,
    FileTraceSource,
    TraceError,
    TruncatedTraceError,
    analyze,
    reader,
)
from tests.conftest import TRACES_DIR

isal_zlib = pytest.importorskip("isal.isal_zlib")
ISAL = reader.Inflater("isal", isal_zlib.decompressobj, isal_zlib.IsalError)
BACKENDS = [reader.ZLIB, ISAL]

# ~9 MB of JSON: more than two OUT_SIZE chunks, so member ends fall after a max_length-limited call
EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "op%d", "ts": %d, "dur": 2}'
EVENTS = b",".join(EVENT % (i % 97, i) for i in range(150_000))
PAYLOAD = b'{"traceEvents": [' + EVENTS + b"]}"
PACKED = gzip.compress(PAYLOAD, compresslevel=6, mtime=0)


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> reader.Inflater:
    monkeypatch.setattr(reader, "INFLATER", request.param)
    chosen: reader.Inflater = request.param
    return chosen


def inflate(data: bytes, budget: int = 1 << 30) -> bytes:
    return b"".join(reader.iter_chunks(io.BytesIO(data), max_decompressed=budget))


def outcome(data: bytes, budget: int = 1 << 30) -> tuple[str, str]:
    """('ok', crc of the bytes) or (error type, our message without the library's detail)."""
    try:
        return "ok", f"{zlib.crc32(inflate(data, budget)):08x}"
    except TraceError as exc:
        return type(exc).__name__, str(exc).split(":")[0]


def test_isal_is_the_default_backend_where_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN isal installed WHEN the backend is chosen THEN isal, unless PROFSTACK_INFLATE=zlib forces zlib
    monkeypatch.delenv("PROFSTACK_INFLATE", raising=False)
    assert reader._best_inflater().name == "isal"
    monkeypatch.setenv("PROFSTACK_INFLATE", "zlib")
    assert reader._best_inflater() is reader.ZLIB


def test_zlib_is_the_fallback_when_isal_does_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a platform without isal (the import fails) WHEN the backend is chosen THEN zlib
    import builtins

    real_import = builtins.__import__

    def no_isal(name: str, *args: object, **kwargs: object) -> object:
        if name == "isal" or name.startswith("isal."):
            raise ImportError("no isal here")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.delenv("PROFSTACK_INFLATE", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_isal)
    assert reader._best_inflater() is reader.ZLIB


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(PACKED, id="one member"),
        pytest.param(PACKED + PACKED, id="two members"),
        pytest.param(PACKED + b"\0" * 7 + PACKED, id="zero padding between members"),
        pytest.param(PACKED + b"trailing garbage", id="garbage after the member"),
    ],
)
def test_both_backends_give_the_same_bytes(data: bytes) -> None:
    # GIVEN valid gzip (also concatenated members, whose boundary falls inside a max_length-limited call)
    # WHEN inflated by each backend THEN exactly gzip's bytes
    expected = gzip.decompress(data.replace(b"trailing garbage", b""))
    for backend in BACKENDS:
        reader.INFLATER, saved = backend, reader.INFLATER
        try:
            assert inflate(data) == expected, backend.name
        finally:
            reader.INFLATER = saved


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(PACKED[: len(PACKED) // 2], TruncatedTraceError, id="cut in the middle"),
        pytest.param(PACKED[:-3], TruncatedTraceError, id="cut in the trailer"),
        pytest.param(PACKED[:10], TruncatedTraceError, id="header only"),
        pytest.param(_flip(PACKED, len(PACKED) - 8), CorruptGzipError, id="bad CRC"),
        pytest.param(_flip(PACKED, len(PACKED) - 1), CorruptGzipError, id="bad length"),
        pytest.param(PACKED[:20] + b"\xff" * 64 + PACKED[84:], CorruptGzipError, id="garbage deflate data"),
        pytest.param(PACKED[:2] + b"\x07" + PACKED[3:], CorruptGzipError, id="unknown method"),
    ],
)
def test_broken_gzip_gives_the_same_typed_error_with_both_backends(data: bytes, expected: type[TraceError]) -> None:
    # GIVEN a truncated or corrupt gzip stream WHEN inflated by zlib and by isal
    # THEN the same error type and message (only the library's own detail after the colon may differ)
    got = []
    for backend in BACKENDS:
        reader.INFLATER, saved = backend, reader.INFLATER
        try:
            got.append(outcome(data))
        finally:
            reader.INFLATER = saved
    assert got[0][0] == expected.__name__
    assert got[0][0] == got[1][0]
    # truncation reports the bytes inflated so far: isal may hold back the last few bits of a cut stream
    assert got[0][1].split(" after ")[0] == got[1][1].split(" after ")[0]


def test_the_decompression_budget_holds_with_each_backend(backend: reader.Inflater) -> None:
    # GIVEN a gzip bomb (128 MiB of spaces in ~0.5 MB) and a 32 MiB budget
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (128 << 20) + b"]}", compresslevel=1)
    # WHEN analysed THEN it stops at the budget: fatal DecompressionBombError, no more than the budget inflated
    sizes: list[int] = []

    def drain() -> None:
        sizes.extend(len(c) for c in reader.iter_chunks(io.BytesIO(bomb), max_decompressed=32 << 20))

    with pytest.raises(DecompressionBombError):
        drain()
    assert max(sizes) <= reader.OUT_SIZE  # max_length bounds each step, whatever the backend
    assert sum(sizes) <= 32 << 20
    result = analyze([BytesTraceSource(bomb, name="bomb.json.gz")], AnalysisOptions(max_decompressed_bytes=32 << 20))
    assert result.errors[0].error_type == "DecompressionBombError"
    assert result.errors[0].fatal


def test_truncated_trace_is_partial_with_each_backend(backend: reader.Inflater) -> None:
    # GIVEN a real trace cut in the middle of its gzip stream WHEN analysed
    # THEN the events before the cut are analysed and the file is reported truncated
    data = (TRACES_DIR / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz").read_bytes()
    result = analyze([BytesTraceSource(data[: len(data) // 2], name="rank-0.json.gz")])
    assert not result.complete
    assert result.errors[0].error_type == "TruncatedTraceError"
    assert not result.errors[0].fatal
    assert result.summary["inputs"][0]["events"] > 0


def test_summaries_are_identical_with_and_without_isal(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN every gzip sample trace WHEN analysed with isal and with the zlib fallback THEN the same summary JSON
    files = sorted(p for p in TRACES_DIR.rglob("*.json.gz") if "reference_values" not in p.parts)
    assert len(files) >= 5
    out = {}
    for backend in BACKENDS:
        monkeypatch.setattr(reader, "INFLATER", backend)
        out[backend.name] = [
            json.dumps(analyze([FileTraceSource(p, name=str(p.relative_to(TRACES_DIR)))]).summary) for p in files
        ]
    assert out["isal"] == out["zlib"]


def test_trim_inflates_through_the_same_backend(backend: reader.Inflater) -> None:
    # GIVEN a gzip trace WHEN trimmed with either backend THEN the same events come out
    from profstack.analysis import trim_trace

    out, reference = io.BytesIO(), io.BytesIO()
    trim_trace(BytesTraceSource(PACKED, name="t.json.gz"), out, steps=None, max_events=1000, compress=False)
    # (the reference reads the same trace uncompressed: no inflate at all)
    trim_trace(BytesTraceSource(PAYLOAD, name="t.json.gz"), reference, steps=None, max_events=1000, compress=False)
    events = json.loads(out.getvalue())["traceEvents"]
    assert len([e for e in events if e.get("ph") == "X"]) == 1000
    assert out.getvalue() == reference.getvalue()


def test_compressed_trim_is_plain_gzip_with_each_backend(backend: reader.Inflater) -> None:
    # GIVEN a trace WHEN trimmed with compression (ISA-L level 1 with isal, zlib level 6 without)
    from profstack.analysis import trim_trace

    plain, packed = io.BytesIO(), io.BytesIO()
    src = BytesTraceSource(PACKED, name="t.json.gz")
    trim_trace(src, plain, steps=None, max_events=5000, compress=False)
    trim_trace(src, packed, steps=None, max_events=5000, compress=True)
    # THEN the standard library's gzip reads exactly the uncompressed trim back
    assert gzip.decompress(packed.getvalue()) == plain.getvalue()
