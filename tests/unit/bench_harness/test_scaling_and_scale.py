"""bench.scaling's table and bench.internet_scale's model: the arithmetic of what they print."""

from __future__ import annotations

import argparse

import pytest

from bench import internet_scale, scaling


def _row(jobs: int, wall: float, cpu_sum: float | None, workers: int, sha: str = "abc") -> dict[str, object]:
    timings = {} if cpu_sum is None else {"analyse_cpu_sum": cpu_sum, "peek": 0.002, "fork": 0.05}
    return {"jobs": jobs, "wall": wall, "parent_cpu": 8.0, "workers": workers, "serial_reason": None,
            "timings": timings, "summary_sha": sha}  # fmt: skip


def test_the_scaling_table_separates_the_machine_from_the_serial_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaling, "machine", lambda: "test machine")
    # GIVEN 8 ranks: 8.0 s of CPU at --jobs 1 (8.0 s wall); at --jobs 4, 2.5 s wall and the ranks' CPU grown to 10 s
    rows = [_row(1, 8.0, None, 1), _row(4, 2.5, 10.0, 4)]
    # WHEN tabulated
    line = scaling.table(rows, 8, 100).splitlines()[-1]
    # THEN speed-up 3.2x (80 %), and the per-rank CPU (1.25 s against 1.0) allows 4 x 1.0 / 1.25 = 3.2x
    assert line.startswith("| 4 | 2.50 | 3.20x | 80% | 3.2x | yes | 0.002 | 0.050 |")
    # AND a summary that differs from --jobs 1's is flagged
    assert "| **no** |" in scaling.table([_row(1, 8.0, None, 1), _row(2, 4.0, 8.0, 2, sha="x")], 8, 100)


def test_the_internet_scale_model_is_the_per_gb_times_over_the_maps_waves() -> None:
    # GIVEN 10 s per GB of CPU, gzip 10x, S3 at 100 MB/s, 100 ranks of 1 GB
    rates = {"analyze": 1.0, "timeline": 8.0, "report": 1.0, "gz_ratio": 10.0}
    args = argparse.Namespace(s3_mb_s=100.0, s3_get_ms=20.0, aggregate_s_per_1000=5.0, transitions_per_item=4,
                              account_concurrency=1000)  # fmt: skip
    out = internet_scale.model(100, 1.0, rates, args)
    # THEN a file is 10 s of CPU plus 4 reads of 100 MB at 100 MB/s, in ceil(100 / 10) waves of one job's Map width
    # (processing.fanout_max_concurrency_per_job, 10 by default: the cap that keeps one job from starving others)
    assert out["per_item_s"] == pytest.approx(14.0)
    assert (out["width"], out["waves"]) == (10, 10)
    assert out["fanout_s"] == pytest.approx(140.0)
    # AND the Lambda duration is GB-s x the pinned price (1,769 MB functions)
    gb_s = 100 * 14.0 * 1769 / 1024 + out["aggregate_s"] * 1769 / 1024
    assert out["lambda_gb_s"] == pytest.approx(gb_s)
    assert out["cost"]["lambda_duration"] == pytest.approx(gb_s * 0.0000166667)
    # AND at the account's full width the job is one wave
    assert out["wall_at_full_width_s"] == pytest.approx(14.0 + out["aggregate_s"])
