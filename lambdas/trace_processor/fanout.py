"""Fan-out steps (Step Functions Distributed Map): analyse one file, then aggregate the job.

Input of both steps is the execution input written by routing.start_fanout:
    {"context": JobContext.to_json(), "manifest": {"bucket", "key"}, "partials": {"bucket", "prefix"},
     "job": system_view.describe_for_fanout(DescribeTrainingJob)}
and, for one map item, "item": {"index", "bucket", "key", "size", "route"}; the aggregate step also gets
"attempt": the state's `$$.State.RetryCount` (0 on the first run; see final_attempt).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

from botocore.exceptions import ClientError

from lambdas.trace_processor.aws import Clients, S3Object, error_code, get_json, put_json
from lambdas.trace_processor.engine import Engine, analyze_objects
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext, Outcome
from lambdas.trace_processor.outputs import publish_report, write_perfetto
from lambdas.trace_processor.routing import fanout_key, input_location, manifest_location, partial_location
from lambdas.trace_processor.scope import owner_read_spaces
from lambdas.trace_processor.slots import LEASE_MARGIN_S, SlotStore
from lambdas.trace_processor.system_view import SystemView, for_job
from profstack.analysis.merge import PartialMerger, partial_problem
from profstack.jobs.links import job_links


class FanoutInputError(ValueError):
    """The step's input is not what the state machine sends."""


def trusted_context(
    payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, fields: tuple[str, ...] = ()
) -> JobContext:
    """The input's job context, checked against the stored execution input (trusted_input)."""
    return trusted_input(payload, env=env, clients=clients, fields=fields)[0]


def trusted_input(
    payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, fields: tuple[str, ...] = ()
) -> tuple[JobContext, Mapping[str, Any]]:
    """The input's job context, if the processor sent it when it started this job's fan-out: it stored that
    execution input (routing.start_fanout: reports/<user>/<job>/partials/execution-input.json in the trace
    bucket, which only the processing roles may write). `fields`: the other input keys the step uses, which must
    match the stored ones too. The steps run with roles that read every user's traces, and the input is
    whatever the caller of StartExecution (or of the function) sent: without this, a user allowed those calls
    could pair their own job with another user's manifest (the other's traces analysed into their report), or
    re-run another user's job with another status, owner, TensorBoard folder, warnings or job description (its
    FailureReason goes into the e-mail)."""
    raw = payload.get("context")
    if not isinstance(raw, Mapping):
        raise FanoutInputError("the input has no job 'context'")
    try:
        ctx = JobContext.from_json(raw)
        location = input_location(ctx)  # the owner and job must be plain key segments (layout)
    except (KeyError, TypeError, ValueError) as exc:
        raise FanoutInputError(f"the input's 'context' is not a job context: {exc}") from None
    if ctx.trace_bucket != env.trace_bucket:
        raise FanoutInputError(f"the input's job context names bucket {ctx.trace_bucket[:80]!r}, not the trace bucket")
    try:
        stored = get_json(clients.s3, location)
    except ClientError as exc:
        if error_code(exc) not in {"NoSuchKey", "404"}:
            raise
        raise FanoutInputError(f"no fan-out was started for this job: {location.uri} does not exist") from None
    if not isinstance(stored, Mapping):
        raise FanoutInputError(f"{location.uri} is not an execution input")
    try:
        same = JobContext.from_json(stored["context"]).to_json() == ctx.to_json()
    except (KeyError, TypeError, ValueError):
        same = False
    sent = json.loads(json.dumps({k: payload.get(k) for k in fields}, default=str))  # as the stored copy reads
    differing = [k for k in fields if sent[k] != stored.get(k)]
    if not same or differing:
        what = ", ".join(["context"] * (not same) + differing)
        raise FanoutInputError(f"the input's {what} is not what the processor sent (stored in {location.uri})")
    return ctx, stored


#: manifests a warm analyze-file container keeps (by location and digest): one read per job, not per item
MANIFEST_CACHE_SIZE = 4
_manifests: OrderedDict[tuple[str, str, str], list[Any]] = OrderedDict()


def _stored_manifest(clients: Clients, ctx: JobContext, stored: Mapping[str, Any]) -> list[Any]:
    """This job's manifest (at the job's own key, never one the input names), as the processor wrote it: when the
    stored execution input carries its digest, the bytes must match it, and the parsed manifest is cached."""
    location = manifest_location(ctx)
    ref = stored.get("manifest")
    digest = str(ref.get("sha256") or "") if isinstance(ref, Mapping) else ""
    cached = (location.bucket, location.key, digest)
    if digest and cached in _manifests:
        _manifests.move_to_end(cached)
        return _manifests[cached]
    body = clients.s3.get_object(Bucket=location.bucket, Key=location.key)["Body"]
    try:
        data = body.read()
    finally:
        body.close()
    if digest and hashlib.sha256(data).hexdigest() != digest:
        raise FanoutInputError(f"{location.uri} is not the manifest this fan-out was started with")
    items = json.loads(data)
    if not isinstance(items, list):
        raise FanoutInputError(f"{location.uri} is not a JSON array")
    if digest:
        _manifests[cached] = items
        while len(_manifests) > MANIFEST_CACHE_SIZE:
            _manifests.popitem(last=False)
    return items


