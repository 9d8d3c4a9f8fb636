"""Every sample trace in samples/traces, analysed by the engine, renders to a sane report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.report import render_html

TRACES = Path(__file__).resolve().parents[3] / "samples" / "traces"
FILES = sorted(p.relative_to(TRACES).as_posix() for p in TRACES.rglob("*") if p.name.endswith((".json", ".json.gz")))
# not Kineto traces: a PyTorch execution trace (left out of an analysis, test_other_formats.py)
NOT_TRACES = {"hta/execution_trace/benchmark_simple_add_et.json.gz"}
FILES = [f for f in FILES if not f.startswith("reference_values/") and f not in NOT_TRACES]


@pytest.mark.parametrize("name", FILES)
def test_real_trace_renders_with_a_section_per_rank_and_no_placeholder_leaks(name: str) -> None:
    # GIVEN the engine's summary of one real trace
    summary = analyze(discover_sources([TRACES / name]), AnalysisOptions(top_k=5)).summary

    # WHEN rendering it
    page = render_html(summary)

    # THEN there is one section per rank, and GPU panels exactly for the GPU ranks
    text = re.sub(r"<[^>]+>", " ", page)
    for rank in summary["ranks"]:
        assert f"Rank {rank['label']}" in text
    gpu_ranks = sum(1 for r in summary["ranks"] if r["has_gpu"])
    assert page.count("<h3>GPU active share") == gpu_ranks
    # a rank without GPU rows is called CPU-only unless the trace shows a GPU was there (#34: then the page says
    # the GPU's activity is unknown, with the warning)
    gpu_unknown = {"GpuActivityNotRecordedError", "DevicesWithoutActivityError", "NothingRecordedError"}
    unknown = sum(1 for e in summary["errors"] if e["error_type"] in gpu_unknown)
    assert page.count("CPU-only trace") == len(summary["ranks"]) - gpu_ranks - unknown
    assert page.count("does not show a CPU-only run") == unknown
    # AND the panels over time, memory and timelines (summary 1.2) are there for every rank that has data
    busy_ranks = sum(
        1 for r in summary["ranks"] if r["has_gpu"] and any((r.get("timeline") or {"gpu_busy_pct": []})["gpu_busy_pct"])
    )
    assert page.count("<h3>GPU utilisation over time") == busy_ranks
    assert page.count("<h3>Memory") == len(summary["ranks"])
    for rank in summary["ranks"]:
        memory = rank.get("memory", {"events": 0})
        if not memory["events"]:  # the page says why: not asked for, or asked for and nothing allocated
            said = "profile_memory was on, but no memory event" if memory.get("header_profile_memory") else "no memory"
            assert said in page
    assert '<h2 id="timelines">Timelines</h2>' in page
    assert "ui.perfetto.dev" in page
    if any(r.get("cuda_graphs") for r in summary["ranks"]):
        assert "<h3>CUDA graphs" in page
    # AND every formatted value (table numbers, KPIs, stats, legend and chip values) is a real value
    values = re.findall(r'<td class="n">([^<]*)', page)
    values += re.findall(r'<div class="v">([^<]*)', page)
    values += re.findall(r"<b>([^<]*)</b>", page)
    assert values
    for value in values:
        assert value.strip() not in ("", "None", "nan", "NaN", "inf", "-inf", "undefined"), value
        assert "nan" not in value.split(), value
        assert "None" not in value.split(), value
