"""bench.sources: each source it names is a sample in libkineto's layout; its table's ratios come from the cells."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from bench import sources
from bench.generate import load_source

from .test_run_tables import cell


@pytest.mark.parametrize("tag", sorted(sources.SOURCES))
def test_every_source_is_a_replicable_sample(tag: str) -> None:
    # GIVEN a source the bench names WHEN the generator loads it THEN it is a sample with timed events to replicate
    path = sources.SAMPLES / sources.SOURCES[tag][0]
    assert path.is_file()
    assert load_source(path).events


def test_composition_counts_the_kinds_of_one_copy() -> None:
    # GIVEN the CPU-only record_shapes sample WHEN its composition is taken THEN no GPU ops, mostly CPU ops
    comp = sources.composition(sources.SAMPLES / sources.SOURCES["cpu_shapes"][0])
    assert comp["gpu_ops_pct"] == 0
    assert comp["cpu_ops_pct"] > 80
    assert 300 < comp["bytes_per_event"] < 600
    assert comp["events"] > 1000


def test_the_table_has_one_row_per_format_with_ratios() -> None:
    # GIVEN a source with ProfStack 2x the floor's CPU throughput and 25x / unfinished HTAs on .json only
    results = [
        cell("profstack", 200.0, cpu_mb_s=250.0),
        cell("msgspec", 160.0, cpu_mb_s=125.0),
        cell("hta", 8.0),
        cell("hta061", None),
    ]
    row = {
        "tag": "trace_diff",
        "composition": {"bytes_per_event": 312, "gpu_ops_pct": 14.0, "cpu_ops_pct": 30.0, "flows_pct": 35.0},
        "results": [asdict(m) for m in results],
    }
    # WHEN tabulated THEN one .json row (no .json.gz cells) with the CPU-time ratio to the floor and both HTA ratios
    lines = sources.table([row]).splitlines()
    assert len(lines) == 3
    assert "| trace_diff |" in lines[2]
    assert "| .json |" in lines[2]
    assert "| 2.00× | 8.0 |" in lines[2]
    assert "| 25.00× (31.25× CPU) | > 1800.0× (unfinished) |" in lines[2]  # CPU: 250 / 8
    assert "| 4.00 | 50 |" in lines[2]  # 1000 ms / 250 MB/s CPU = 4 ms/MB; peak RSS 50 MB


def test_a_failed_hta_says_how_it_failed() -> None:
    # GIVEN HTA exiting with an IndexError on a CPU-only trace WHEN tabulated THEN the cell names the error
    failed = cell("hta", None)
    failed.status, failed.detail = "failed", "exit 1: IndexError: single positional indexer is out-of-bounds"
    assert sources._hta_speed(failed) == "fails (IndexError)"
