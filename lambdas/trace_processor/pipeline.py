"""What the processor does for one finished training job:

DescribeTrainingJob (job.py) -> tag legacy rule output (legacy_rule_output.py)
-> find traces (discovery.py) -> fan out (routing.py) | analyse here (engine.py)
-> publish the report (outputs.py, notification.py)
"""

from __future__ import annotations

from lambdas.trace_processor.aws import Clients
from lambdas.trace_processor.discovery import find_traces, trace_prefixes
from lambdas.trace_processor.engine import Engine, analyze_objects
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.events import TrainingJobStateChange
from lambdas.trace_processor.job import Outcome, describe_job, job_context
from lambdas.trace_processor.legacy_rule_output import allowed_buckets, rule_output_prefixes, tag_rule_output
from lambdas.trace_processor.outputs import no_traces_summary, publish_report, write_perfetto
from lambdas.trace_processor.routing import needs_fanout, start_fanout
from profstack import metric_names as m


def process_job(event: TrainingJobStateChange, *, env: ProcessorEnv, clients: Clients, engine: Engine) -> Outcome:
    if not event.is_terminal:
        return Outcome(event.job_name, event.status, "ignored")
    describe = describe_job(clients.sagemaker, event.job_name)
    ctx = job_context(event, describe, env)
    tagged = 0
    if env.legacy_tagging:
        tagged = tag_rule_output(clients.s3, rule_output_prefixes(describe, ctx.job), allowed_buckets(env))
    prefixes = trace_prefixes(ctx, env)
    objects = find_traces(clients.s3, prefixes)
    if not objects:
        outcome = publish_report(
            clients, env, ctx, no_traces_summary(ctx, prefixes), render_html=engine.render_html, trace_bytes=0
        )
    elif needs_fanout(objects, env):
        started = start_fanout(clients, env, ctx, objects)
        outcome = Outcome(
            ctx.job,
            ctx.status,
            "fanned_out" if started else "fanout_already_started",
            ctx.reports.child("report.html").uri,
            {m.JOBS_FANNED_OUT: 1.0, m.TRACE_FILES: float(len(objects))},
        )
    else:
        summary = analyze_objects(clients.s3, engine, env, objects)
        write_perfetto(clients.s3, engine, ctx, objects, summary)
        outcome = publish_report(
            clients,
            env,
            ctx,
            summary,
            render_html=engine.render_html,
            trace_bytes=sum(o.size for o in objects),
        )
    outcome.tagged_rule_output = tagged
    return outcome
