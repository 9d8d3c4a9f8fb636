"""What live analysis costs per running job-hour (docs/processing.md, "While a job runs"; issue 36).

    python -m bench.live_cost [--interval 15] [--memory-mb 1769] [--rounds 3] [--aws-call-ms 50]

Runs the real analyser (lambdas/live_analysis/logic.analyse_job) and dispatcher (due_jobs) in moto against jobs
that differ in what they uploaded so far: no trace, the small alexnet sample, and a 15 MB-of-JSON rank. For each it
measures the CPU seconds of one run (process time, best of --rounds; moto's own work included, so this
over-counts) and counts the AWS calls it makes (botocore's before-call events). moto answers in microseconds, AWS
in tens of milliseconds, so a run's billed duration is modelled as

    seconds = cpu_seconds + aws_calls * aws_call_ms / 1000

(--aws-call-ms is an assumption, stated in the output; the trace bytes are read in the engine's CPU time here, on
AWS they stream while it parses). Cost per running job-hour, at `interval` minutes:

    runs/h = 60 / interval
    USD/h  = runs/h * (memory_GB * seconds * GB_S_PRICE + REQUEST_PRICE)  [+ the dispatcher's share]

Prices: us-east-1, x86_64, first tier, read 2026-12-04 (bench/README.md): $0.0000166667 per GB-second and $0.20 per
million requests. The dispatcher runs whether or not a job runs (256 MB); its cost is per deployment, not per job.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

GB_S_PRICE = 0.0000166667  # USD per GB-second, x86_64, us-east-1, first tier
REQUEST_PRICE = 0.20 / 1_000_000  # USD per request
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "traces"
CASES = {
    "no traces (skipped)": None,
    "alexnet, 0.3 MB JSON": "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "ns_resolution rank, 15.4 MB JSON": "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
}


@contextmanager
def _counting(client: Any, counter: list[int]) -> Iterator[None]:
    def count(**_: Any) -> None:
        counter[0] += 1

    client.meta.events.register("before-call", count)
    try:
        yield
    finally:
        client.meta.events.unregister("before-call", count)


def measure(rounds: int) -> list[dict[str, Any]]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    from moto import mock_aws

    from lambdas.live_analysis.env import LiveEnv
    from lambdas.live_analysis.jobs import TrainingJobs, due_jobs
    from lambdas.live_analysis.logic import analyse_job
    from lambdas.trace_processor.aws import Clients
    from lambdas.trace_processor.engine import ProfStackEngine
    from profstack import layout
    from tests.functional.processing_support import (
        TRACE_BUCKET,
        USER,
        create_data_plane,
        processor_environ,
        register_training_job,
    )
    from tests.functional.test_live_analysis import _backend_job

    rows: list[dict[str, Any]] = []
    with mock_aws():
        plane = create_data_plane()
        env = LiveEnv.from_environ(processor_environ(plane.topic_arn, LIVE_SETTLE_SECONDS="0"))
        clients = Clients(s3=plane.s3, sagemaker=plane.sagemaker, sns=plane.sns)
        engine = ProfStackEngine()
        for i, (label, rel) in enumerate(CASES.items()):
            job = f"live-cost-{i}"
            register_training_job(plane, job)
            _backend_job(job).training_job_status = "InProgress"
            if rel is not None:
                key = f"{layout.job_tensorboard_prefix(USER, job)}worker0.pt.trace.json.gz"
                plane.s3.upload_file(str(SAMPLES / rel), TRACE_BUCKET, key)
            best: dict[str, Any] | None = None
            for _ in range(rounds):
                calls = [0]
                with _counting(plane.s3, calls), _counting(plane.sagemaker, calls), _counting(plane.sns, calls):
                    start = time.process_time()
                    outcome = analyse_job(job, env=env, clients=clients, engine=engine)
                    cpu = time.process_time() - start
                if best is None or cpu < best["cpu_s"]:
                    best = {"case": label, "action": outcome.action, "cpu_s": round(cpu, 4), "aws_calls": calls[0]}
            assert best is not None
            rows.append(best)
        calls = [0]
        with _counting(plane.sagemaker, calls):
            start = time.process_time()
            due = due_jobs(TrainingJobs(plane.sagemaker), None)
            cpu = time.process_time() - start
        rows.append(
            {
                "case": f"dispatcher ({len(due)} running jobs)",
                "action": "dispatch",
                "cpu_s": round(cpu, 4),
                "aws_calls": calls[0] + len(due),
            }
        )  # fmt: skip  (+ one Lambda Invoke per due job)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=int, default=15)
    parser.add_argument("--memory-mb", type=int, default=1769)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--aws-call-ms", type=float, default=50.0)
    args = parser.parse_args()
    runs_per_hour = 60 / args.interval
    head = f"USD per job-hour at {args.interval} min"
    print(f"| case | outcome | CPU s (moto) | AWS calls | modelled s/run | GB-s/run | {head} |")
    print("|---|---|---|---|---|---|---|")
    for row in measure(args.rounds):
        memory_gb = (256 if row["action"] == "dispatch" else args.memory_mb) / 1024
        seconds = row["cpu_s"] + row["aws_calls"] * args.aws_call_ms / 1000
        gb_s = memory_gb * seconds
        usd = runs_per_hour * (gb_s * GB_S_PRICE + REQUEST_PRICE)
        row |= {"modelled_s": round(seconds, 3), "gb_s": round(gb_s, 3), "usd_per_hour": usd}
        if os.environ.get("LIVE_COST_JSON"):
            print(json.dumps(row), flush=True)
        print(
            f"| {row['case']} | {row['action']} | {row['cpu_s']:.3f} | {row['aws_calls']} | {seconds:.2f} | "
            f"{gb_s:.3f} | {usd:.6f} |"
        )
    print(f"\nassumed {args.aws_call_ms:g} ms per AWS call; memory {args.memory_mb} MB (dispatcher 256 MB)")


if __name__ == "__main__":
    main()
