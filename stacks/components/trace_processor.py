"""The trace-processor functions: the SQS consumer and the two fan-out steps, each with its own role;
and the trace-reader role, the only way the processor reads traces (it assumes it per job with a
session policy naming that job owner's folders: lambdas/trace_processor/scope.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from profstack.config import Processing
from profstack.jobs.metric_names import NAMESPACE
from profstack.layout import FANOUT_SLOTS_ID
from stacks.components.iam import key_use_statement, no_resource_type_statement
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import acknowledge_function_baseline
from stacks.components.nag_wildcards import acknowledge_wildcards, default_policy
from stacks.components.python_function import PowertoolsSettings, ProfStackFunction, log_retention
from stacks.components.trace_access import TraceAccess

# SQS visibility must cover the whole batch's processing plus retries (AWS guidance: 6x timeout).
VISIBILITY_TIMEOUT_FACTOR = 6
SQS_BATCH_SIZE = 1  # one job per invocation: a job may take the whole Lambda timeout
# Lambda's environment holds 4 KB in all; the user list must leave room for the rest.
MAX_USERS_ENV_CHARS = 2048
# The fan-out aggregate step, sized from bench/aggregate_partials.py (docs/processing.md): partials fold in one
# at a time (merge.PartialMerger), so 10,000 partials take ~220 MB beyond what the process holds before the step
# (1,196 MB peak with moto's 977 MB of partials in the same process) and 51 s in moto; 1769 MB is one full vCPU
# and about 8x that, and the Lambda maximum of 900 s covers real S3 reads (32 in flight).
AGGREGATE_MEMORY_MB = 1769
AGGREGATE_TIMEOUT_S = 900


WILDCARD_REASONS = {
    r"AwsSolutions-IAM5\[Resource::.*/(traces|tensorboard|reports)/\*\]": "Objects are keyed per user and per "
    "job under this layout prefix (profstack/layout.py); the prefix is the tightest static scope.",
    r"AwsSolutions-IAM5\[Resource::.*/reports/\*/\.notified-\*\]": "Only the per-job e-mail marker objects "
    "(reports/<user>/<job>/.notified-<status>) may be deleted, to retry a failed notification.",
    r"AwsSolutions-IAM5\[Resource::.*/reports/\*/index(-row)?\.json\]": "Only the per-user report index "
    "(reports/<user>/index.json) and the per-job index rows (reports/<user>/<job>/index-row.json) are read, to "
    "rewrite the index by conditional write after each report; the user and job are not known in advance.",
    r"AwsSolutions-IAM5\[Resource::.*/reports/\*/partials/execution-input\.json\]": "Only the stored fan-out "
    "execution inputs (reports/<user>/<job>/partials/execution-input.json, written by the processor), which the "
    "analyze-file step checks its input against; the user and job are not known in advance.",
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.*:\*\]": (
        "Only states:DescribeExecution, on the executions of the fan-out state machine (grant_execution): an "
        "existing execution of a job's name is that job's only if its input is (lambdas/trace_processor/routing.py)."
    ),
    r"AwsSolutions-IAM5\[Resource::.*/\*/rule-output/\*\]": "Legacy Debugger/Profiler output sits at "
    "<output>/<job>/rule-output/ (docs/platform-facts.md A6); only objects under a rule-output segment can be tagged.",
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/\*\]": (
        "DescribeTrainingJob and ListTags (the owner tag) must work for any job that finishes in this account "
        "and region; they are the only SageMaker actions granted."
    ),
    r"AwsSolutions-IAM5\[Action::kms:GenerateDataKey\*\]": "Added by topic.grant_publish for the "
    "KMS-encrypted notification topic; the statement names only the messaging key.",
    r"AwsSolutions-IAM5\[Resource::\*\]": "Only cloudwatch:PutMetricData, which supports no resource type; "
    "the cloudwatch:namespace condition confines it to ProfStack's namespace.",
}


def processor_environment(
    *,
    access: TraceAccess,
    table: dynamodb.ITable,
    topic: sns.ITopic,
    processing: Processing,
    user_tag_key: str,
    users: Sequence[str],
    name_prefix: str,
) -> dict[str, str]:
    """Everything lambdas.trace_processor.env.ProcessorEnv validates at cold start (the processor adds
    READER_ROLE_ARN and TRACE_KEY_ARN; Lambda itself sets AWS_REGION, the region of the console links)."""
    users_json = json.dumps(sorted(users), separators=(",", ":"))
    if len(users_json) > MAX_USERS_ENV_CHARS:
        raise ValueError(
            f"{len(users)} users ({len(users_json)} characters) do not fit the processor's environment "
            f"(at most {MAX_USERS_ENV_CHARS} characters)"
        )
    return {
        "TRACE_BUCKET": access.bucket.bucket_name,
        "IDEMPOTENCY_TABLE": table.table_name,
        "TOPIC_ARN": topic.topic_arn,
        "USER_TAG_KEY": user_tag_key,
        "USERS": users_json,
        "OWNERSHIP": processing.ownership,
        "OWNER_TAG_GUARD": "true" if processing.owner_tag_guard.enabled else "false",
        "EXTRA_TRACE_PREFIXES": json.dumps(list(access.extra_prefixes)),
        "FANOUT_FILE_THRESHOLD": str(processing.fanout_file_threshold),
        # the analyze-file slots the owners of running fan-outs share, and how long a slot's lease must outlive a
        # function that is killed (lambdas/trace_processor/slots.py)
        "FANOUT_RESERVED_CONCURRENCY": str(processing.fanout_reserved_concurrency),
        "FUNCTION_TIMEOUT_S": str(processing.lambda_timeout_seconds),
        "MAX_FILES_PER_JOB": str(processing.max_files_per_job),
        "FANOUT_BYTES_THRESHOLD": str(processing.fanout_bytes_threshold_mb * 2**20),
        "SINGLE_LAMBDA_MAX_FILE_BYTES": str(processing.single_lambda_max_file_mb * 2**20),
        "SINGLE_LAMBDA_MAX_EVENTS": str(processing.single_lambda_max_events),
        "TOP_K": str(processing.top_k_kernels),
        "TIMELINE_WINDOW": processing.timeline_window,
        "RULE_THRESHOLDS": json.dumps(processing.rule_thresholds, sort_keys=True),
        "SYSTEM_RULE_THRESHOLDS": json.dumps(processing.system_rule_thresholds, sort_keys=True),
        "NAME_PREFIX": name_prefix,  # the per-job alarms the console links name: <prefix>/job/<job>/
        "INCLUDE_LAST_STEP": "true" if processing.include_last_step else "false",
        # the job queue's maxReceiveCount: the last delivery publishes what it has (handler.py)
        "MAX_RECEIVE_COUNT": str(processing.max_receive_count),
        # the bundle carries the C engine (python_function.ENGINE_MODULE): a cold start that cannot load it warns
        "PROFSTACK_EXPECT_ENGINE": "c",
    }


def grant_put_metric_data(role: iam.IRole) -> None:
    # cloudwatch:PutMetricData supports no resource type, so Resource "*"; the namespace condition
    # confines it to ProfStack's own namespace. (EMF metrics go through the log group; this covers
    # direct PutMetricData calls, e.g. by Powertools' fallback or future code.)
    role.add_to_principal_policy(
        no_resource_type_statement(
            ["cloudwatch:PutMetricData"], conditions={"StringEquals": {"cloudwatch:namespace": NAMESPACE}}
        )
    )


def grant_read_job_metrics(role: iam.IRole, scope: Construct, construct_id: str) -> iam.Policy:
    """cloudwatch:GetMetricData, for the job's /aws/sagemaker/TrainingJobs instance metrics (system_view.py).

    GetMetricData supports no resource type and no condition key that names a namespace, so the statement is
    Resource "*"; it is its own policy so that the cdk-nag acknowledgement covers this one statement only."""
    policy = iam.Policy(
        scope,
        construct_id,
        statements=[no_resource_type_statement(["cloudwatch:GetMetricData"])],
    )
    policy.attach_to_role(role)
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "Only cloudwatch:GetMetricData, which supports no resource type (IAM service authorization reference); "
        "it reads the finished job's SageMaker instance metrics for the report.",
    )
    return policy


def grant_describe_training_jobs(role: iam.IRole, scope: Construct) -> None:
    """DescribeTrainingJob and ListTags: the job's configuration and its owner tag, from SageMaker."""
    stack = cdk.Stack.of(scope)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="DescribeTrainingJobs",
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"],
            resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")],
        )
    )


