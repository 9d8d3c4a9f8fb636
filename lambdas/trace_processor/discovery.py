"""Where a job's trace files are: the prefixes searched (only the owner's, scope.py), and the trace
objects found under them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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


def find_traces(s3: S3Client, prefixes: Sequence[S3Location]) -> list[S3Object]:
    objects: dict[tuple[str, str], S3Object] = {}
    for prefix in prefixes:
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if layout.is_trace_key(obj.key):
                objects.setdefault((obj.bucket, obj.key), obj)
    return sorted(objects.values(), key=lambda o: (o.bucket, o.key))
