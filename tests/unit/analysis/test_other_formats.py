"""Files of other formats found among traces (#34): a PyTorch execution trace beside its Kineto trace, the
Chrome-trace JSON views JAX and XProf write beside an XSpace, and Chrome-trace JSON from another writer. None may
make a run partial by being there, count a run twice, or pass for an empty CPU-only success."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, FileTraceSource, analyze, discover_sources
from profstack.analysis.parse import other_format
from profstack.analysis.sources import discover

from .conftest import TRACES

REPO = Path(__file__).resolve().parents[3]
ET_DIR = TRACES / "hta" / "execution_trace"
ET_FILE = ET_DIR / "benchmark_simple_add_et.json.gz"
ET_TRACE = ET_DIR / "benchmark_simple_add_trace.json.gz"
XSPACE = TRACES / "xplane" / "jax_cpu_mlp" / "plugins" / "profile" / "run" / "host.xplane.pb"


def _chrome_view(path: Path, *, events: int = 50) -> None:
    """A Chrome-trace JSON as XProf's trace viewer / JAX's perfetto export write it: no Kineto categories."""
    rows: list[dict[str, object]] = [{"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}}]
    rows += [{"ph": "X", "pid": 701, "tid": 1, "ts": 10.0 * i, "dur": 5.0, "name": f"dot.{i}"} for i in range(events)]
    doc = {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": rows}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


def test_an_execution_trace_beside_its_trace_is_left_out_and_the_run_stays_complete() -> None:
    # GIVEN HTA's sample folder: a Kineto trace and the PyTorch execution trace of the same run
    # WHEN the folder is analysed
    result = analyze(discover_sources([ET_DIR]), AnalysisOptions())
    # THEN the execution trace is no input and no error; a warning says it was left out and why
    assert [i["name"] for i in result.summary["inputs"]] == [ET_TRACE.name]
    assert not [e for e in result.errors if e.fatal]
    left_out = [w for w in result.summary["warnings"] if w["source"] == ET_FILE.name]
    assert len(left_out) == 1
    assert "execution trace" in left_out[0]["message"]
    # AND the Kineto trace's own results are those of analysing it alone
    alone = analyze([FileTraceSource(ET_TRACE)], AnalysisOptions())
    assert result.complete is alone.complete
    assert result.summary["ranks"][0]["temporal_breakdown"] == alone.summary["ranks"][0]["temporal_breakdown"]


def test_an_execution_trace_alone_is_a_clear_error_naming_the_format(tmp_path: Path) -> None:
    # GIVEN only the execution trace WHEN `profstack analyze` runs on it
    proc = subprocess.run(
        [sys.executable, "-m", "profstack", "analyze", str(ET_FILE), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    # THEN it exits 2 (nothing analysable) and says what the file is
    assert proc.returncode == 2, proc.stderr
    assert "execution trace" in proc.stderr
    assert "no analysable trace data" in proc.stderr


@given(st.lists(st.sampled_from(["schema", "nodes", "pid", "time", "traceName", "deviceProperties"]), unique=True))
@settings(max_examples=60, deadline=None)
def test_only_the_execution_trace_keys_are_recognised(keys: list[str]) -> None:
    # GIVEN any set of top-level keys of a JSON object without traceEvents
    # THEN it is called an execution trace exactly when it has both "schema" and "nodes"
    assert (other_format(keys) is not None) is ("schema" in keys and "nodes" in keys)


def test_the_json_views_beside_an_xspace_are_left_out_of_a_directory_walk(tmp_path: Path) -> None:
    # GIVEN a JAX profile run folder: the XSpace, JAX's perfetto_trace.json.gz and XProf's <host>.trace.json.gz,
    # and a Kineto trace a user dropped in the same folder
    run = tmp_path / "plugins" / "profile" / "2026_12_04"
    run.mkdir(parents=True)
    shutil.copy(XSPACE, run / "host.xplane.pb")
    _chrome_view(run / "perfetto_trace.json.gz")
    _chrome_view(run / "host.trace.json.gz")
    shutil.copy(TRACES / "own" / "cpu_train_loop_rank0.pt.trace.json", run / "worker.pt.trace.json")
    # WHEN the log directory is walked
    sources, left_out = discover([tmp_path])
    # THEN the views are left out, each with its reason, and the XSpace and the Kineto trace are read
    names = sorted(s.name for s in sources)
    assert names == ["plugins/profile/2026_12_04/host.xplane.pb", "plugins/profile/2026_12_04/worker.pt.trace.json"]
    assert sorted(n for n, _ in left_out) == [
        "plugins/profile/2026_12_04/host.trace.json.gz",
        "plugins/profile/2026_12_04/perfetto_trace.json.gz",
    ]
    assert all("xplane.pb" in why for _, why in left_out)
    # AND without an XSpace beside them, the same names are read (and judged on their content)
    shutil.move(run / "host.xplane.pb", tmp_path / "elsewhere.xplane.pb")
    sources, left_out = discover([run])
    assert not left_out
    assert len(sources) == 3


def test_a_jax_profile_folder_is_one_run(tmp_path: Path) -> None:
    # GIVEN the folder JAX writes with create_perfetto_trace=True WHEN analysed
    run = tmp_path / "plugins" / "profile" / "r"
    run.mkdir(parents=True)
    shutil.copy(XSPACE, run / "host.xplane.pb")
    _chrome_view(run / "perfetto_trace.json.gz")
    _chrome_view(run / "host.trace.json.gz")
    result = analyze(discover_sources([tmp_path]), AnalysisOptions())
    # THEN one rank and one run, from the XSpace only (before: three "separate runs" of rank 0)
    assert [i["name"] for i in result.summary["inputs"]] == ["plugins/profile/r/host.xplane.pb"]
    assert len(result.summary["ranks"]) == 1
    assert len(result.summary["runs"]) == 1


@pytest.mark.parametrize("name", ["host.trace.json.gz", "browser.json"])
def test_a_chrome_trace_of_another_writer_is_not_an_empty_success(tmp_path: Path, name: str) -> None:
    # GIVEN Chrome-trace JSON whose duration events are in no category Kineto writes
    path = tmp_path / name
    _chrome_view(path, events=7)
    # WHEN analysed alone
    result = analyze([FileTraceSource(path)], AnalysisOptions())
    # THEN it is a fatal NotKinetoError that says why, not a complete CPU-only run
    assert not result.complete
    assert not result.summary["ranks"]
    (err,) = result.errors
    assert err.fatal
    assert err.error_type == "NotKinetoError"
    assert "7 duration event(s), none in a category ProfStack analyses" in err.message
    assert "xplane.pb" in err.message
