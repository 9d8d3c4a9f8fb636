"""Fan-out for big jobs: a Step Functions Distributed Map analyses one trace file per item, then an
aggregate step builds the job report.

Per item, a Choice routes by size: files up to `single_lambda_max_file_mb` go to the analyze-file
Lambda; bigger ones to a SageMaker Processing job running the same engine (`profstack analyze`) in
a container (image: ECR repository + tag parameters, see docs/processing.md). Failed items are
tolerated: the aggregate step flags the files whose partial is missing and reports the rest. The aggregate
step is retried on a transient CloudWatch fault, AGGREGATE_ATTEMPTS runs in all, and is told which run is
its last (the report then says the system metrics are unavailable, rather than lose the job's report).
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from profstack import layout
from profstack.config import Processing
from profstack.layout import PROCESSING_INPUT_MANIFEST
from stacks.components.iam import no_resource_type_statement
from stacks.components.nag_wildcards import acknowledge_wildcards, default_policy
from stacks.components.python_function import ProfStackFunction, stack_logs_key
from stacks.components.trace_access import TraceAccess

PROCESSING_INPUT = "/opt/ml/processing/input"
PROCESSING_OUTPUT = "/opt/ml/processing/output"
PROCESSING_MAX_RUNTIME_S = 4 * 3600


@dataclass(frozen=True)
class RetryShape:
    """A Step Functions Retry: wait interval_s, then x backoff each time, at most max_delay_s, attempts in all."""

    interval_s: int
    backoff: float
    max_delay_s: int
    attempts: int

    def waits(self) -> list[float]:
        """The longest wait before each retry (full jitter draws each uniformly between 0 and it)."""
        return [min(self.interval_s * self.backoff**n, self.max_delay_s) for n in range(self.attempts)]


#: Retry of a map item throttled by the analyze-file function's reserved concurrency (Lambda.TooManyRequestsException):
#: it must outlast a slot, which an item holds up to the function's 900 s timeout. 5 s doubling to a 120 s cap, 40
#: retries: at most 4,355 s of waiting; with full jitter (each wait uniform in [0, d]) 2,178 s on average, standard
#: deviation 207 s, so below 900 s about once in 3e9 (tests/infra/test_fanout_fairness.py draws 20,000 and finds none)
THROTTLE_RETRY = RetryShape(interval_s=5, backoff=2.0, max_delay_s=120, attempts=40)
#: Retry of a map item whose owner holds their fair share of the slots (OwnerBusyError, lambdas/trace_processor/
#: slots.py): it waits for its owner's own items to end, for as long as the execution may run (8 h)
OWNER_BUSY_RETRY = RetryShape(interval_s=15, backoff=1.5, max_delay_s=120, attempts=400)
OWNER_BUSY_ERROR = "OwnerBusyError"
#: How many times the aggregate step runs when CloudWatch fails transiently (GetMetricData still throttled
#: or 5xx after botocore's retries): the one number behind both the step's Retry on
#: SYSTEM_METRICS_TRANSIENT_ERROR (AGGREGATE_ATTEMPTS - 1 retries) and the function's AGGREGATE_MAX_ATTEMPTS
#: (lambdas/trace_processor/env.py), so the attempt the function takes for the last one (the state's
#: `$$.State.RetryCount` + 1 == AGGREGATE_ATTEMPTS) is the last: it publishes with the system section
#: "unavailable" instead of raising, and every attempt before it raises and has a retry left.
AGGREGATE_ATTEMPTS = 4
#: the exception class the aggregate function raises for it (lambdas/trace_processor/errors.py): a Python
#: Lambda's unhandled error reaches Step Functions as its class name (tests/infra check the two agree)
SYSTEM_METRICS_TRANSIENT_ERROR = "SystemMetricsTransientError"
AGGREGATE_RETRY_INTERVAL = cdk.Duration.seconds(60)
AGGREGATE_RETRY_MAX_DELAY = cdk.Duration.minutes(5)
# `profstack analyze` exits 1 when it wrote partial results (some input unreadable): still a result
# the aggregate step should see, so only exit codes above 1 fail the job (and skip the upload). Python
# also exits 1 on an uncaught error, so the job succeeds only if a summary was written.
PROCESSING_COMMAND = (
    f"profstack analyze {PROCESSING_INPUT} --out {PROCESSING_OUTPUT} --format json,perfetto; rc=$?; "
    f'[ "$rc" -le 1 ] && [ -s {PROCESSING_OUTPUT}/summary.json ]'
)


class ProcessingJobImage(Construct):
    """Where the SageMaker Processing path's container comes from: deploy-time parameters, so the
    image (docker/processing/Dockerfile) can be built and pushed without changing the template."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.repository = cdk.CfnParameter(
            stack,
            "ProcessingImageRepository",
            type="String",
            default="profstack-processing",
            allowed_pattern=r"^[a-z0-9][a-z0-9._/-]{1,255}$",
            description="ECR repository (same account/region) holding the ProfStack processing image",
        )
        self.tag = cdk.CfnParameter(
            stack,
            "ProcessingImageTag",
            type="String",
            default="latest",
            allowed_pattern=r"^[A-Za-z0-9_.-]{1,128}$",
            description="Tag of the ProfStack processing image",
        )
        self.image_uri = cdk.Fn.sub(
            "${AWS::AccountId}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/${Repo}:${Tag}",
            {"Repo": self.repository.value_as_string, "Tag": self.tag.value_as_string},
        )
        self.repository_arn = cdk.Fn.sub(
            "arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/${Repo}",
            {"Repo": self.repository.value_as_string},
        )


