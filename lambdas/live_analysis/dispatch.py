"""Lambda entry point of the live-analysis dispatcher, run every `processing.live.interval_minutes` by an
EventBridge schedule: which jobs run now (SageMaker, never an event), and one asynchronous analyser invocation per
eligible job, round-robin by owner, within the run's time budget (jobs.py), so one job's analysis never delays
another's and one owner's many jobs never delay another owner's.

Between runs the cursor lives in one item of the idempotency table (STATE_ID): the table's resource policy already
lets only the processing roles and break-glass touch its items (a tenant cannot plant a cursor), and the dispatcher
may read and write that one item only (an IAM condition on dynamodb:LeadingKeys, stacks/components/live_analysis.py).
A state that cannot be read is a fresh start; one that cannot be written costs the next run its rotation, and is an
error (the Errors alarm)."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lambdas.live_analysis.dispatch_env import DispatchEnv
from lambdas.live_analysis.jobs import Budget, DispatchError, DispatchState, RunResult, TrainingJobs, run
from profstack.actions import DISPATCH_STATE_ID

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sagemaker import SageMakerClient

logger = Logger()
metrics = Metrics()
ENV = DispatchEnv.from_environ()
#: the idempotency table item that carries the dispatcher's state (no TTL: it is rewritten every run)
STATE_ID = DISPATCH_STATE_ID
#: seconds of the invocation kept back from the budget: saving the state, logging, metrics
MARGIN_S = 10.0


@lru_cache(maxsize=1)
def _clients() -> tuple[SageMakerClient, LambdaClient, DynamoDBClient]:
    config = Config(retries={"mode": "standard", "max_attempts": 5})  # throttled Describe calls back off
    return (
        boto3.client("sagemaker", config=config),
        boto3.client("lambda", config=config),
        boto3.client("dynamodb", config=config),
    )


def load_state(dynamodb: DynamoDBClient | None, table: str | None) -> DispatchState:
    if dynamodb is None or not table:
        return DispatchState()
    try:
        item = dynamodb.get_item(TableName=table, Key={"id": {"S": STATE_ID}}, ConsistentRead=True).get("Item")
    except (ClientError, BotoCoreError) as exc:
        logger.warning("dispatcher state unreadable; starting afresh", extra={"error": str(exc)[:300]})
        return DispatchState()
    return DispatchState.from_json((item or {}).get("state", {}).get("S"))


def save_state(dynamodb: DynamoDBClient | None, table: str | None, state: DispatchState) -> str | None:
    """None, or why the state could not be saved."""
    if dynamodb is None or not table:
        return None
    try:
        dynamodb.put_item(TableName=table, Item={"id": {"S": STATE_ID}, "state": {"S": state.to_json()}})
    except (ClientError, BotoCoreError) as exc:
        return f"state not saved: {str(exc)[:200]}"
    return None


def dispatch(
    *,
    sagemaker: SageMakerClient,
    lambda_client: LambdaClient,
    env: DispatchEnv,
    dynamodb: DynamoDBClient | None = None,
    seconds: float = 60.0,
    clock: Any = time.monotonic,
) -> RunResult:
    """One run within `seconds`; then, if some job could not be judged or the state not saved, raise
    (DispatchError): the function's Errors alarm fires, and the next run tries again."""

    def invoke(job: str) -> None:
        lambda_client.invoke(
            FunctionName=env.analyser_function, InvocationType="Event", Payload=json.dumps({"job": job}).encode()
        )

    state = load_state(dynamodb, env.state_table)
    result = run(
        TrainingJobs(sagemaker),
        invoke,
        rules=env.owner_rules(),
        tag_filter=env.tag_filter,
        state=state,
        budget=Budget(seconds, clock),
    )
    problems = [*result.failures]
    unsaved = save_state(dynamodb, env.state_table, result.state)
    if unsaved:
        problems.append(unsaved)
    if problems:
        raise DispatchError(
            f"{len(problems)} problem(s) (every other job was judged and dispatched): " + "; ".join(problems[:10])
        )
    return result


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    sagemaker, lambda_client, dynamodb = _clients()
    seconds = max(context.get_remaining_time_in_millis() / 1000.0 - MARGIN_S, 1.0)
    started = time.monotonic()
    result = dispatch(sagemaker=sagemaker, lambda_client=lambda_client, env=ENV, dynamodb=dynamodb, seconds=seconds)
    metrics.add_metric(name="LiveJobsDispatched", unit=MetricUnit.Count, value=len(result.invoked))
    metrics.add_metric(name="LiveJobsDeferred", unit=MetricUnit.Count, value=result.deferred)
    logger.info(
        "live analysis dispatched",
        extra={
            "jobs": result.invoked[:100],
            "count": len(result.invoked),
            "listed": result.listed,
            "judged": result.judged,
            "deferred": result.deferred,
            "listing_cut": result.listing_cut,
            "seconds": round(time.monotonic() - started, 2),
        },
    )
    return {"jobs": result.invoked, "deferred": result.deferred}
