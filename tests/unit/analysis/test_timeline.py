"""The trimmed timeline (profstack.analysis.trim): a step window with every event kind, GPU rows first under
a cap, no partial overlaps on a track, and rank metadata HTA and Perfetto read."""

from __future__ import annotations

import collections
import gzip
import io
import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisOptionsError, BytesTraceSource, FileTraceSource, StepWindowError
from profstack.analysis.trim import StepInfo, choose_window, parse_window, trim_timeline
from tests.unit.analysis.conftest import all_trace_files

GPU_OP_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "async"}
RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
HTA_PYTHON = Path("/tmp/hta05/bin/python")  # HolisticTraceAnalysis==0.5.0 from requirements/bench.txt
HTA_RANK_RE = re.compile(r'"rank":\s+(\d+)')  # hta/common/trace_file.py (0.5.0), create_rank_to_trace_dict


def _load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    doc: dict[str, Any] = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc


def _trim(path: Path, **kw: Any) -> tuple[dict[str, Any], bytes, Any]:
    out = io.BytesIO()
    kw.setdefault("max_events", 1_000_000)
    report = trim_timeline(FileTraceSource(path), out, **kw)
    return json.loads(out.getvalue()), out.getvalue(), report


def partial_overlaps(events: list[dict[str, Any]]) -> int:
    """Complete events on one (pid, tid) track that overlap another without nesting inside it."""
    tracks: dict[tuple[Any, Any], list[tuple[float, float]]] = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and isinstance(e.get("ts"), int | float):
            tracks[(e.get("pid"), e.get("tid"))].append((e["ts"], e["ts"] + max(e.get("dur", 0), 0)))
    bad = 0
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for ts, end in spans:
            while stack and stack[-1] <= ts:
                stack.pop()
            if stack and end > stack[-1]:
                bad += 1
            else:
                stack.append(end)
    return bad


def _with_kernels() -> list[Path]:
    out = []
    for p in all_trace_files():
        evs = _load(p)["traceEvents"]
        if any(e.get("cat") in KERNEL_CATS for e in evs):
            out.append(p)
    return out


TRACES_WITH_KERNELS = _with_kernels()


@pytest.mark.slow
@pytest.mark.parametrize("path", TRACES_WITH_KERNELS, ids=lambda p: p.parent.name + "/" + p.name[:30])
def test_default_window_keeps_kernels_their_launches_and_flows(path: Path) -> None:
    # GIVEN a real trace with kernels WHEN its default (representative) timeline is written
    doc, _, report = _trim(path)
    events = doc["traceEvents"]
    source = _load(path)["traceEvents"]
    # THEN it has kernels, and each kept GPU op with a correlation id has its launch in the file
    kernels = [e for e in events if e.get("cat") in KERNEL_CATS]
    assert kernels, report.describe()
    ops = [e for e in events if e.get("cat") in GPU_OP_CATS and (e.get("args") or {}).get("correlation") is not None]
    launch_ids = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in RUNTIME_CATS and (e.get("args") or {}).get("correlation") is not None
    }
    source_launch_ids = {
        e["args"]["correlation"]
        for e in source
        if e.get("cat") in RUNTIME_CATS and (e.get("args") or {}).get("correlation") is not None
    }
    linkable = [o for o in ops if o["args"]["correlation"] in source_launch_ids]
    assert all(o["args"]["correlation"] in launch_ids for o in linkable)
    # ... and the launch flows of the source link them (where the source has flows at all)
    if any(e.get("cat") in FLOW_CATS for e in source):
        flow_ids = {e.get("id") for e in events if e.get("cat") in FLOW_CATS and e.get("ph") in ("s", "f")}
        assert flow_ids & {o["args"]["correlation"] for o in ops}
    # ... the events lie in the window (or are linked to it) and the kept steps are the chosen ones
    steps = {int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    if report.steps:
        assert set(report.steps) <= steps
    assert not report.dropped_total


@pytest.mark.slow
@pytest.mark.parametrize("path", all_trace_files(), ids=lambda p: p.parent.name + "/" + p.name[:30])
def test_no_two_complete_events_on_a_track_overlap_unless_nested(path: Path) -> None:
    # GIVEN any sample trace (several have overlapping kernels or ops on one track)
    doc, _, report = _trim(path, window="all")
    # THEN Perfetto can show every complete event: none overlaps another on its track without nesting
    assert partial_overlaps(doc["traceEvents"]) == 0
    assert report.unresolved_overlaps == 0
    # AND nothing was lost on the way: every timed event of the source is there once
    source = [e for e in _load(path)["traceEvents"] if e.get("ph") != "M" and e.get("ts") is not None]
    timed = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    assert len(timed) == len(source)


def test_overlapping_kernels_move_to_a_named_sibling_track(traces_dir: Path) -> None:
    # GIVEN the CUDA-graph trace, whose stream 7 holds kernels that overlap each other
    path = traces_dir / "hta/trace_diff/test/test.json.gz"
    assert partial_overlaps(_load(path)["traceEvents"]) > 0
    doc, _, report = _trim(path, window="all")
    # THEN the overlapping kernels sit on a sibling tid, named after the stream, args.stream unchanged
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    src_tids = {(e.get("pid"), e.get("tid")) for e in _load(path)["traceEvents"]}
    moved = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and (e["pid"], e["tid"]) not in src_tids]
    assert moved
    assert report.moved_to_overlap_tracks >= len(moved)
    assert all(e["args"]["stream"] != e["tid"] for e in moved)
    assert all("(overlap" in names[(e["pid"], e["tid"])] for e in moved)