def manifest_item(payload: Mapping[str, Any], ctx: JobContext, stored: Mapping[str, Any], clients: Clients) -> S3Object:
    """The map item, if it is exactly the item of its index in THIS job's stored manifest (#42 item 8b): an item of
    another job of the same owner, sent with a genuine context of this one, would otherwise be analysed and its
    partial would overwrite one of this job's."""
    item = payload.get("item")
    if not isinstance(item, Mapping):
        raise FanoutInputError("map item input has no 'item'")
    index = item.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise FanoutInputError(f"map item index {index!r:.40} is not an integer")
    items = _stored_manifest(clients, ctx, stored)
    sent = json.loads(json.dumps(item, default=str))  # as the stored manifest reads
    if not 0 <= index < len(items) or items[index] != sent:
        raise FanoutInputError(
            f"map item {index} is not item {index} of this job's manifest ({manifest_location(ctx).uri}); refused"
        )
    etag = item.get("etag")
    return S3Object(str(item["bucket"]), str(item["key"]), int(item.get("size", 0)), etag=str(etag) if etag else None)


def _owned_item(obj: S3Object, ctx: JobContext, env: ProcessorEnv) -> S3Object:
    """A map item the job may read: inside its owner's space (where the processor found it, scope.py)."""
    spaces = owner_read_spaces(ctx.user, env)
    if not any(obj.bucket == space.bucket and obj.key.startswith(space.key) for space in spaces):
        raise FanoutInputError(f"map item {obj.uri[:300]} is outside the space of the job's owner {ctx.user!r}")
    return obj


def analyze_one(payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, engine: Engine) -> dict[str, Any]:
    """One map item: analyse one file, write its partial summary and its trimmed trace. The job context must be
    the stored one (trusted_input), the item the one of its index in the job's stored manifest (manifest_item), and
    the file inside its owner's space."""
    ctx, stored = trusted_input(payload, env=env, clients=clients)
    obj = _owned_item(manifest_item(payload, ctx, stored, clients), ctx, env)
    index = int(payload["item"]["index"])
    store = SlotStore(clients.dynamodb, env.idempotency_table) if clients.dynamodb is not None else None
    lease = f"{ctx.user}/{ctx.job}-{ctx.status}/{index}"
    if store is not None:  # the owner's fair share of the slots, or OwnerBusyError (retried by the state machine)
        store.acquire(lease, ctx.user, env.fanout_reserved_concurrency, env.function_timeout_s + LEASE_MARGIN_S)
    try:
        summary = analyze_objects(clients.s3, engine, env, [obj])
        write_perfetto(clients.s3, engine, ctx, [obj], summary)
        target = partial_location(ctx, index)
        put_json(clients.s3, target, summary)
    finally:
        if store is not None:
            store.release(lease)
    return {"index": index, "partial": target.uri, "complete": bool(summary.get("complete", False))}


# Partials are read this many at a time (boto3 clients are thread-safe; each read is one small GetObject).
AGGREGATE_READERS = 32
# Keys of a partial summary the merge uses; the rest (options, generator, per-file cross-rank) is dropped
# as soon as a partial is read, so the step holds one slim copy of each partial, not the whole document.
_KEPT_KEYS = ("schema_version", "generator", "options", "rank_files_merged", "complete", "inputs", "errors",
              "warnings", "runs", "ranks", "findings")  # fmt: skip

T = TypeVar("T")
R = TypeVar("R")


