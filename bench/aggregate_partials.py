"""Time and memory of the fan-out aggregate step over N partials, in moto (docs/processing.md).

    python -m bench.aggregate_partials 1000 10000

Each N runs in a fresh child process: moto S3 holds one real partial (the analyze-file step's output on
samples/traces/hta/trace_filter/sampled_rank-0.json.gz) copied N times with distinct ranks, then
`lambdas.trace_processor.fanout.aggregate` runs with the real engine (merge, cross-rank rules, HTML report,
summary, e-mail). Reported: wall time of aggregate(), the process's peak RSS, and its RSS just before
aggregate() (moto's copies of the partials live in the same process, so the step's own share is the
difference).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE = REPO_ROOT / "samples" / "traces" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
_SENTINEL = 987654321


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(n: int) -> dict[str, float]:
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from moto import mock_aws

    from lambdas.trace_processor.aws import Clients, S3Object
    from lambdas.trace_processor.engine import ProfStackEngine, analyze_objects
    from lambdas.trace_processor.env import ProcessorEnv
    from lambdas.trace_processor.fanout import aggregate
    from lambdas.trace_processor.job import JobContext
    from lambdas.trace_processor.routing import input_location, partial_location

    with mock_aws():
        s3 = boto3.client("s3")
        sns = boto3.client("sns")
        bucket = "bench-traces"
        s3.create_bucket(Bucket=bucket)
        topic = sns.create_topic(Name="bench")["TopicArn"]
        env = ProcessorEnv.model_validate(
            {"TRACE_BUCKET": bucket, "IDEMPOTENCY_TABLE": "t", "TOPIC_ARN": topic, "USER_TAG_KEY": "profstack:user"}
        )
        ctx = JobContext("bench-job", "Completed", "alice", bucket, time.time(), None)
        engine = ProfStackEngine()
        s3.upload_file(str(SAMPLE), bucket, "traces/alice/bench-job/rank.json.gz")
        obj = S3Object(bucket, "traces/alice/bench-job/rank.json.gz", SAMPLE.stat().st_size)
        partial = analyze_objects(s3, engine, env, [obj])
        partial["ranks"][0]["rank"] = partial["inputs"][0]["rank"] = _SENTINEL
        partial["cross_rank"]["table"][0]["rank"] = _SENTINEL
        template = json.dumps(partial, indent=2, sort_keys=True).encode()
        marker = b'"rank": %d' % _SENTINEL
        items = []
        for i in range(n):
            target = partial_location(ctx, i)
            s3.put_object(Bucket=bucket, Key=target.key, Body=template.replace(marker, b'"rank": %d' % i))
            items.append({"index": i, "bucket": bucket, "key": f"{obj.key}.{i}", "size": obj.size, "route": "lambda"})
        manifest = ctx.reports.child("partials", "manifest.json")
        s3.put_object(Bucket=bucket, Key=manifest.key, Body=json.dumps(items).encode())
        payload = {"context": ctx.to_json(), "manifest": {"bucket": bucket, "key": manifest.key}}
        # what routing.start_fanout stores next to the manifest (the aggregate checks its input against it)
        s3.put_object(Bucket=bucket, Key=input_location(ctx).key, Body=json.dumps(payload).encode())
        clients = Clients(s3=s3, sagemaker=boto3.client("sagemaker"), sns=sns)
        before = _rss_mb()
        started = time.monotonic()
        outcome = aggregate(payload, env=env, clients=clients, engine=engine)
        seconds = time.monotonic() - started
        summary_bytes = s3.head_object(Bucket=bucket, Key=ctx.reports.child("summary.json").key)["ContentLength"]
        report_bytes = s3.head_object(Bucket=bucket, Key=ctx.reports.child("report.html").key)["ContentLength"]
    assert outcome.action == "reported"
    return {
        "partials": n,
        "partial_bytes": len(template),
        "seconds": round(seconds, 1),
        "rss_before_mb": round(before),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "summary_mb": round(summary_bytes / 2**20, 1),
        "report_mb": round(report_bytes / 2**20, 1),
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(child(int(argv[1]))))
        return 0
    for n in [int(a) for a in argv] or [1000, 10000]:
        done = subprocess.run(
            [sys.executable, "-m", "bench.aggregate_partials", "--child", str(n)],
            cwd=os.getcwd(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return done.returncode
        print(done.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