def test_a_cap_drops_cpu_detail_before_gpu_rows_and_says_so(traces_dir: Path) -> None:
    # GIVEN the case: two CUDA-graph steps under a 5,000-event cap (Kineto writes CPU ops first)
    path = traces_dir / "hta/trace_diff/test/test.json.gz"
    doc, _, report = _trim(path, window=(1010, 1011), max_events=5000)
    events = doc["traceEvents"]
    cats = collections.Counter(e.get("cat") for e in events if e.get("ph") != "M")
    # THEN at most 5,000 events, GPU rows and their flows among them, CPU ops dropped first
    assert sum(cats.values()) <= 5000
    assert cats["kernel"] > 0
    assert cats["async_cpu_to_gpu"] > 0
    assert cats["cpu_op"] == 0
    assert report.dropped["cpu"] > 0
    # AND the file and the report say what the cap dropped
    meta = doc["profstack"]["timeline"]
    assert meta["dropped"]["cpu"] == report.dropped["cpu"]
    assert meta["max_events"] == 5000
    assert "cap dropped" in report.describe()
    assert "cpu" in report.describe()


def test_a_roomy_cap_keeps_every_kind_on_every_thread_and_stream(traces_dir: Path) -> None:
    # GIVEN the same steps with the default cap
    path = traces_dir / "hta/trace_diff/test/test.json.gz"
    doc, _, report = _trim(path, window=(1010, 1011))
    cats = {e.get("cat") for e in doc["traceEvents"]}
    # THEN CPU ops, annotations, runtime calls, kernels, memcpy, memset and flows are all there
    assert {"cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"} <= cats
    assert "async_cpu_to_gpu" in cats
    assert report.dropped_total == 0
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    src_tracks = {(e.get("pid"), e.get("tid")) for e in _load(path)["traceEvents"] if e.get("ph") == "X"}
    out_tracks = {(e.get("pid"), e.get("tid")) for e in doc["traceEvents"] if e.get("ph") == "X"}
    siblings = out_tracks - src_tracks
    assert all(" (overlap " in names[t] or " (python" in names[t] for t in siblings)
    assert out_tracks - siblings == src_tracks  # every thread and stream of the trace is in the window


def test_launches_before_the_window_are_kept_with_their_kernels(traces_dir: Path) -> None:
    # GIVEN a window starting at a step boundary (kernels of the window launched in the previous step)
    path = traces_dir / "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    doc, _, _ = _trim(path, window=(103, 103))
    step = next(
        e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#103" and e.get("cat") != "gpu_user_annotation"
    )
    lo = step["ts"]
    launches = {
        e["args"]["correlation"]: e
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})
    }
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    # THEN a kernel in the window whose launch started before it still has that launch
    early = [
        k for k in kernels if k["args"]["correlation"] in launches and launches[k["args"]["correlation"]]["ts"] < lo
    ]
    assert early
    assert all(k["args"]["correlation"] in launches for k in kernels)


# ------------------------------------------------------------------------------------------ rank metadata


def _hta_rank(data: bytes) -> int | None:
    """Exactly what HTA 0.5.0 does: the first line matching its pattern gives the rank."""
    for line in data.decode().splitlines(keepends=True):
        m = HTA_RANK_RE.search(line)
        if m:
            return int(m.group(1))
    return None


