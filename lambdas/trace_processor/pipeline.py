"""What the processor does for one finished training job:

DescribeTrainingJob + ListTags: the owner (job.py) -> tag legacy rule output (legacy_rule_output.py)
-> the owner's folders (scope.py) -> the trace reader: the reader role, its session limited to them
-> find traces (discovery.py) -> fan out (routing.py) | analyse here (engine.py)
-> the job's CloudWatch instance metrics and system rules (system_view.py; once per job: here for a
   one-Lambda or no-traces job, in the aggregate step for a fanned-out one)
-> publish the report (outputs.py, notification.py)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, S3Location
from lambdas.trace_processor.discovery import cap_files, find_traces, trace_prefixes
from lambdas.trace_processor.engine import Engine, analyze_objects
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.events import TrainingJobStateChange
from lambdas.trace_processor.job import JobContext, Outcome, describe_job, job_context, job_tags
from lambdas.trace_processor.legacy_rule_output import (
    allowed_buckets,
    owned_rule_output,
    rule_output_prefixes,
    tag_rule_output,
)
from lambdas.trace_processor.outputs import no_traces_summary, publish_report, write_perfetto
from lambdas.trace_processor.routing import needs_fanout, sample_estimates, start_fanout
from lambdas.trace_processor.scope import owner_read_spaces, session_name, session_policy
from lambdas.trace_processor.system_view import SystemView, for_job
from profstack.jobs import metric_names as m

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def trace_reader(clients: Clients, env: ProcessorEnv, ctx: JobContext, prefixes: Sequence[S3Location]) -> S3Client:
    """The S3 client every trace read of this job goes through: an AssumeRole session of the reader
    role whose session policy names only `prefixes` (the owner's folders). Without a reader role (local
    runs, the demo) the function's own client."""
    if not env.reader_role_arn:
        return clients.s3
    if clients.sts is None:
        raise RuntimeError("READER_ROLE_ARN is set but no STS client was created")
    partition = env.reader_role_arn.split(":", 2)[1]
    return aws.assumed_s3_client(
        clients.sts,
        role_arn=env.reader_role_arn,
        session_name=session_name(ctx.job),
        policy=session_policy(
            prefixes, partition=partition, key_arn=env.trace_key_arn, owner_spaces=owner_read_spaces(ctx.user, env)
        ),
    )


def system_view(
    clients: Clients, env: ProcessorEnv, ctx: JobContext, describe: Mapping[str, Any], *, final_attempt: bool = True
) -> SystemView:
    """The job's system view. On the last delivery an unreadable CloudWatch is a stated status, never a lost
    report; before it, a transient CloudWatch fault raises so SQS retries the record (read before the
    analysis, so a retry costs no analysis)."""
    return for_job(clients, env, ctx, describe, retry_transient=not final_attempt)


def process_job(
    event: TrainingJobStateChange, *, env: ProcessorEnv, clients: Clients, engine: Engine, final_attempt: bool = True
) -> Outcome:
    """One job's report. ``final_attempt``: this is the record's last SQS delivery (handler.py), so a transient
    CloudWatch fault is reported as "unavailable" instead of retried."""
    if not event.is_terminal:
        return Outcome(event.job_name, event.status, "ignored")
    describe = describe_job(clients.sagemaker, event.job_name)
    ctx = job_context(event, describe, job_tags(clients.sagemaker, describe), env)
    tagged = 0
    if env.legacy_tagging:
        prefixes = owned_rule_output(rule_output_prefixes(describe, ctx.job), ctx.user, env)
        tagged = tag_rule_output(clients.s3, prefixes, allowed_buckets(env))
    prefixes = trace_prefixes(ctx, env)
    reader = trace_reader(clients, env, ctx, prefixes)
    objects, too_many = cap_files(find_traces(reader, prefixes, limit=env.max_files_per_job), env.max_files_per_job)
    if too_many is not None:
        ctx = replace(ctx, warnings=(*ctx.warnings, too_many))  # the report, summary and e-mail say so
    objects = sample_estimates(reader, objects)  # route by work (JSON bytes, events), not compressed bytes
    if not objects:
        outcome = publish_report(
            clients,
            env,
            ctx,
            no_traces_summary(ctx, prefixes),
            render_html=engine.render_html,
            trace_bytes=0,
            system=system_view(clients, env, ctx, describe, final_attempt=final_attempt),
            describe=describe,
        )
    elif needs_fanout(objects, env):
        started = start_fanout(clients, env, ctx, objects, describe=describe, request=event.detail.reanalysis)
        outcome = Outcome(
            ctx.job,
            ctx.status,
            "fanned_out" if started else "fanout_already_started",
            ctx.reports.child("report.html").uri,
            {m.JOBS_FANNED_OUT: 1.0, m.TRACE_FILES: float(len(objects))},
        )
    else:
        view = system_view(clients, env, ctx, describe, final_attempt=final_attempt)
        summary = analyze_objects(reader, engine, env, objects)
        write_perfetto(clients.s3, engine, ctx, objects, summary, source_s3=reader)
        outcome = publish_report(
            clients,
            env,
            ctx,
            summary,
            render_html=engine.render_html,
            trace_bytes=sum(o.size for o in objects),
            system=view,
            describe=describe,
        )
    outcome.tagged_rule_output = tagged
    return outcome
