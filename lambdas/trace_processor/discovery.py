"""Where a job's trace files are: the prefixes searched (only the owner's, scope.py). Listing them and choosing
the job's evidence among them: evidence.py."""

from __future__ import annotations

from lambdas.trace_processor.aws import S3Location
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.scope import read_prefixes


def trace_prefixes(ctx: JobContext, env: ProcessorEnv) -> list[S3Location]:
    """Where a job's traces may be: its TensorBoard folder (kept only inside the owner's space, see
    job.job_context), traces/<user>/<job>/, tensorboard/<user>/<job>/, and the extra prefix templates."""
    return read_prefixes(ctx.user, ctx.job, ctx.tensorboard, env)
