"""Real summaries of real sample traces, and a folder of history rows built from them the way the
processor builds them (profstack.history.pipeline.enrich)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.history.cost import JobResources
from profstack.history.local import DirectoryHistory
from profstack.history.pipeline import enrich
from profstack.history.prices import pinned_prices
from profstack.history.regression import RegressionThresholds
from profstack.history.rows import JobInfo

RESNET_W4 = "kineto_tb_plugin/resnet50_num_workers_4"  # 4 DataLoader workers: the healthy baseline
RESNET_W0 = "kineto_tb_plugin/resnet50_num_workers_0"  # no workers: the input pipeline stalls the GPU
DDP_TWO_RANKS = "hta/trace_filter"  # two ranks of one job


@pytest.fixture(scope="session")
def summary_of(traces_dir: Path) -> Callable[[str], dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}

    def get(rel: str) -> dict[str, Any]:
        if rel not in cache:
            cache[rel] = dict(analyze(discover_sources([traces_dir / rel]), AnalysisOptions(top_k=10)).summary)
        return copy.deepcopy(cache[rel])

    return get


@dataclass(frozen=True)
class Job:
    trace: str
    info: JobInfo
    resources: JobResources


#: Three weeks of jobs: alice's resnet family twice (the second regresses), bob's DDP job the next week.
JOBS = (
    Job(
        RESNET_W4,
        JobInfo("resnet-w4", "alice", datetime(2026, 11, 16, 9, 0, tzinfo=UTC), "Completed", "resnet", "tag"),
        JobResources("ml.p4d.24xlarge", 2, 3600.0, 3600.0),
    ),
    Job(
        RESNET_W0,
        JobInfo("resnet-w0", "alice", datetime(2026, 11, 18, 9, 0, tzinfo=UTC), "Completed", "resnet", "tag"),
        JobResources("ml.p4d.24xlarge", 2, 3600.0, 3600.0),
    ),
    Job(
        DDP_TWO_RANKS,
        JobInfo(
            "ddp-2026-11-24-10-00-00-000",
            "bob",
            datetime(2026, 11, 24, 10, 0, tzinfo=UTC),
            "Completed",
            "ddp",
            "name_rule",
        ),
        JobResources("ml.g5.12xlarge", 1, 1800.0, 1800.0),
    ),
)


@dataclass
class BuiltHistory:
    root: Path
    summaries: dict[str, dict[str, Any]]
    rows: dict[str, dict[str, list[dict[str, Any]]]]


@pytest.fixture(scope="session")
def built_history(
    summary_of: Callable[[str], dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> BuiltHistory:
    root = tmp_path_factory.mktemp("history")
    store = DirectoryHistory(root)
    out = BuiltHistory(root, {}, {})
    for job in JOBS:  # in time order, each job sees the ones before it
        summary = summary_of(job.trace)
        rows = enrich(
            summary,
            info=job.info,
            resources=job.resources,
            prices=pinned_prices(),
            reader=store,
            thresholds=RegressionThresholds(),
        )
        store.write(rows, job.info)
        out.summaries[job.info.job] = summary
        out.rows[job.info.job] = rows
    return out
