"""Where a job's trace files are: the prefixes searched (only the owner's, scope.py), and the trace
objects found under them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lambdas.trace_processor.aws import S3Location, S3Object, list_objects
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.scope import read_prefixes
from profstack import layout

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def trace_prefixes(ctx: JobContext, env: ProcessorEnv) -> list[S3Location]:
    """Where a job's traces may be: its TensorBoard folder (kept only inside the owner's space, see
    job.job_context), traces/<user>/<job>/, tensorboard/<user>/<job>/, and the extra prefix templates."""
    return read_prefixes(ctx.user, ctx.job, ctx.tensorboard, env)


def find_traces(s3: S3Client, prefixes: Sequence[S3Location], *, limit: int | None = None) -> list[S3Object]:
    """The job's trace files, by key. With `limit`, listing stops one file past it (so a caller can tell that
    there were more): a job with a million tiny files costs a bounded listing, not an unbounded one."""
    objects: dict[tuple[str, str], S3Object] = {}
    for prefix in prefixes:
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if layout.is_trace_key(obj.key):
                objects.setdefault((obj.bucket, obj.key), obj)
                if limit is not None and len(objects) > limit:
                    break
        if limit is not None and len(objects) > limit:
            break
    return sorted(objects.values(), key=lambda o: (o.bucket, o.key))


def cap_files(objects: list[S3Object], limit: int) -> tuple[list[S3Object], dict[str, Any] | None]:
    """At most `limit` files (the first by key), and the job warning that says files were left out."""
    if len(objects) <= limit:
        return objects, None
    warning = {
        "type": "TooManyTraceFiles",
        "message": f"more than {limit:,} trace files: the first {limit:,} by key were analysed and the rest left "
        "out (processing.max_files_per_job); the report covers those files only",
    }
    return objects[:limit], warning