@pytest.mark.parametrize(
    ("rel", "rank"),
    [("hta/trace_filter/sampled_rank-1.json.gz", 1), ("hta/trace_diff/test/test.json.gz", 1),
     ("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 34)],
)  # fmt: skip
def test_rank_metadata_has_the_bytes_hta_needs(traces_dir: Path, rel: str, rank: int) -> None:
    # GIVEN a trace whose distributedInfo names its rank
    doc, data, report = _trim(traces_dir / rel)
    # THEN the second line is distributedInfo with '"rank": N' (HTA's regex wants the space), before any event
    assert data.split(b"\n")[1].startswith(b'  "distributedInfo": {"rank": ' + str(rank).encode())
    assert _hta_rank(data) == rank == doc["distributedInfo"]["rank"] == report.rank
    # AND Perfetto's process names carry the rank
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"]
    assert names
    assert all(n.startswith(f"rank {rank}") for n in names)


def test_rank_is_written_for_a_trace_without_distributed_info(traces_dir: Path) -> None:
    # GIVEN a CPU trace without distributedInfo, trimmed as rank 3
    path = traces_dir / "own/cpu_train_loop_rank0.pt.trace.json"
    assert "distributedInfo" not in _load(path)
    doc, data, _ = _trim(path, rank=3)
    # THEN it gets {"rank": 3}
    assert _hta_rank(data) == 3
    assert doc["distributedInfo"] == {"rank": 3}


def test_hta_0_5_0_loads_the_trimmed_file_as_its_rank(traces_dir: Path, tmp_path: Path) -> None:
    # GIVEN HTA 0.5.0 in its own venv (/tmp/hta05, from requirements/bench.txt); without it, the exact bytes
    # its rank regex needs are checked above (test_rank_metadata_has_the_bytes_hta_needs)
    if not HTA_PYTHON.exists():
        pytest.skip("HTA 0.5.0 venv /tmp/hta05 absent; the metadata-bytes test covers its rank regex")
    folder = tmp_path / "trimmed"
    folder.mkdir()
    for rel, name in (
        ("hta/trace_filter/sampled_rank-1.json.gz", "a.json.gz"),
        ("hta/trace_diff/test/test.json.gz", "b.json.gz"),
    ):
        with (folder / name).open("wb") as fh:
            trim_timeline(FileTraceSource(traces_dir / rel), fh, max_events=1_000_000, compress=True)
        # WHEN HTA loads each trimmed file alone
        one = tmp_path / name.split(".")[0]
        one.mkdir()
        shutil.copy(folder / name, one / name)
        script = textwrap.dedent(
            f"""
            import json
            from hta.trace_analysis import TraceAnalysis
            a = TraceAnalysis(trace_dir={str(one)!r})
            ranks = sorted(a.t.traces.keys())
            df = a.t.get_trace(ranks[0])
            names = a.t.symbol_table.get_sym_table()
            kernels = int(df["stream"].ge(0).sum())
            print("RESULT " + json.dumps({{"ranks": ranks, "kernels": kernels}}))
            """
        )
        proc = subprocess.run([str(HTA_PYTHON), "-c", script], capture_output=True, text=True, timeout=300, check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        assert line is not None, proc.stderr[-2000:]
        result = json.loads(line[len("RESULT ") :])
        # THEN it is rank 1 with GPU ops on streams
        assert result["ranks"] == [1]
        assert result["kernels"] > 0


# ------------------------------------------------------------------------------------------ window choice


def _steps(durs: list[float]) -> list[StepInfo]:
    out, t = [], 0.0
    for i, d in enumerate(durs):
        out.append(StepInfo(10 + i, t, t + d))
        t += d
    return out


def test_median_window_is_the_median_step_with_neighbours_plus_the_slowest() -> None:
    # GIVEN steps 10..16 where #12 is the median length and #16 the slowest
    w = choose_window(_steps([5, 9, 6, 7, 8, 5.5, 30]), "median")
    # THEN the window holds #11-#13 and #16, as two time ranges
    assert w.median_step == 13
    assert w.slowest_step == 16
    assert w.steps == (12, 13, 14, 16)
    assert w.intervals is not None
    assert len(w.intervals) == 2


def test_slowest_range_and_all_windows() -> None:
    steps = _steps([5, 9, 6, 30, 8])
    assert choose_window(steps, "slowest").steps == (12, 13, 14)
    assert choose_window(steps, (10, 11)).steps == (10, 11)
    assert choose_window(steps, "all").intervals is None
    assert choose_window([], "median").intervals is None  # no steps: the whole trace
    with pytest.raises(StepWindowError):
        choose_window(steps, (50, 60))


@pytest.mark.parametrize("text", ["median", "slowest", "all", "5:7", "5", " MEDIAN "])
def test_parse_window_accepts_modes_and_ranges(text: str) -> None:
    assert parse_window(text) in ("median", "slowest", "all", (5, 7), (5, 5))


@pytest.mark.parametrize("text", ["fastest", "7:5", "a:b", "1:2:3", ""])
def test_parse_window_rejects_others_in_one_line(text: str) -> None:
    with pytest.raises(AnalysisOptionsError) as info:
        parse_window(text)
    assert "\n" not in str(info.value)


def test_truncated_input_still_gives_a_valid_file(traces_dir: Path) -> None:
    # GIVEN the first half of a trace
    data = gzip.decompress((traces_dir / "hta/trace_filter/sampled_rank-0.json.gz").read_bytes())
    out = io.BytesIO()
    report = trim_timeline(BytesTraceSource(data[: len(data) // 2], name="half.json"), out, max_events=None)
    # THEN the output parses and says the input was truncated
    doc = json.loads(out.getvalue())
    assert doc["traceEvents"]
    assert report.truncated_input
    assert doc["profstack"]["timeline"]["truncated_input"]