def bounded_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int) -> Iterator[R]:
    """`map(fn, items)` on a thread pool, in order, with at most `2 * workers` calls in flight or waiting
    to be consumed (memory stays bounded however many items there are)."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="partials") as pool:
        pending: deque[Future[R]] = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _slim(partial: Mapping[str, Any]) -> dict[str, Any]:
    slim = {k: partial[k] for k in _KEPT_KEYS if k in partial}
    table = (partial.get("cross_rank") or {}).get("table") if isinstance(partial.get("cross_rank"), Mapping) else None
    slim["cross_rank"] = {"table": table or []}
    return slim


def _missing_reason(item: Mapping[str, Any]) -> str:
    return (
        "too large for Lambda and the SageMaker Processing job did not finish"
        if item.get("route") == "processing"
        else "analysis of this file failed (see the state machine execution)"
    )


def final_attempt(payload: Mapping[str, Any], env: ProcessorEnv) -> bool:
    """Whether this run of the aggregate step is its last for a transient CloudWatch fault: the state
    machine's Retry on SystemMetricsTransientError allows AGGREGATE_MAX_ATTEMPTS runs in all
    (stacks/components/fanout_workflow.py sets both from AGGREGATE_ATTEMPTS), and the payload's `attempt` is
    `$$.State.RetryCount`, the retries so far. Without either (an execution of an older definition, a direct
    call) no retry is known to follow, so the run is the last: it publishes, as it always did."""
    attempt = payload.get("attempt")
    if attempt is None or env.aggregate_max_attempts is None:
        return True
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise FanoutInputError(f"'attempt' is not a retry count: {attempt!r}")
    return attempt + 1 >= env.aggregate_max_attempts


def aggregate(payload: Mapping[str, Any], *, env: ProcessorEnv, clients: Clients, engine: Engine) -> Outcome:
    """Merge every partial into the job summary; a file without a partial is flagged, not fatal.

    First the input (context, manifest, job description) must be what the processor sent (trusted_context):
    nothing, not even CloudWatch, is read for a description the execution input merely claims. Then the system
    view, before any partial: on an attempt that is not the last (final_attempt), a transient CloudWatch fault
    raises SystemMetricsTransientError for Step Functions to retry the step, and such a run has read no partial
    and written nothing.
    Partials are read in parallel (AGGREGATE_READERS) and slimmed as they arrive; measured sizing of the
    Lambda (memory, timeout) in docs/processing.md."""
    ctx = JobContext.from_json(payload["context"])
    # raises unless context, manifest and job description are what the processor sent for `ctx`'s job
    trusted_context(payload, env=env, clients=clients, fields=("manifest", "partials", "job"))
    system = _system_view(clients, env, ctx, payload.get("job"), final=final_attempt(payload, env))
    items = get_json(clients.s3, manifest_location(ctx))
    if not isinstance(items, list):
        raise FanoutInputError("manifest is not a JSON array")

    def read(item: Mapping[str, Any]) -> dict[str, Any] | str | None:
        """The slimmed partial; a string saying why it cannot be merged; None when it never arrived."""
        try:
            raw = get_json(clients.s3, partial_location(ctx, int(item["index"])))
        except ClientError as exc:
            if error_code(exc) not in {"NoSuchKey", "404"}:
                raise
            return None
        except ValueError as exc:  # not JSON (json.JSONDecodeError and UnicodeDecodeError are ValueErrors)
            return f"its partial summary is not JSON ({str(exc)[:120]})"
        problem = partial_problem(raw)
        return f"its partial summary cannot be merged: {problem}" if problem else _slim(raw)

    # folded in one at a time as they arrive (memory and summary size grow by a few hundred bytes a partial)
    merger = PartialMerger(lambda table: engine.cross_rank(table, env.rule_thresholds))
    missing: list[Mapping[str, Any]] = []
    for item, partial in zip(items, bounded_map(read, items, workers=AGGREGATE_READERS), strict=True):
        problem = merger.add(partial) if isinstance(partial, Mapping) else partial
        if problem is not None or partial is None:
            # one bad rank, named in the report: the other ranks' report and the e-mail still go out
            reason = f"its partial summary cannot be merged: {problem}" if isinstance(partial, Mapping) else problem
            name = f"s3://{item['bucket']}/{item['key']}"
            missing.append({"name": name, "size": item.get("size"), "reason": reason or _missing_reason(item)})
    summary = cast(dict[str, Any], merger.finish(missing))
    outcome = publish_report(
        clients,
        env,
        ctx,
        summary,
        render_html=engine.render_html,
        trace_bytes=sum(int(i.get("size", 0)) for i in items),
        system=system,
        describe=payload.get("job") if isinstance(payload.get("job"), Mapping) else None,
    )
    if clients.dynamodb is not None:  # this owner's fan-out no longer counts towards the slots' shares
        SlotStore(clients.dynamodb, env.idempotency_table).unregister(fanout_key(ctx))
    return outcome


def _system_view(clients: Clients, env: ProcessorEnv, ctx: JobContext, job: Any, *, final: bool) -> SystemView:
    """The job's system view from the description the execution input carries (read once, here). Before the
    last attempt a transient CloudWatch fault raises SystemMetricsTransientError (the step is retried); on
    it, or for a permanent fault, the view says "unavailable" with the reason."""
    if not isinstance(job, Mapping) or not job.get("TrainingJobName"):
        return SystemView(
            "unavailable",
            "the fan-out execution input carries no job description (an execution started before this version)",
            None,
            links=job_links(env.region or ctx.region, env.name_prefix, ctx.job),
        )
    return for_job(clients, env, ctx, job, retry_transient=not final)