MANIFEST_KEY_PATTERN = f"{layout.REPORTS_PREFIX}*/partials/manifest.json"


class ManifestItemReader(sfn.S3JsonItemReader):
    """The Distributed Map's S3 item reader, granting GetObject on the fan-out manifests only.

    CDK's S3JsonItemReader grants `s3:GetObject` on `<bucket>/*` when the key is a JSON path (it cannot
    know the key); every manifest is `reports/<user>/<job>/partials/manifest.json`
    (lambdas/trace_processor/routing.py, manifest_location), so that is all the state machine may read."""

    def __init__(self, *, bucket: s3.IBucket, key: str) -> None:
        super().__init__(bucket=bucket, key=key)
        self._manifests = bucket

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return [
            iam.PolicyStatement(
                sid="ReadFanoutManifest",
                actions=["s3:GetObject"],
                resources=[self._manifests.arn_for_objects(MANIFEST_KEY_PATTERN)],
            )
        ]


class FanoutWorkflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access: TraceAccess,
        analyze_file: ProfStackFunction,
        aggregate: ProfStackFunction,
        processing: Processing,
        log_retention: logs.RetentionDays,
        role_path: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        image = ProcessingJobImage(self, "Image")

        # --- the SageMaker Processing path's own role: read traces, write partials, pull the image.
        self.processing_role = iam.Role(
            self,
            "ProcessingJobRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="ProfStack processing job: analyse one oversized trace file",
            path=role_path,
        )
        access.grant_trace_read(self.processing_role)
        self.processing_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadInputManifest",  # SageMaker reads the job's ManifestFile input with this role
                actions=["s3:GetObject"],
                resources=[
                    access.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/partials/*/{PROCESSING_INPUT_MANIFEST}")
                ],
            )
        )
        self.processing_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WritePartials",
                actions=["s3:PutObject"],
                resources=[access.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/partials/*")],
            )
        )
        access.grant_key_via_s3(self.processing_role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
        self.processing_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PullImage",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[image.repository_arn],
            )
        )
        # ecr:GetAuthorizationToken supports no resource type: Resource "*" (listed in iam.py).
        self.processing_role.add_to_principal_policy(no_resource_type_statement(["ecr:GetAuthorizationToken"]))
        self.processing_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ProcessingJobLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="/aws/sagemaker/ProcessingJobs:*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )

        # --- one map item: Lambda, or a Processing job for files beyond Lambda's limit.
        in_lambda = tasks.LambdaInvoke(
            self,
            "AnalyzeFileInLambda",
            lambda_function=analyze_file.function,
            payload_response_only=True,
            retry_on_service_exceptions=True,
        )
        # the item's owner holds their fair share of the slots: wait for their own items to end (first matching
        # retrier wins, so both come before the catch-all)
        in_lambda.add_retry(
            errors=[OWNER_BUSY_ERROR],
            max_attempts=OWNER_BUSY_RETRY.attempts,
            interval=cdk.Duration.seconds(OWNER_BUSY_RETRY.interval_s),
            backoff_rate=OWNER_BUSY_RETRY.backoff,
            max_delay=cdk.Duration.seconds(OWNER_BUSY_RETRY.max_delay_s),
            jitter_strategy=sfn.JitterType.FULL,
        )
        # throttled by AnalyzeFile's reserved concurrency: wait for a slot, longer than any item can hold one
        in_lambda.add_retry(
            errors=["Lambda.TooManyRequestsException"],
            max_attempts=THROTTLE_RETRY.attempts,
            interval=cdk.Duration.seconds(THROTTLE_RETRY.interval_s),
            backoff_rate=THROTTLE_RETRY.backoff,
            max_delay=cdk.Duration.seconds(THROTTLE_RETRY.max_delay_s),
            jitter_strategy=sfn.JitterType.FULL,
        )
        in_lambda.add_retry(errors=["States.TaskFailed"], max_attempts=2, interval=cdk.Duration.seconds(10))
        self.processing_state = sfn.CustomState(
            self,
            "AnalyzeFileInProcessingJob",
            state_json={
                "Type": "Task",
                "Resource": f"arn:{cdk.Aws.PARTITION}:states:::sagemaker:createProcessingJob.sync",
                "Parameters": {
                    "ProcessingJobName.$": "States.Format('profstack-{}', States.UUID())",
                    "RoleArn": self.processing_role.role_arn,
                    "AppSpecification": {
                        "ImageUri": image.image_uri,
                        "ContainerEntrypoint": ["/bin/sh", "-c", PROCESSING_COMMAND],
                    },
                    "ProcessingResources": {
                        "ClusterConfig": {
                            "InstanceCount": 1,
                            "InstanceType": processing.processing_job_instance_type,
                            "VolumeSizeInGB": 200,
                            "VolumeKmsKeyId": access.key.key_arn,
                        }
                    },
                    "ProcessingInputs": [
                        {
                            "InputName": "trace",
                            # A manifest naming the one trace object (routing.processing_input_manifest): an
                            # S3Prefix input of its key would also pull x.pt.trace.json.gz for x.pt.trace.json.
                            "S3Input": {
                                "S3Uri.$": f"States.Format('s3://{{}}/{{}}{PROCESSING_INPUT_MANIFEST}', "
                                "$.partials.bucket, $.item.partial_prefix)",
                                "LocalPath": PROCESSING_INPUT,
                                "S3DataType": "ManifestFile",
                                "S3InputMode": "File",
                            },
                        }
                    ],
                    "ProcessingOutputConfig": {
                        "KmsKeyId": access.key.key_arn,
                        "Outputs": [
                            {
                                "OutputName": "partial",
                                "S3Output": {
                                    "S3Uri.$": "States.Format('s3://{}/{}', $.partials.bucket, $.item.partial_prefix)",
                                    "LocalPath": PROCESSING_OUTPUT,
                                    "S3UploadMode": "EndOfJob",
                                },
                            }
                        ],
                    },
                    "StoppingCondition": {"MaxRuntimeInSeconds": PROCESSING_MAX_RUNTIME_S},
                    "NetworkConfig": {"EnableNetworkIsolation": True},
                    "Tags": [{"Key": "profstack:component", "Value": "fanout"}],
                },
                "ResultPath": None,
            },
        )
        route = (
            sfn.Choice(self, "RouteBySize")
            .when(sfn.Condition.string_equals("$.item.route", "processing"), self.processing_state)
            .otherwise(in_lambda)
        )
        self.map = sfn.DistributedMap(
            self,
            "AnalyzeEachFile",
            item_reader=ManifestItemReader(bucket=access.bucket, key=sfn.JsonPath.string_at("$.manifest.key")),
            item_selector={
                "item.$": "$$.Map.Item.Value",
                "context.$": "$.context",
                "partials.$": "$.partials",
            },
            # a per-job cap: one fan-out never takes more than its share of the analyze-file slots at once
            max_concurrency=processing.fanout_max_concurrency_per_job,
            tolerated_failure_percentage=100,  # a failed file is flagged by the aggregate step
            result_path=sfn.JsonPath.DISCARD,
        )
        self.map.item_processor(route)
        aggregate_step = tasks.LambdaInvoke(
            self,
            "AggregateReport",
            lambda_function=aggregate.function,
            # the execution input the step always had (the map's result is discarded), plus the attempt
            payload=sfn.TaskInput.from_object(
                {
                    "context": sfn.JsonPath.object_at("$.context"),
                    "manifest": sfn.JsonPath.object_at("$.manifest"),
                    "partials": sfn.JsonPath.object_at("$.partials"),
                    "job": sfn.JsonPath.object_at("$.job"),
                    "attempt": sfn.JsonPath.number_at("$$.State.RetryCount"),
                }
            ),
            payload_response_only=True,
            retry_on_service_exceptions=True,
        )
        # The first retrier whose ErrorEquals matches is the one used, and each counts its own retries;
        # `States.TaskFailed` matches every error, so the CloudWatch retrier comes first and is the only one
        # that error ever uses. `$$.State.RetryCount` is the state's retries so far, by every retrier (so never
        # fewer than this one's; docs/platform-facts.md, moto's interpreter): an attempt the function does not
        # take for the last (it raises) always has a retry left here. Retries by the other retriers (a Lambda
        # service error, an S3 fault) count too, so after those the function may publish "unavailable" an
        # attempt early; never an attempt late.
        aggregate_step.add_retry(
            errors=[SYSTEM_METRICS_TRANSIENT_ERROR],
            max_attempts=AGGREGATE_ATTEMPTS - 1,
            interval=AGGREGATE_RETRY_INTERVAL,
            backoff_rate=2,
            max_delay=AGGREGATE_RETRY_MAX_DELAY,
            jitter_strategy=sfn.JitterType.FULL,
        )
        aggregate_step.add_retry(errors=["States.TaskFailed"], max_attempts=3, interval=cdk.Duration.seconds(30))
        aggregate.function.add_environment("AGGREGATE_MAX_ATTEMPTS", str(AGGREGATE_ATTEMPTS))

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention,
            encryption_key=stack_logs_key(self),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        machine_role = iam.Role(
            self,
            "StateMachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="ProfStack fan-out state machine: read the item manifest, run the map and aggregate",
            path=role_path,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            role=machine_role,
            definition_body=sfn.DefinitionBody.from_chainable(self.map.next(aggregate_step)),
            timeout=cdk.Duration.hours(8),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        role = self.state_machine.role
        access.grant_key_via_s3(role, "kms:Decrypt")  # the manifest is SSE-KMS; ManifestItemReader grants the read
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RunProcessingJobs",
                actions=[
                    "sagemaker:CreateProcessingJob",
                    "sagemaker:DescribeProcessingJob",
                    "sagemaker:StopProcessingJob",
                    "sagemaker:AddTags",
                ],
                resources=[
                    stack.format_arn(service="sagemaker", resource="processing-job", resource_name="profstack-*")
                ],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassProcessingRole",
                actions=["iam:PassRole"],
                resources=[self.processing_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                # The .sync integration waits through this Step Functions-managed rule.
                sid="SyncProcessingJobs",
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[
                    stack.format_arn(
                        service="events",
                        resource="rule",
                        resource_name="StepFunctionsGetEventsForSageMakerProcessingJobsRule",
                    )
                ],
            )
        )
        acknowledge_wildcards(
            default_policy(role),
            {
                r"AwsSolutions-IAM5\[Resource::<TraceProcessor(AnalyzeFile|Aggregate)Function[0-9A-F]+\.Arn>:\*\]": (
                    "LambdaInvoke may call any version/alias of the two fan-out functions it names."
                ),
                r"AwsSolutions-IAM5\[Resource::.*/reports/\*/partials/manifest\.json\]": (
                    "The Distributed Map reads each job's item manifest; jobs are keyed per user and job."
                ),
                r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>"
                r":processing-job/profstack-\*\]": (
                    "Processing jobs are named profstack-<uuid> by this state machine; only those are managed."
                ),
                r"AwsSolutions-IAM5\[Resource::\*\]": (
                    "Only X-Ray tracing and CloudWatch Logs vended-delivery actions that Step Functions "
                    "logging needs; none supports a resource type (listed in stacks/components/iam.py)."
                ),
                r"AwsSolutions-IAM5\[Action::xray:GetSampling.*\]": "X-Ray sampling reads for active tracing.",
            },
        )
        map_policy = self.state_machine.node.try_find_child("DistributedMapPolicy")
        acknowledge_wildcards(
            map_policy,
            {
                r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
                r":execution:.*\]": (
                    "A Distributed Map starts and stops child executions of its own state machine, whose "
                    "names Step Functions generates."
                ),
            },
        )
        acknowledge_wildcards(
            default_policy(self.processing_role),
            {
                r"AwsSolutions-IAM5\[Resource::.*/(traces|tensorboard)/\*\]": (
                    "Reads trace objects keyed per user and job under the layout's trace prefixes."
                ),
                r"AwsSolutions-IAM5\[Resource::.*/reports/\*/partials/\*\]": (
                    "Writes only partial results, under each job's reports/<user>/<job>/partials/."
                ),
                r"AwsSolutions-IAM5\[Resource::.*/reports/\*/partials/\*/input\.manifest\]": (
                    "Reads only the per-item input manifests the processor writes for Processing jobs."
                ),
                r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>"
                r":log-group:/aws/sagemaker/ProcessingJobs:\*\]": (
                    "SageMaker Processing writes one log stream per job into this fixed log group."
                ),
                r"AwsSolutions-IAM5\[Resource::\*\]": (
                    "Only ecr:GetAuthorizationToken, which supports no resource type."
                ),
            },
        )
