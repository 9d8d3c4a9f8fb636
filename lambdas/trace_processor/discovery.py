"""Where a job's trace files are: the prefixes searched, and the trace objects found under them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lambdas.trace_processor.aws import S3Location, S3Object, list_objects, parse_s3_uri
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from profstack import layout

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def readable(loc: S3Location, env: ProcessorEnv) -> bool:
    """Inside what the role may read: the trace bucket's trace prefixes, or an extra prefix."""
    if loc.bucket == env.trace_bucket and loc.key.startswith((layout.TRACES_PREFIX, layout.TENSORBOARD_PREFIX)):
        return True
    return any(loc.uri.startswith(extra.rstrip("/") + "/") for extra in env.extra_trace_prefixes)


def trace_prefixes(ctx: JobContext, env: ProcessorEnv) -> list[S3Location]:
    """Where a job's traces may be: its TensorBoard output, the ProfStack layout, extra prefixes.
    A TensorBoard output outside the role's read grant is left out (listing it would only fail with
    AccessDenied on every retry); add it to processing.extra_trace_prefixes to include it."""
    found: list[S3Location] = []
    if ctx.tensorboard is not None and readable(ctx.tensorboard.child(""), env):
        found.append(ctx.tensorboard.child(""))
    found.append(S3Location(ctx.trace_bucket, layout.job_traces_prefix(ctx.user, ctx.job)))
    for extra in env.extra_trace_prefixes:
        found.append(parse_s3_uri(extra).child(ctx.job, ""))
    unique: dict[tuple[str, str], S3Location] = {}
    for loc in found:
        unique.setdefault((loc.bucket, loc.key), loc)
    return list(unique.values())


def find_traces(s3: S3Client, prefixes: Sequence[S3Location]) -> list[S3Object]:
    objects: dict[tuple[str, str], S3Object] = {}
    for prefix in prefixes:
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if layout.is_trace_key(obj.key):
                objects.setdefault((obj.bucket, obj.key), obj)
    return sorted(objects.values(), key=lambda o: (o.bucket, o.key))
