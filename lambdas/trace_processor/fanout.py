"""Fan-out steps (Step Functions Distributed Map): analyse one file, then aggregate the job.

Input of both steps is the execution input written by routing.start_fanout:
    {"context": JobContext.to_json(), "manifest": {"bucket", "key"}, "partials": {"bucket", "prefix"}}
and, for one map item, "item": {"index", "bucket", "key", "size", "route"}.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from lambdas.trace_processor.aws import Clients, S3Location, S3Object, error_code, get_json, put_json
from lambdas.trace_processor.engine import Engine, analyze_objects
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext, Outcome
from lambdas.trace_processor.outputs import publish_report, write_perfetto
from lambdas.trace_processor.routing import partial_location
from lambdas.trace_processor.summary_tools import merge_partials


class FanoutInputError(ValueError):
    """The step's input is not what the state machine sends."""


def _item(payload: Mapping[str, Any]) -> S3Object:
    item = payload.get("item")
    if not isinstance(item, Mapping):
        raise FanoutInputError("map item input has no 'item'")
    return S3Object(str(item["bucket"]), str(item["key"]), int(item.get("size", 0)))


def analyze_one(payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, engine: Engine) -> dict[str, Any]:
    """One map item: analyse one file, write its partial summary and its trimmed trace."""
    ctx = JobContext.from_json(payload["context"])
    obj = _item(payload)
    index = int(payload["item"]["index"])
    summary = analyze_objects(clients.s3, engine, env, [obj])
    write_perfetto(clients.s3, engine, ctx, [obj], summary)
    target = partial_location(ctx, index)
    put_json(clients.s3, target, summary)
    return {"index": index, "partial": target.uri, "complete": bool(summary.get("complete", False))}


def aggregate(payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, engine: Engine) -> Outcome:
    """Merge every partial into the job summary; a file without a partial is flagged, not fatal."""
    ctx = JobContext.from_json(payload["context"])
    manifest = payload["manifest"]
    items = get_json(clients.s3, S3Location(str(manifest["bucket"]), str(manifest["key"])))
    if not isinstance(items, list):
        raise FanoutInputError("manifest is not a JSON array")
    partials: list[Mapping[str, Any]] = []
    missing: list[Mapping[str, Any]] = []
    for item in items:
        name = f"s3://{item['bucket']}/{item['key']}"
        try:
            partials.append(get_json(clients.s3, partial_location(ctx, int(item["index"]))))
        except ClientError as exc:
            if error_code(exc) not in {"NoSuchKey", "404"}:
                raise
            reason = (
                "too large for Lambda and the SageMaker Processing job did not finish"
                if item.get("route") == "processing"
                else "analysis of this file failed (see the state machine execution)"
            )
            missing.append({"name": name, "size": item.get("size"), "reason": reason})
    summary = merge_partials(partials, missing, cross_rank=lambda table: engine.cross_rank(table, env.rule_thresholds))
    return publish_report(
        clients,
        env,
        ctx,
        summary,
        render_html=engine.render_html,
        trace_bytes=sum(int(i.get("size", 0)) for i in items),
    )
