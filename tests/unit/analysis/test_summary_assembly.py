"""The engine and the fan-out merge report unreadable inputs the same way; the one Perfetto naming plan."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisOptions, analyze, discover_sources, rules
from profstack.analysis.merge import merge_partials
from profstack.analysis.perfetto_plan import perfetto_plan
from tests.conftest import TRACES_DIR

GOOD = TRACES_DIR / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
CPU = TRACES_DIR / "own" / "cpu_train_loop_rank0.pt.trace.json"


def _cross(table: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    return rules.cross_rank(table, AnalysisOptions().limits)


def _mixed(tmp_path: Path) -> Path:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(GOOD, folder / "good_rank0.json.gz")
    raw = CPU.read_bytes()
    (folder / "truncated_rank1.pt.trace.json").write_bytes(raw[: len(raw) // 2])
    (folder / "not_kineto.json").write_bytes(b'{"hello": "world"}\n')
    return folder


def test_engine_puts_the_unreadable_files_finding_first(
    tmp_path: Path, summary_validator: Callable[[dict[str, Any]], None]
) -> None:
    # GIVEN a good trace, a truncated one and a JSON file that is no trace
    result = analyze(discover_sources([_mixed(tmp_path)]))
    summary = result.summary
    # THEN the engine (so `profstack analyze` too) says up front that 2 of 3 files were not read whole
    first = summary["findings"][0]
    assert first["rule_id"] == "UnreadableTraceFiles"
    assert first["severity"] == "warning"
    assert first["message"].startswith("2 of 3 trace files could not be read completely")
    assert sorted(first["evidence"]["files"]) == ["not_kineto.json", "truncated_rank1.pt.trace.json"]
    assert first["ranks"] == []
    assert [f["rule_id"] for f in summary["findings"]].count("UnreadableTraceFiles") == 1
    summary_validator(dict(summary))


def test_engine_adds_no_unreadable_finding_when_every_file_is_read() -> None:
    summary = analyze(discover_sources([GOOD])).summary
    assert all(f["rule_id"] != "UnreadableTraceFiles" for f in summary["findings"])


def test_lambda_flagging_adds_nothing_to_an_engine_summary(tmp_path: Path) -> None:
    # GIVEN the engine's summary of unreadable inputs WHEN the Lambda's publish step lists unreadable files
    # (lambdas.trace_processor.outputs; was logic._flag_unreadable, whose own finding is deleted)
    from lambdas.trace_processor import outputs

    summary = dict(analyze(discover_sources([_mixed(tmp_path)])).summary)
    before = [dict(f) for f in summary["findings"]]
    flagged = outputs.unreadable_files(summary)
    # THEN it finds the same files and adds no second finding
    assert sorted(flagged) == ["not_kineto.json", "truncated_rank1.pt.trace.json"]
    assert summary["findings"] == before


def test_merge_recomputes_one_unreadable_finding_over_all_inputs(tmp_path: Path) -> None:
    # GIVEN one partial per file (each with its own unreadable finding where it applies) and a missing file
    folder = _mixed(tmp_path)
    partials = [dict(analyze(discover_sources([p])).summary) for p in sorted(folder.iterdir())]
    partials = [p for p in partials if p["ranks"]] + [p for p in partials if not p["ranks"]]
    missing = [{"name": "s3://b/lost.pt.trace.json.gz", "size": 5, "reason": "timed out"}]
    # WHEN merged
    merged = merge_partials(partials, missing, cross_rank=_cross)
    # THEN exactly one such finding, first, counting every input of the job
    ids = [f["rule_id"] for f in merged["findings"]]
    assert ids.count("UnreadableTraceFiles") == 1
    assert ids[0] == "UnreadableTraceFiles"
    assert merged["findings"][0]["message"].startswith("3 of 4 trace files could not be read completely")
    assert "s3://b/lost.pt.trace.json.gz" in merged["findings"][0]["evidence"]["files"]


def _summary(ranks: list[tuple[int, list[str]]], failed: tuple[str, ...] = ()) -> dict[str, Any]:
    names = [n for _, srcs in ranks for n in srcs] + list(failed)
    return {
        "inputs": [{"name": n, "status": "failed" if n in failed else "ok"} for n in names],
        "ranks": [{"rank": r, "label": str(r), "sources": srcs} for r, srcs in ranks],
    }


def test_perfetto_plan_names_one_file_per_rank_and_numbers_several() -> None:
    # GIVEN rank 0 in two entries (files analysed apart), rank 1 alone, and a failed input
    plan = perfetto_plan(_summary([(0, ["a.json"]), (0, ["b.json"]), (1, ["c.json"])], failed=("d.json",)))
    # THEN rank-0.0 / rank-0.1 / rank-1, and the failed input is skipped with a reason
    assert [(o.source, o.file_name) for o in plan.outputs] == [
        ("a.json", "rank-0.0.trace.json.gz"),
        ("b.json", "rank-0.1.trace.json.gz"),
        ("c.json", "rank-1.trace.json.gz"),
    ]
    assert list(plan.skipped) == ["d.json"]


def test_perfetto_plan_numbers_only_the_inputs_the_caller_has() -> None:
    plan = perfetto_plan(_summary([(2, ["x.json", "y.json"])]), available={"y.json"})
    assert [(o.source, o.file_name) for o in plan.outputs] == [("y.json", "rank-2.trace.json.gz")]
    assert "x.json" in plan.skipped


def test_cli_writes_the_planned_perfetto_files(tmp_path: Path) -> None:
    # GIVEN one rank twice (two overlapping copies) WHEN `profstack analyze --format perfetto` runs
    from profstack.cli import main

    folder = tmp_path / "dup"
    folder.mkdir()
    for name in ("sampled_rank-0.json.gz", "sampled_rank-0-copy.json.gz"):
        shutil.copy(GOOD, folder / name)
    rc = main(["analyze", str(folder), "--out", str(tmp_path / "out"), "--format", "json,perfetto"])
    # THEN the files are the plan's names, and each opens as a gzip'd trace
    assert rc == 0
    written = sorted(p.name for p in (tmp_path / "out" / "perfetto").iterdir())
    assert written == ["rank-0.0.trace.json.gz", "rank-0.1.trace.json.gz"]
    assert gzip.decompress((tmp_path / "out" / "perfetto" / written[0]).read_bytes()).startswith(b"{")


FANOUT_JOB = [
    TRACES_DIR / "hta" / "trace_filter" / "sampled_rank-0.json.gz",
    TRACES_DIR / "hta" / "trace_filter" / "sampled_rank-1.json.gz",
    TRACES_DIR / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    TRACES_DIR / "hta" / "trace_file_list" / "inference_rank_1.json.gz",
]


def test_merge_groups_runs_as_the_engine_does(summary_validator: Callable[[dict[str, Any]], None]) -> None:
    # GIVEN one job's folder holding ranks 0 and 1 of one run plus a rank-0 and a rank-1 trace of two
    # unrelated runs (other times), analysed one file per partial as the fan-out does
    whole = analyze(discover_sources(FANOUT_JOB)).summary
    partials = [dict(analyze(discover_sources([p])).summary) for p in FANOUT_JOB]
    # WHEN the partials are merged
    merged = merge_partials(partials, [], cross_rank=_cross)
    summary_validator(dict(merged))

    # THEN the runs, their cross-rank sections, the rank labels and the findings are the engine's: the
    # unrelated traces are runs of their own, never compared with the ranks of the two-rank run
    # (start and duration to the float resolution at epoch microseconds, ~0.25 us: a partial's run record
    # stores them rounded, and the merge adds them back)
    def timeless(runs: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k not in {"start_us", "duration_us"}} for r in runs]

    assert timeless(merged["runs"]) == timeless(whole["runs"])
    for got, want in zip(merged["runs"], whole["runs"], strict=True):
        assert got["start_us"] == pytest.approx(want["start_us"], abs=1.0)
        assert got["duration_us"] == pytest.approx(want["duration_us"], abs=1.0)
    assert len(merged["runs"]) == 3
    assert [r["ranks"] for r in merged["runs"]] == [["1.0"], ["0.0", "1.1"], ["0.1"]]
    assert merged["cross_rank"] == whole["cross_rank"]
    assert merged["cross_rank"]["run"] == "run-2"
    assert [(r["label"], r["run"]) for r in merged["ranks"]] == [(r["label"], r["run"]) for r in whole["ranks"]]
    # (a per-rank finding's message names the rank as its partial saw it, "rank 1", where the engine says
    # "rank 1.0"; the finding's ranks are the same)
    key = lambda f: (f["rule_id"], tuple(f["ranks"]), f["severity"])  # noqa: E731
    assert sorted(map(key, merged["findings"])) == sorted(map(key, whole["findings"]))
    # AND the merge says that files of one rank were analysed apart
    notes = [w for w in merged["warnings"] if w["error_type"] == "RankFilesNotMerged"]
    assert len(notes) == 1
    assert "rank(s) 0, 1 have several trace files" in notes[0]["message"]


def test_merge_of_one_run_compares_all_its_ranks() -> None:
    # GIVEN the two ranks of one run as two partials
    partials = [dict(analyze(discover_sources([p])).summary) for p in FANOUT_JOB[:2]]
    merged = merge_partials(partials, [], cross_rank=_cross)
    # THEN one run of both ranks, labelled by rank alone, and no note about split rank files
    assert [(r["id"], r["ranks"], r["cross_rank"]["rank_count"]) for r in merged["runs"]] == [("run-1", ["0", "1"], 2)]
    assert merged["cross_rank"]["rank_count"] == 2
    assert {row["run"] for row in merged["cross_rank"]["table"]} == {"run-1"}
    assert not [w for w in merged["warnings"] if w["error_type"] == "RankFilesNotMerged"]


def test_merge_says_when_a_partial_does_not_tell_its_run() -> None:
    # GIVEN two partials whose run records were lost (an older or damaged partial)
    partials = [dict(analyze(discover_sources([p])).summary) for p in FANOUT_JOB[:2]]
    for p in partials:
        p.pop("runs")
    merged = merge_partials(partials, [], cross_rank=_cross)
    # THEN the ranks are not compared as if they were one run, and the summary says why
    assert [r["cross_rank"]["rank_count"] for r in merged["runs"]] == [1, 1]
    notes = [w["message"] for w in merged["warnings"] if w["error_type"] == "RunUnknown"]
    assert notes == [notes[0]]
    assert "rank entries 0, 1 have no time range" in notes[0]


def test_merge_does_not_join_a_rank_by_a_time_range_that_ends_before_it_starts() -> None:
    # GIVEN the two ranks of one run, one partial damaged: its run record has a negative duration
    partials = [dict(analyze(discover_sources([p])).summary) for p in FANOUT_JOB[:2]]
    damaged = partials[1]
    damaged["runs"] = [{**r, "duration_us": -abs(r["duration_us"] or 1.0)} for r in damaged["runs"]]
    merged = merge_partials(partials, [], cross_rank=_cross)
    # THEN rank 1 is not compared with rank 0 on that range, and the summary says so
    assert [r["cross_rank"]["rank_count"] for r in merged["runs"]] == [1, 1]
    notes = [w["message"] for w in merged["warnings"] if w["error_type"] == "RunUnknown"]
    assert len(notes) == 1
    assert "rank entries 1 have no time range" in notes[0]
    assert "ends before it starts" in notes[0]
