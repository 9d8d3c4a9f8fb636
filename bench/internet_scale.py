"""On paper: a 1,024-rank job at 2 GB per rank through the deployed path (issue #44 item 5).

    python -m bench.internet_scale [--ranks 1024] [--gb-per-rank 2] [--trace bench/data/100MB-gz/...json.gz]

Measures, on this machine's core (CPU time, best of ``--repeat``), what the analyze-file Lambda does per GB of
uncompressed trace JSON: ``analyze()`` with the Lambda's options, the Perfetto timeline (``trim_timeline``, the
pipeline's default window ``median``, 1 M events, gzip) and the report; then models the fan-out with the deployed
settings (stacks/components/fanout_workflow.py, profstack/config.py) and the pinned prices (profstack/history/
prices.json, ``pipeline``): each file is one Lambda item of the Distributed Map (a file of at most
``single_lambda_max_file_mb`` uncompressed), ``processing.fanout_max_concurrency_per_job`` at a time (the
per-job cap that keeps one job from starving others, docs/security.md), then the aggregate Lambda over the partials
(``bench.aggregate_partials`` measured 5.6 s for 1,000 partials; docs/processing.md). Prints the model's inputs and
a table: wall time and cost by component, and what limits it first.

The per-GB times are this machine's (an AMD EPYC core, shared): Lambda's x86_64 core at one vCPU (1,769 MB) is
of the same class, but the time is a model, not a Lambda measurement. S3 reads are modelled at ``--s3-mb-s`` per
pass of the compressed object (the analysis reads the file once, the timeline three times).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO_ROOT / "bench" / "data" / "100MB-gz" / "rank-0.pt.trace.json.gz"
TRIM_PASSES = 3  # trim_timeline: steps and metadata, the plan, the writing
ANALYZE_PASSES = 1


def per_gb(trace: Path, repeat: int) -> dict[str, float]:
    """CPU seconds per GB of uncompressed JSON of the analyze-file Lambda's three steps, best of ``repeat``."""
    import gzip

    from profstack.analysis import AnalysisOptions, FileTraceSource, analyze
    from profstack.analysis.allocator import tune_malloc
    from profstack.analysis.trim import trim_timeline
    from profstack.report import render_html

    tune_malloc()
    with gzip.open(trace) if trace.suffix == ".gz" else trace.open("rb") as fh:
        gb = sum(len(chunk) for chunk in iter(lambda: fh.read(1 << 22), b"")) / 1e9
    best = {"analyze": math.inf, "timeline": math.inf, "report": math.inf}
    for _ in range(repeat):
        t0 = time.process_time()
        result = analyze([FileTraceSource(trace)], AnalysisOptions())
        t1 = time.process_time()
        trim_timeline(FileTraceSource(trace), io.BytesIO(), window="median", max_events=1_000_000, compress=True)
        t2 = time.process_time()
        render_html(result.summary)
        json.dumps(result.summary)
        t3 = time.process_time()
        for key, s in (("analyze", t1 - t0), ("timeline", t2 - t1), ("report", t3 - t2)):
            best[key] = min(best[key], s / gb)
    best["gz_ratio"] = gb * 1e9 / trace.stat().st_size if trace.suffix == ".gz" else 1.0
    return best


def model(ranks: int, gb_per_rank: float, rates: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
    from profstack.config import Processing
    from stacks.components.trace_processor import AGGREGATE_MEMORY_MB

    prices = json.loads((REPO_ROOT / "profstack" / "history" / "prices.json").read_text())["pipeline"]
    cfg = Processing()
    mem_gb = cfg.lambda_memory_mb / 1024
    gz_mb = gb_per_rank * 1000 / rates["gz_ratio"]
    s3_s = (ANALYZE_PASSES + TRIM_PASSES) * gz_mb / args.s3_mb_s
    cpu_s = gb_per_rank * (rates["analyze"] + rates["timeline"] + rates["report"])
    item_s = cpu_s + s3_s
    width = min(cfg.fanout_max_concurrency_per_job, cfg.fanout_reserved_concurrency)  # the per-job Map cap
    waves = math.ceil(ranks / width)
    agg_s = args.aggregate_s_per_1000 * ranks / 1000 + ranks * args.s3_get_ms / 1000 / 32  # 32 reads in flight
    lambda_gb_s = ranks * item_s * mem_gb + agg_s * AGGREGATE_MEMORY_MB / 1024
    gets = ranks * (ANALYZE_PASSES + TRIM_PASSES) + ranks + 2  # the passes, the partials, the manifest
    puts = ranks * 3 + 6  # each partial's summary, timeline and status; the job's outputs
    transitions = ranks * args.transitions_per_item + 10
    cost = {
        "lambda_duration": lambda_gb_s * prices["lambda_x86_64_usd_per_gb_s"],
        "lambda_requests": (ranks + 2) * prices["lambda_usd_per_request"],
        "step_functions": transitions * prices["sfn_standard_usd_per_transition"],
        "s3_requests": gets * prices["s3_get_usd_per_request"] + puts * prices["s3_put_usd_per_request"],
    }
    return {
        "per_item_s": item_s,
        "per_item_cpu_s": cpu_s,
        "per_item_s3_s": s3_s,
        "timeline_share": gb_per_rank * rates["timeline"] / item_s,
        "width": width,
        "waves": waves,
        "fanout_s": waves * item_s,
        "aggregate_s": agg_s,
        "wall_s": waves * item_s + agg_s,
        "lambda_gb_s": lambda_gb_s,
        "cost": cost,
        "cost_total": sum(cost.values()),
        "single_lambda_max_gb": cfg.single_lambda_max_file_mb / 1000,
        "wall_at_full_width_s": math.ceil(ranks / min(ranks, args.account_concurrency)) * item_s + agg_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--gb-per-rank", type=float, default=2.0, help="GB of uncompressed trace JSON per rank")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--s3-mb-s", type=float, default=80.0, help="one GET stream's MB/s inside Lambda")
    parser.add_argument("--s3-get-ms", type=float, default=20.0, help="one small GET (a partial), ms")
    parser.add_argument("--aggregate-s-per-1000", type=float, default=5.6, help="bench.aggregate_partials, s")
    parser.add_argument("--transitions-per-item", type=int, default=4, help="a child execution's transitions")
    parser.add_argument("--account-concurrency", type=int, default=1000, help="Lambda's default regional quota")
    args = parser.parse_args(argv)
    rates = per_gb(args.trace, args.repeat)
    out = model(args.ranks, args.gb_per_rank, rates, args)
    print(json.dumps({"per_gb_cpu_s": rates, **out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
