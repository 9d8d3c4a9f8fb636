"""The live dispatcher with many running jobs (#42 item 10).

    python -m bench.live_dispatch 1200

Two measurements:

1. **In moto, in-process**: N running jobs of alice's and one of bob's (named to sort last) registered in moto's
   SageMaker, one dispatcher run (lambdas/live_analysis/dispatch.py) with the deployed budget; wall time, and where
   bob's job came in the invocation order.
2. **At SageMaker's pace, simulated**: every SageMaker call takes LATENCY_S and every asynchronous invoke
   INVOKE_S (a simulated clock, no waiting). The dispatcher before #42 judged every job one call after another
   (DescribeTrainingJob, then ListTags), sorted by name, and invoked only after it had judged them all; the one now
   judges 8 at a time within its budget and invokes round-robin by owner. For each: when the first job and bob's
   job were invoked, and whether the run fit its timeout (before: 120 s; now: 240 s less a 10 s margin).

The latencies are assumptions (not measured against AWS here): 50 ms a control-plane call, 30 ms an asynchronous
Lambda invoke.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

LATENCY_S = 0.05
INVOKE_S = 0.03
BEFORE_TIMEOUT_S = 120.0
NOW_BUDGET_S = 230.0


def _moto(n: int) -> dict[str, Any]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["ANALYSER_FUNCTION"] = "profstack-live-analyser"
    import boto3
    from moto import mock_aws
    from moto.sagemaker.models import sagemaker_backends

    from lambdas.live_analysis import dispatch
    from lambdas.live_analysis.dispatch_env import DispatchEnv

    with mock_aws():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        for i in range(n + 1):
            owner, name = ("bob", "zz-bob-job") if i == n else ("alice", f"alice-sweep-{i:05d}")
            sm.create_training_job(
                TrainingJobName=name,
                AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
                RoleArn=f"arn:aws:iam::123456789012:role/profstack/users/{owner}/ExecutionRole",
                OutputDataConfig={"S3OutputPath": "s3://out/o"},
                ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
                StoppingCondition={"MaxRuntimeInSeconds": 3600},
                TensorBoardOutputConfig={"S3OutputPath": f"s3://traces/tensorboard/{owner}/"},
                Tags=[{"Key": "profstack:user", "Value": owner}],
            )
        for job in sagemaker_backends["123456789012"]["us-east-1"].training_jobs.values():
            job.training_job_status = "InProgress"

        class Lambda:
            def invoke(self, **kwargs: Any) -> dict[str, Any]:
                return {"StatusCode": 202}

        env = DispatchEnv.from_environ({"ANALYSER_FUNCTION": "f", "USERS": '["alice", "bob"]'})
        started = time.monotonic()
        result = dispatch.dispatch(sagemaker=sm, lambda_client=Lambda(), env=env, seconds=NOW_BUDGET_S)  # type: ignore[arg-type]
        wall = time.monotonic() - started
    return {
        "jobs": n + 1,
        "wall_s": round(wall, 1),
        "invoked": len(result.invoked),
        "bob_position": result.invoked.index("zz-bob-job") + 1,
    }


def _before(n: int) -> dict[str, Any]:
    """The dispatcher at 7b6ecc3: list all, then describe + list tags one by one (sorted), then invoke one by one."""
    clock = (n + 1 + 99) // 100 * LATENCY_S + (n + 1) * 2 * LATENCY_S
    first = clock + INVOKE_S
    bob = clock + (n + 1) * INVOKE_S  # bob's name sorts last
    return {
        "judging_s": round(clock, 1),
        "first_invoke_s": round(first, 1),
        "bob_invoked_s": round(bob, 1),
        "fits_timeout": bob <= BEFORE_TIMEOUT_S,
        "served_before_timeout": 0 if first > BEFORE_TIMEOUT_S else None,
    }


def _now(n: int) -> dict[str, Any]:
    from lambdas.live_analysis.jobs import INVOKE_WORKERS, JUDGE_WORKERS, Budget, DispatchState, OwnerRules, run

    calls = [0]
    invokes = [0]

    def clock() -> float:
        return calls[0] * LATENCY_S / JUDGE_WORKERS + invokes[0] * INVOKE_S / INVOKE_WORKERS

    names = [f"alice-sweep-{i:05d}" for i in range(n)] + ["zz-bob-job"]

    class Source:
        def running_page(self, token: str | None) -> tuple[list[str], str | None]:
            calls[0] += JUDGE_WORKERS  # one page at a time: a whole call's latency
            start = int(token or 0)
            return names[start : start + 100], (str(start + 100) if start + 100 < len(names) else None)

        def describe(self, job: str) -> dict[str, Any]:
            calls[0] += 1
            owner = "bob" if job.startswith("zz-bob") else "alice"
            return {
                "TrainingJobName": job,
                "TrainingJobStatus": "InProgress",
                "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}",
                "RoleArn": f"arn:aws:iam::123456789012:role/profstack/users/{owner}/ExecutionRole",
                "TensorBoardOutputConfig": {"S3OutputPath": "s3://t/tensorboard/x/"},
            }

        def tags(self, arn: str) -> dict[str, str]:
            calls[0] += 1
            return {"profstack:user": "bob" if arn.endswith("zz-bob-job") else "alice"}

    order: list[tuple[str, float]] = []

    def invoke(job: str) -> None:
        invokes[0] += 1
        order.append((job, clock()))

    result = run(
        Source(),
        invoke,
        rules=OwnerRules(users=frozenset({"alice", "bob"})),
        tag_filter=None,
        state=DispatchState(),
        budget=Budget(NOW_BUDGET_S, clock),
    )
    bob = next(t for job, t in order if job == "zz-bob-job")
    return {
        "run_s": round(clock(), 1),
        "first_invoke_s": round(order[0][1], 1),
        "bob_invoked_s": round(bob, 1),
        "bob_position": result.invoked.index("zz-bob-job") + 1,
        "invoked": len(result.invoked),
        "fits_budget": clock() <= NOW_BUDGET_S,
    }


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1200
    print(json.dumps({"before_simulated": _before(n), "now_simulated": _now(n), "now_moto": _moto(n)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