def grant_idempotency(role: iam.IRole, table: dynamodb.ITable) -> None:
    # Exactly what Powertools' DynamoDBPersistenceLayer calls.
    table.grant(role, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
    if table.encryption_key is not None:
        role.add_to_principal_policy(
            key_use_statement(
                table.encryption_key,
                ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                via="dynamodb",
                context={"aws:dynamodb:tableName": table.table_name},
            )
        )


def grant_table_item(role: iam.IRole, table: dynamodb.ITable, *, item_id: str, sid: str) -> None:
    """GetItem and PutItem on one item (`item_id`) of the idempotency table and nothing else of it
    (dynamodb:LeadingKeys): no job's idempotency record can be read or written through it."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=sid,
            actions=["dynamodb:GetItem", "dynamodb:PutItem"],
            resources=[table.table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [item_id]}},
        )
    )
    if table.encryption_key is not None:
        role.add_to_principal_policy(
            key_use_statement(
                table.encryption_key,
                ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                via="dynamodb",
                context={"aws:dynamodb:tableName": table.table_name},
            )
        )


def grant_fanout_slots(role: iam.IRole, table: dynamodb.ITable) -> None:
    """The owners' fair shares of the analyze-file slots (lambdas/trace_processor/slots.py): that item only."""
    grant_table_item(role, table, item_id=FANOUT_SLOTS_ID, sid="FanoutSlotSharesOnly")


def grant_notify(role: iam.IRole, topic: sns.ITopic) -> None:
    topic.grant_publish(role)


class TraceProcessorFunctions(Construct):
    """processor (SQS consumer), analyze-file and aggregate (fan-out steps)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access: TraceAccess,
        queue: sqs.IQueue,
        table: dynamodb.ITable,
        topic: sns.ITopic,
        processing: Processing,
        user_tag_key: str,
        users: Sequence[str],
        log_retention_days: int,
        service: str,
        role_path: str,
        name_prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        env = processor_environment(
            access=access,
            table=table,
            topic=topic,
            processing=processing,
            user_tag_key=user_tag_key,
            users=users,
            name_prefix=name_prefix,
        )
        retention = log_retention(log_retention_days)
        # One service name for the processor and the aggregate step: alarms watch one metric stream.
        powertools = PowertoolsSettings(service=service, metrics_namespace=NAMESPACE)
        timeout = cdk.Duration.seconds(processing.lambda_timeout_seconds)

        self.processor = ProfStackFunction(
            self,
            "Processor",
            handler_module="lambdas.trace_processor.handler",
            description="ProfStack: analyse a finished training job's traces into a report",
            log_retention=retention,
            powertools=powertools,
            environment=env,
            timeout=timeout,
            memory_size=processing.lambda_memory_mb,
            reserved_concurrency=processing.reserved_concurrency,
            ephemeral_storage_mib=2048,  # spooled Perfetto traces; the memory attribution's op log (<= 192 MB)
            role_path=role_path,
        )
        self.analyze_file = ProfStackFunction(
            self,
            "AnalyzeFile",
            handler_module="lambdas.trace_processor.analyze_file",
            description="ProfStack fan-out: analyse one trace file into a partial summary",
            log_retention=retention,
            powertools=PowertoolsSettings(service=f"{service}-map", metrics_namespace=NAMESPACE),
            environment=env,
            timeout=timeout,
            memory_size=processing.lambda_memory_mb,
            reserved_concurrency=processing.fanout_reserved_concurrency,  # config.py says how it is sized
            ephemeral_storage_mib=2048,  # as the processor's
            role_path=role_path,
        )
        self.aggregate = ProfStackFunction(
            self,
            "Aggregate",
            handler_module="lambdas.trace_processor.aggregate",
            description="ProfStack fan-out: merge partial summaries into the job report",
            log_retention=retention,
            powertools=powertools,
            environment=env,
            timeout=cdk.Duration.seconds(AGGREGATE_TIMEOUT_S),
            memory_size=AGGREGATE_MEMORY_MB,
            reserved_concurrency=processing.reserved_concurrency,  # one aggregate per fan-out, one fan-out per run
            role_path=role_path,
        )

        # trace reader: reads traces/ and tensorboard/ (and extra prefixes), nothing else; only the
        # processor may assume it, and it does so per job with a session policy naming the owner's folders.
        role = self.processor.role
        self.trace_reader = iam.Role(
            self,
            "TraceReaderRole",
            # the processing path: the trace bucket's policy lets only these roles (and the owners) read traces
            path=role_path,
            assumed_by=iam.ArnPrincipal(role.role_arn),
            description="ProfStack: reads one job's traces, assumed by the trace processor with a session "
            "policy that names only the job owner's folders",
            max_session_duration=cdk.Duration.hours(1),
        )
        access.grant_trace_read(self.trace_reader)
        self.trace_reader.grant_assume_role(role)
        self.processor.function.add_environment("READER_ROLE_ARN", self.trace_reader.role_arn)
        self.processor.function.add_environment("TRACE_KEY_ARN", access.key.key_arn)
        acknowledge_wildcards(default_policy(self.trace_reader), WILDCARD_REASONS)
        # processor: everything a single-Lambda job needs (trace reads through the reader), plus starting
        # the fan-out.
        access.grant_report_write(role, tensorboard=True)
        access.grant_report_index_read(role)  # the owner's report index (issue 36, report_index.py)
        access.grant_rule_output_tagging(role)
        grant_describe_training_jobs(role, self)
        grant_put_metric_data(role)
        grant_read_job_metrics(role, self, "ProcessorReadJobMetrics")
        grant_idempotency(role, table)
        grant_notify(role, topic)
        self.processor.function.add_event_source(
            sources.SqsEventSource(
                queue,
                batch_size=SQS_BATCH_SIZE,
                report_batch_item_failures=True,
                # Never more pollers than reserved executions (the ESM minimum is 2).
                max_concurrency=processing.reserved_concurrency if processing.reserved_concurrency >= 2 else None,
            )
        )
        # analyze-file: read one trace, write its partial and trimmed trace under reports/.
        access.grant_trace_read(self.analyze_file.role)
        access.grant_report_write(self.analyze_file.role, tensorboard=False)
        access.grant_fanout_input_read(self.analyze_file.role)  # its input is checked against the stored one
        # the owners' fair shares of the slots: the one item of the idempotency table (slots.py); the aggregate
        # step removes its fan-out from them, the processor (full item access already) adds it
        grant_fanout_slots(self.analyze_file.role, table)
        grant_fanout_slots(self.aggregate.role, table)
        # aggregate: read partials, write the report, scalars, metrics and the notification.
        access.grant_report_write(self.aggregate.role, tensorboard=True, read_reports=True)
        grant_put_metric_data(self.aggregate.role)
        grant_read_job_metrics(self.aggregate.role, self, "AggregateReadJobMetrics")
        grant_notify(self.aggregate.role, topic)

        for fn in (self.processor, self.analyze_file, self.aggregate):
            acknowledge_function_baseline(
                fn,
                async_reason="Never invoked asynchronously: the processor is driven by an SQS event-source "
                "mapping (failed records go to the queue's DLQ) and the fan-out steps by Step Functions "
                "(retries, tolerated failures, execution history).",
            )
            acknowledge_wildcards(default_policy(fn.role), WILDCARD_REASONS)
        acknowledge(
            self.processor.function,
            "Serverless-LambdaEventSourceMappingDestination",
            "Failed SQS records are redriven by the queue's own redrive policy to its DLQ after "
            "max_receive_count receives; an ESM on-failure destination would duplicate that.",
        )

    def use_state_machine(self, state_machine: sfn.IStateMachine) -> None:
        """Let the processor hand big jobs to the fan-out state machine."""
        self.processor.function.add_environment("STATE_MACHINE_ARN", state_machine.state_machine_arn)
        state_machine.grant_start_execution(self.processor.role)
        # an existing execution of the job's name is the job's own only if its input is (routing._start_execution)
        state_machine.grant_execution(self.processor.role, "states:DescribeExecution")

    @property
    def functions(self) -> Mapping[str, ProfStackFunction]:
        return {"processor": self.processor, "analyze_file": self.analyze_file, "aggregate": self.aggregate}
