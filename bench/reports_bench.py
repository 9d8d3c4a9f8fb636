"""`profstack reports list` and the report index at N jobs (issue 36, item 6), on moto in this process.

    python -m bench.reports_bench [--jobs 1000] [--repeat 5]

One user with N jobs of 10 families (index rows as the processor writes them, top-finding messages of ~150
characters). Measured, best of --repeat:

* index rewrite: what the processor does after the (N+1)-th report (report_index.commit_row + write_page:
  row upserted into index.json by conditional write, index.html rendered and written), its S3 requests,
  and the sizes of index.json and index.html;
* rebuild: the same when index.json is missing (first report after an upgrade, or a lost index): every job
  folder's row file is read;
* `profstack reports list --limit 0` (the whole table) with the index, and without it (row files, 16 readers);
* the pure parts without S3: parse_rows + render_index_html of N rows;
* `python -m profstack reports list --limit 0` as a new process (interpreter start and imports included) against
  moto's HTTP server on localhost, next to `reports list --help` (the start-up alone).

moto answers in microseconds where S3 takes ~10-30 ms a request, so the S3 request count is printed next
to each time: the rewrite is a constant handful of requests whatever N is; a rebuild and an index-less
list are N+1 GETs (about N x 20 ms / 16 readers for the list, sequential in the rebuild).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results" / "reports_bench.json"
BUCKET = "profstack-bench-reports"
USER = "alice"
FAMILIES = [f"family-{i}" for i in range(10)]


def _rows(n: int, seed: int = 7) -> list[dict[str, Any]]:
    from profstack.report import index as idx

    rng = random.Random(seed)
    end = datetime(2026, 12, 4, tzinfo=UTC)
    rows = []
    for i in range(n):
        family = FAMILIES[i % len(FAMILIES)]
        rows.append(
            idx.clean_row(
                {
                    "job": f"{family}-2026-{i:05d}",
                    "family": family,
                    "status": rng.choice(["Completed", "Completed", "Completed", "Failed", "Stopped"]),
                    "ended_at": (end - timedelta(minutes=37 * (n - i))).isoformat().replace("+00:00", "Z"),
                    "duration_s": rng.uniform(600, 86400),
                    "step_p50_us": rng.uniform(50_000, 400_000),
                    "gpu_idle_pct": rng.uniform(2, 60),
                    "top_finding": {
                        "rule_id": "LowGPUUtilization",
                        "severity": rng.choice(["critical", "warning", "info"]),
                        "message": "GPU idle 41.2% of the step on 8 of 8 ranks; the DataLoader holds the step "
                        f"for 38.0 ms of 91.4 ms (rank {i % 8}), input pipeline bound",
                    },
                    "findings": rng.randint(0, 9),
                    "cost_usd": rng.uniform(1, 900),
                    "complete": True,
                    "no_traces": False,
                }
            )
        )
    return [r for r in rows if r is not None]


class _Counter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __call__(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1


@contextlib.contextmanager
def _counted(client: Any) -> Iterator[_Counter]:
    counter = _Counter()
    client.meta.events.register("before-call.s3.*", counter)
    try:
        yield counter
    finally:
        client.meta.events.unregister("before-call.s3.*", counter)


def _best(repeat: int, setup: Callable[[], None], work: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        setup()
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best, result


def _seed(s3: Any, rows: list[dict[str, Any]]) -> None:
    from profstack import layout
    from profstack.report import index as idx

    for row in rows:
        prefix = layout.job_reports_prefix(USER, row["job"])
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}{idx.ROW_FILE}", Body=idx.dumps(row))
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}summary.json", Body=b"{}")
    doc = idx.index_document(USER, rows, generated_at=datetime.now(UTC))
    s3.put_object(Bucket=BUCKET, Key=f"reports/{USER}/index.json", Body=idx.dumps(doc))


def measure(jobs: int, repeat: int) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from lambdas.trace_processor import report_index
    from profstack.cli import _aws, main
    from profstack.report import index as idx

    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    os.environ.update({"PROFSTACK_TRACE_BUCKET": BUCKET, "PROFSTACK_USER": USER})
    rows = _rows(jobs)
    new_row = idx.index_row(
        {"findings": [], "ranks": []}, job="new-job", status="Completed", ended_at=datetime.now(UTC), family="family-0"
    )
    out: dict[str, Any] = {"jobs": jobs, "repeat": repeat}

    # pure parts
    doc = idx.dumps(idx.index_document(USER, rows, generated_at=datetime.now(UTC)))
    out["parse_s"], parsed = _best(repeat, lambda: None, lambda: idx.parse_rows(doc))
    out["render_s"], page = _best(
        repeat, lambda: None, lambda: idx.render_index_html(USER, parsed, generated_at=datetime.now(UTC))
    )
    out["index_json_bytes"], out["index_html_bytes"] = len(doc), len(page.encode())

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        _seed(s3, rows)
        original = idx.dumps(idx.index_document(USER, rows, generated_at=datetime.now(UTC)))

        def restore() -> None:
            s3.put_object(Bucket=BUCKET, Key=f"reports/{USER}/index.json", Body=original)

        def rewrite() -> None:
            committed, etag = report_index.commit_row(s3, BUCKET, USER, new_row)
            report_index.write_page(s3, BUCKET, USER, committed, etag)

        with _counted(s3) as counter:
            out["rewrite_s"], _ = _best(repeat, restore, rewrite)
        out["rewrite_requests"] = {k: v // repeat - (1 if k == "PutObject" else 0) for k, v in counter.calls.items()}
        head = s3.head_object(Bucket=BUCKET, Key=f"reports/{USER}/index.html")
        out["index_html_bytes_written"] = int(head["ContentLength"])

        def drop_index() -> None:
            s3.delete_object(Bucket=BUCKET, Key=f"reports/{USER}/index.json")

        with _counted(s3) as counter:
            out["rebuild_s"], _ = _best(repeat, drop_index, rewrite)
        out["rebuild_requests"] = {k: v // repeat for k, v in counter.calls.items() if k != "DeleteObject"}
        restore()

        clients: list[Any] = []
        real = _aws.make_client

        def make_client(service: str, region: str | None) -> Any:
            client = real(service, region)
            clients.append(client)
            return client

        _aws.make_client = make_client
        try:

            def list_all() -> int:
                with contextlib.redirect_stdout(io.StringIO()) as buffer, contextlib.redirect_stderr(io.StringIO()):
                    code = main(["reports", "list", "--limit", "0"])
                assert code == 0, code
                return buffer.getvalue().count("\n")

            out["list_s"], lines = _best(repeat, lambda: None, list_all)
            out["list_lines"] = lines
            out["list_without_index_s"], lines = _best(repeat, drop_index, list_all)
            out["list_without_index_lines"] = lines
        finally:
            _aws.make_client = real
    return out


def measure_command(jobs: int, repeat: int) -> dict[str, Any]:
    """`profstack reports list --limit 0` as a user runs it: a new process (interpreter start and imports
    included) against moto's HTTP server on localhost (real HTTP round-trips, no network latency)."""
    import subprocess
    import sys

    import boto3

    from demo.run import emulator

    out: dict[str, Any] = {}
    with emulator() as endpoint:
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        _seed(s3, _rows(jobs))
        env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "PROFSTACK_TRACE_BUCKET": BUCKET, "PROFSTACK_USER": USER}
        env["PYTHONPATH"] = str(REPO_ROOT)

        def run(*args: str) -> int:
            done = subprocess.run(
                [sys.executable, "-m", "profstack", *args], env=env, capture_output=True, text=True, check=True
            )
            return done.stdout.count("\n")

        out["command_help_s"], _ = _best(repeat, lambda: None, lambda: run("reports", "list", "--help"))
        out["command_list_s"], out["command_list_lines"] = _best(
            repeat, lambda: None, lambda: run("reports", "list", "--limit", "0")
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reports_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    result = measure(args.jobs, args.repeat)
    result.update(measure_command(args.jobs, args.repeat))
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["load_average"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
