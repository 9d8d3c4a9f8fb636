"""Template assertions for ProcessingStack (example config; bundling skipped by context)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from profstack.jobs import metric_names as m
from tests.infra.conftest import SynthesizedApp, synthesize

STACK = "profstack-processing"


@pytest.fixture(scope="module")
def template(synthesized: SynthesizedApp) -> dict[str, Any]:
    return synthesized.templates[STACK]


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _one(template: dict[str, Any], type_: str) -> dict[str, Any]:
    found = _of_type(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))


def _flat(value: Any) -> str:
    """Fn::Join'ed strings as text, intrinsic parts as <...>: enough to assert on ASL and ARNs."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_flat(p) for p in parts)
    return f"<{json.dumps(value, sort_keys=True)}>"


def _function(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    for logical_id, res in _of_type(template, "AWS::Lambda::Function").items():
        if res["Properties"]["Handler"] == handler:
            return logical_id, res["Properties"]
    raise AssertionError(f"no function with handler {handler}")


def _policy_statements(template: dict[str, Any], role_logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for res in _of_type(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in res["Properties"]["Roles"]:
            statements.extend(res["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return [_flat(r) for r in (resource if isinstance(resource, list) else [resource])]


def _job_events_rule(template: dict[str, Any]) -> dict[str, Any]:
    """The processor's rule (the alarm manager has its own two since issue 15)."""
    (rule,) = [r for k, r in _of_type(template, "AWS::Events::Rule").items() if k.startswith("JobEvents")]
    return dict(rule["Properties"])


def test_rule_matches_finished_training_jobs_and_targets_the_queue(template: dict[str, Any]) -> None:
    # GIVEN the synthesized stack THEN one rule selects Completed/Failed/Stopped training-job events
    rule = _job_events_rule(template)
    assert rule["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]},
    }
    # AND targets the job queue, with the DLQ as the target's dead-letter queue
    (target,) = rule["Targets"]
    assert "JobEventsQueue" in json.dumps(target["Arn"])
    assert "JobEventsDeadLetterQueue" in json.dumps(target["DeadLetterConfig"])


def test_queue_is_kms_encrypted_with_dlq_and_visibility_six_times_the_timeout(
    template: dict[str, Any], example_config: Any
) -> None:
    queues = _of_type(template, "AWS::SQS::Queue")
    main = next(q["Properties"] for k, q in queues.items() if k.startswith("JobEventsQueue"))
    dlq = next(q["Properties"] for k, q in queues.items() if k.startswith("JobEventsDeadLetterQueue"))
    for props in (main, dlq):
        assert "MessagingKey" in json.dumps(props["KmsMasterKeyId"])  # the storage stack's messaging key
    assert main["VisibilityTimeout"] >= 6 * example_config.processing.lambda_timeout_seconds
    assert main["RedrivePolicy"]["maxReceiveCount"] == example_config.processing.max_receive_count
    assert "JobEventsDeadLetterQueue" in json.dumps(main["RedrivePolicy"]["deadLetterTargetArn"])


def test_processor_function_settings_come_from_config(template: dict[str, Any], example_config: Any) -> None:
    _, fn = _function(template, "lambdas.trace_processor.handler.handler")
    processing = example_config.processing
    assert fn["Architectures"] == ["x86_64"]  # the architecture the bundled C engine is built for
    # the runtime is the Python the tests run on (issue #9: the Lambda's Python is the tested Python)
    assert fn["Runtime"] == f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert fn["MemorySize"] == processing.lambda_memory_mb
    assert fn["Timeout"] == processing.lambda_timeout_seconds
    assert fn["ReservedConcurrentExecutions"] == processing.reserved_concurrency
    env = fn["Environment"]["Variables"]
    assert env["FANOUT_FILE_THRESHOLD"] == str(processing.fanout_file_threshold)
    assert env["SINGLE_LAMBDA_MAX_FILE_BYTES"] == str(processing.single_lambda_max_file_mb * 2**20)
    assert env["USER_TAG_KEY"] == example_config.tensorboard.user_tag_key
    assert "FanoutStateMachine" in json.dumps(env["STATE_MACHINE_ARN"])
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == m.NAMESPACE
    assert env["INCLUDE_LAST_STEP"] == ("true" if processing.include_last_step else "false")
    # AND its log group has the configured retention
    groups = [g["Properties"] for g in _of_type(template, "AWS::Logs::LogGroup").values()]
    assert groups
    assert all(g["RetentionInDays"] == example_config.retention.log_retention_days for g in groups)


def test_sqs_event_source_reports_batch_item_failures(template: dict[str, Any]) -> None:
    mapping = _one(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 1
    assert "JobEventsQueue" in json.dumps(mapping["EventSourceArn"])


def test_processor_role_is_least_privilege(template: dict[str, Any]) -> None:
    fn_id, fn = _function(template, "lambdas.trace_processor.handler.handler")
    role_id = fn["Role"]["Fn::GetAtt"][0]
    statements = _policy_statements(template, role_id)
    by_action: dict[str, list[str]] = {}
    for st in statements:
        assert st["Effect"] == "Allow"
        for action in _actions(st):
            by_action.setdefault(action, []).extend(_resources(st))
    # GIVEN the processor's role THEN writes go only to reports/, tensorboard/ and history/ (issue 16 rows)
    assert sorted(r.rsplit("/", 1)[-1] for r in by_action["s3:PutObject"]) == ["*", "*", "*"]
    assert {r.split(">", 1)[-1] for r in by_action["s3:PutObject"]} == {"/reports/*", "/tensorboard/*", "/history/*"}
    # AND reads no trace itself (that is the trace reader's, under a per-job session policy), only its
    # e-mail markers under reports/, the owner's report index and job index rows (issue 36: the conditional
    # rewrite of reports/<user>/index.json), the stops the live analysis recorded (which the final report states)
    # and history/ (its family's baseline rows)
    assert {r.split(">", 1)[-1] for r in by_action["s3:GetObject"]} == {
        "/reports/*/.notified-*",
        "/reports/*/index.json",
        "/reports/*/index-row.json",
        "/reports/*/actions.json",
        "/history/*",
    }
    # AND may assume the trace-reader role and no other
    (reader_id,) = [k for k in _of_type(template, "AWS::IAM::Role") if k.startswith("TraceProcessorTraceReaderRole")]
    assert by_action["sts:AssumeRole"] == [f"<{json.dumps({'Fn::GetAtt': [reader_id, 'Arn']})}>"]
    # AND deletes nothing but its e-mail markers
    assert {r.split(">", 1)[-1] for r in by_action["s3:DeleteObject"]} == {"/reports/*/.notified-*"}
    # AND SageMaker: DescribeTrainingJob and ListTags (the owner tag and the job family) only, on training-job ARNs
    sagemaker = {a for a in by_action if a.startswith("sagemaker:")}
    assert sagemaker == {"sagemaker:DescribeTrainingJob", "sagemaker:ListTags"}
    assert all(":training-job/*" in r for a in sagemaker for r in by_action[a])
    # AND PutMetricData only into ProfStack's namespace, by condition
    (metric_statement,) = [st for st in statements if "cloudwatch:PutMetricData" in _actions(st)]
    assert metric_statement["Resource"] == "*"
    assert metric_statement["Condition"] == {"StringEquals": {"cloudwatch:namespace": m.NAMESPACE}}
    # AND tagging only under rule-output/
    assert all(r.endswith("/*/rule-output/*") for r in by_action["s3:PutObjectTagging"])
    # AND no action wildcard except what grants add for KMS with SNS
    assert not [a for a in by_action if a.endswith(":*") or a == "*"]
    del fn_id


def test_trace_reader_role_is_assumable_only_by_the_processor_and_only_reads_traces(
    template: dict[str, Any], example_config: Any
) -> None:
    roles = _of_type(template, "AWS::IAM::Role")
    (reader_id,) = [k for k in roles if k.startswith("TraceProcessorTraceReaderRole")]
    _, fn = _function(template, "lambdas.trace_processor.handler.handler")
    processor_role = fn["Role"]["Fn::GetAtt"][0]
    # (issue 36) the live analyser reads a running job's traces through it too, with the same session policy
    _, live = _function(template, "lambdas.live_analysis.handler.handler")
    analyser_role = live["Role"]["Fn::GetAtt"][0]
    # GIVEN the reader role THEN its trust policy names exactly the processor's and the live analyser's roles
    (trust,) = roles[reader_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Principal"] == {
        "AWS": [{"Fn::GetAtt": [analyser_role, "Arn"]}, {"Fn::GetAtt": [processor_role, "Arn"]}]
    }
    assert "Condition" not in trust
    # AND no other role may assume it
    for role_id in roles:
        if role_id not in {processor_role, analyser_role}:
            assert reader_id not in json.dumps(_policy_statements(template, role_id))
    # AND it can only read traces/ and tensorboard/ (plus the extra prefixes) and decrypt with the data key
    statements = _policy_statements(template, reader_id)
    actions = {a for st in statements for a in _actions(st)}
    assert actions == {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"}
    gets = {r.split(">", 1)[-1] for st in statements if "s3:GetObject" in _actions(st) for r in _resources(st)}
    assert gets == {"/traces/*", "/tensorboard/*"}
    (listing,) = [st for st in statements if "s3:ListBucket" in _actions(st)]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["traces/*", "tensorboard/*"]}}
    # AND the processor is told the reader role, the data key and the configured users
    env = fn["Environment"]["Variables"]
    assert env["READER_ROLE_ARN"] == {"Fn::GetAtt": [reader_id, "Arn"]}
    assert "DataKey" in json.dumps(env["TRACE_KEY_ARN"])
    assert json.loads(env["USERS"]) == sorted(u.name for u in example_config.users)


def test_each_function_has_its_own_role(template: dict[str, Any]) -> None:
    roles = [fn["Properties"]["Role"]["Fn::GetAtt"][0] for fn in _of_type(template, "AWS::Lambda::Function").values()]
    # processor, analyze-file, aggregate, (issue 15) the per-job alarm manager, (issue 36) the live analyser and
    # its dispatcher
    assert len(roles) == 6
    assert len(set(roles)) == 6


def test_topic_is_encrypted_and_subscribes_configured_emails(template: dict[str, Any], example_config: Any) -> None:
    topic = _one(template, "AWS::SNS::Topic")["Properties"]
    assert "MessagingKey" in json.dumps(topic["KmsMasterKeyId"])
    endpoints = sorted(s["Properties"]["Endpoint"] for s in _of_type(template, "AWS::SNS::Subscription").values())
    assert endpoints == sorted(example_config.notifications.emails)


def test_fanout_is_a_distributed_map_with_lambda_and_processing_job_paths(
    template: dict[str, Any], example_config: Any
) -> None:
    machine = _one(template, "AWS::StepFunctions::StateMachine")["Properties"]
    asl_text = _flat(machine["DefinitionString"])
    assert '"Mode":"DISTRIBUTED"' in asl_text
    assert '"ReaderConfig"' in asl_text or '"ItemReader"' in asl_text
    assert "s3:getObject" in asl_text  # the item manifest is read from S3
    assert '"ToleratedFailurePercentage":100' in asl_text
    # Choice by size: the Processing job runs the same engine's CLI in the configured instance type
    assert ":states:::sagemaker:createProcessingJob.sync" in asl_text
    assert '"Variable":"$.item.route","StringEquals":"processing"' in asl_text
    assert f'"InstanceType":"{example_config.processing.processing_job_instance_type}"' in asl_text
    assert '"ContainerEntrypoint":["/bin/sh","-c","profstack analyze /opt/ml/processing/input --out ' in asl_text
    assert '"EnableNetworkIsolation":true' in asl_text
    assert "AggregateReport" in asl_text
    assert machine["TracingConfiguration"] == {"Enabled": True}
    assert machine["LoggingConfiguration"]["Level"] == "ALL"
    # AND the image comes from deploy-time parameters
    assert {"ProcessingImageRepository", "ProcessingImageTag"} <= set(template["Parameters"])
    assert "ProcessingImageRepository" in json.dumps(machine["DefinitionString"])


def _asl(template: dict[str, Any]) -> dict[str, Any]:
    """The state machine's definition as JSON (each intrinsic part, inside a JSON string, as a placeholder)."""
    definition = _one(template, "AWS::StepFunctions::StateMachine")["Properties"]["DefinitionString"]
    sep, parts = definition["Fn::Join"]
    asl: dict[str, Any] = json.loads(sep.join(p if isinstance(p, str) else "<intrinsic>" for p in parts))
    return asl


def test_aggregate_step_retries_a_transient_cloudwatch_fault_and_knows_which_attempt_is_last(
    template: dict[str, Any],
) -> None:
    from lambdas.trace_processor.env import ProcessorEnv
    from lambdas.trace_processor.errors import SystemMetricsTransientError
    from lambdas.trace_processor.fanout import final_attempt
    from stacks.components.fanout_workflow import AGGREGATE_ATTEMPTS

    # GIVEN the synthesized fan-out definition's aggregate step
    step = _asl(template)["States"]["AggregateReport"]
    retriers = step["Retry"]
    # THEN it retries the error the function raises, by its class name (how a Python Lambda's error reaches
    # Step Functions), with exponential backoff and jitter
    (transient,) = [r for r in retriers if SystemMetricsTransientError.__name__ in r["ErrorEquals"]]
    assert transient == {
        "ErrorEquals": ["SystemMetricsTransientError"],
        "IntervalSeconds": 60,
        "MaxAttempts": AGGREGATE_ATTEMPTS - 1,
        "BackoffRate": 2,
        "MaxDelaySeconds": 300,
        "JitterStrategy": "FULL",
    }
    # AND that retrier is the one this error uses: the first to match it (States.TaskFailed and States.ALL
    # match every error and come after; the Lambda service retrier names only Lambda's own errors)
    position = retriers.index(transient)
    wildcards = {"States.TaskFailed", "States.ALL"}
    assert not [r for r in retriers[:position] if wildcards & set(r["ErrorEquals"])]
    assert [r["ErrorEquals"] for r in retriers[position + 1 :]] == [["States.TaskFailed"]]
    # AND the payload is the execution input the step always got, plus the state's retry count
    assert step["Parameters"] == {
        "context.$": "$.context",
        "manifest.$": "$.manifest",
        "partials.$": "$.partials",
        "job.$": "$.job",
        "attempt.$": "$$.State.RetryCount",
    }
    # AND the aggregate function (only it) is told the same number of attempts, which its env model accepts
    _, aggregate_fn = _function(template, "lambdas.trace_processor.aggregate.handler")
    variables = aggregate_fn["Environment"]["Variables"]
    assert variables["AGGREGATE_MAX_ATTEMPTS"] == str(transient["MaxAttempts"] + 1)
    for handler in ("lambdas.trace_processor.handler.handler", "lambdas.trace_processor.analyze_file.handler"):
        assert "AGGREGATE_MAX_ATTEMPTS" not in _function(template, handler)[1]["Environment"]["Variables"]
    plain = {k: v for k, v in variables.items() if isinstance(v, str)}
    env = ProcessorEnv.from_environ({**plain, "TRACE_BUCKET": "b-x-y", "TOPIC_ARN": "arn:aws:sns:us-east-1:1:t",
                                     "IDEMPOTENCY_TABLE": "t"})  # fmt: skip
    # AND the counts add up: with RetryCount 0 .. MaxAttempts, the function raises on every attempt the retrier
    # still has a retry for and publishes on the one after its last retry
    verdicts = [final_attempt({"attempt": k}, env) for k in range(transient["MaxAttempts"] + 1)]
    assert verdicts == [False] * transient["MaxAttempts"] + [True]


def test_processing_job_role_reads_traces_and_writes_only_partials(template: dict[str, Any]) -> None:
    roles = _of_type(template, "AWS::IAM::Role")
    role_id = next(k for k in roles if k.startswith("FanoutProcessingJobRole"))
    principal = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": "sagemaker.amazonaws.com"}
    writes = [
        r for st in _policy_statements(template, role_id) if "s3:PutObject" in _actions(st) for r in _resources(st)
    ]
    assert writes
    assert all(r.endswith("/reports/*/partials/*") for r in writes)
    # AND the state machine may pass only this role, only to SageMaker
    machine_role = next(k for k in roles if k.startswith("FanoutStateMachineRole"))
    (pass_role,) = [st for st in _policy_statements(template, machine_role) if "iam:PassRole" in _actions(st)]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert role_id in json.dumps(pass_role["Resource"])


def test_alarms_use_config_thresholds_and_notify_the_topic(template: dict[str, Any], example_config: Any) -> None:
    alarms = {k: a["Properties"] for k, a in _of_type(template, "AWS::CloudWatch::Alarm").items()}
    thresholds = example_config.alarms
    by_metric = {(a.get("Namespace"), a.get("MetricName")): a for a in alarms.values()}
    assert by_metric[(m.NAMESPACE, m.GPU_IDLE_PERCENT)]["Threshold"] == thresholds.gpu_idle_high_percent
    assert by_metric[(m.NAMESPACE, m.LAUNCH_DELAY_P95_US)]["Threshold"] == thresholds.launch_delay_p95_high_us
    assert by_metric[(m.NAMESPACE, m.DATALOADER_PERCENT)]["Threshold"] == thresholds.dataloader_high_percent
    dlq_alarm = by_metric[("AWS/SQS", "ApproximateNumberOfMessagesVisible")]
    assert dlq_alarm["Threshold"] == thresholds.dlq_messages_threshold
    assert ("AWS/Lambda", "Errors") in by_metric
    assert ("AWS/States", "ExecutionsFailed") in by_metric
    for alarm in alarms.values():
        assert len(alarm["AlarmActions"]) == 1
        assert "NotificationsTopic" in json.dumps(alarm["AlarmActions"][0])
    # AND the per-job alarms watch the processor's service dimension (what Powertools emits)
    idle = by_metric[(m.NAMESPACE, m.GPU_IDLE_PERCENT)]
    assert idle["Dimensions"] == [{"Name": "service", "Value": "profstack-trace-processor"}]


def test_dashboard_shows_sagemaker_and_profstack_metrics(template: dict[str, Any]) -> None:
    # (two dashboards since issue 15: this one and the alarm manager's live per-GPU one)
    (dashboard,) = [
        d
        for d in _of_type(template, "AWS::CloudWatch::Dashboard").values()
        if d["Properties"]["DashboardName"] == "profstack-training-jobs"
    ]
    body = _flat(dashboard["Properties"]["DashboardBody"])
    assert "/aws/sagemaker/TrainingJobs" in body
    assert "GPUUtilization" in body
    # SEARCH matches exact dimension sets: the per-job EMF metrics carry the job and Powertools' service
    assert f"{{{m.NAMESPACE},{m.JOB_DIMENSION},service}}" in body
    assert m.GPU_IDLE_PERCENT in body


def test_tag_filter_from_config_narrows_the_rule(example_config: Any) -> None:
    # GIVEN a config that only processes jobs tagged profstack:profile=true
    from profstack.config import JobTagFilter

    config = example_config.model_copy(
        update={
            "processing": example_config.processing.model_copy(
                update={"job_tag_filter": JobTagFilter(key="profstack:profile", value="true")}
            )
        }
    )
    # WHEN synthesized THEN the rule also requires that tag
    rule = _job_events_rule(synthesize(config, nag=False).templates[STACK])
    assert rule["EventPattern"]["detail"]["Tags"] == {"profstack:profile": ["true"]}


def test_no_fleet_alarm_multiplies_a_fixed_gpu_count(synthesized: SynthesizedApp, example_config: Any) -> None:
    # GIVEN the example config (issue 15: the fleet-wide GPU alarms multiplied alarms.gpus_per_host, which is
    # wrong for a fleet that mixes instance types; per-host alarms of the alarm manager replace them, each
    # divided by its own host's GPU count; see tests/infra/test_job_alarm_manager.py)
    template = synthesized.templates[f"{example_config.prefix}-processing"]
    alarms = [v["Properties"] for v in template["Resources"].values() if v["Type"] == "AWS::CloudWatch::Alarm"]
    # THEN no static alarm reads SageMaker's per-host GPU sums any more
    assert not [a for a in alarms if "/aws/sagemaker/TrainingJobs" in json.dumps(a)]


RULE_ARN = "arn:aws:events:us-east-1:123456789012:rule/profstack-processing-JobEventsTrainingJobFinished"
OTHER_RULE_ARN = "arn:aws:events:us-east-1:123456789012:rule/someone-elses-rule"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:profstack-processing-JobEventsQueue"


def _queue_policy(template: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    from tests.infra.iam_eval import Resolver

    (queue_id,) = [k for k in _of_type(template, "AWS::SQS::Queue") if k.startswith("JobEventsQueue")]
    (rule_id,) = [k for k in _of_type(template, "AWS::Events::Rule") if k.startswith("JobEvents")]
    (policy,) = [
        p["Properties"]
        for p in _of_type(template, "AWS::SQS::QueuePolicy").values()
        if p["Properties"]["Queues"] == [{"Ref": queue_id}]
    ]
    resolve = Resolver(get_att={f"{rule_id}.Arn": RULE_ARN, f"{queue_id}.Arn": QUEUE_ARN})
    return resolve(policy["PolicyDocument"])["Statement"], rule_id


def test_job_queue_accepts_only_profstacks_own_rule(template: dict[str, Any]) -> None:
    # GIVEN the job queue's policy WHEN synthesized THEN EventBridge may only SendMessage, and only for our rule
    statements, rule_id = _queue_policy(template)
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"]["ArnEquals"] == {"aws:SourceArn": RULE_ARN}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    # AND the condition names the rule of this template (resolved from its Fn::GetAtt above)
    assert rule_id.startswith("JobEventsTrainingJobFinished")


def test_another_rule_in_the_same_account_cannot_feed_the_processor(template: dict[str, Any]) -> None:
    from tests.infra.iam_eval import Principal, Request, same_account_decision

    statements, _ = _queue_policy(template)
    events = Principal(service="events.amazonaws.com")

    def send(source_arn: str, *, secure: bool = True) -> bool:
        context = {
            "aws:SourceArn": source_arn,
            "aws:SourceAccount": "123456789012",
            "aws:SecureTransport": "true" if secure else "false",
        }
        return same_account_decision([], statements, events, Request("sqs:SendMessage", QUEUE_ARN, context))

    # GIVEN EventBridge delivering for ProfStack's rule THEN allowed
    assert send(RULE_ARN)
    # WHEN another rule of the same account (e.g. with an input transformer claiming bob's job) delivers
    # THEN denied: today's CDK default (aws:SourceAccount only) would have allowed it
    assert not send(OTHER_RULE_ARN)
    assert not send(RULE_ARN, secure=False)
    # AND EventBridge may not read queue attributes or receive
    for action in ("sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:PurgeQueue"):
        context = {"aws:SourceArn": RULE_ARN, "aws:SourceAccount": "123456789012", "aws:SecureTransport": "true"}
        assert not same_account_decision([], statements, events, Request(action, QUEUE_ARN, context))
    # AND a role of the account without an identity grant cannot send either
    someone = Principal(arn="arn:aws:iam::123456789012:role/someone")
    assert not same_account_decision(
        [], statements, someone, Request("sqs:SendMessage", QUEUE_ARN, {"aws:SecureTransport": "true"})
    )


def test_cdk_default_queue_policy_would_have_let_any_rule_in() -> None:
    # GIVEN the statement CDK's SqsQueue target writes for a KMS queue (aws:SourceAccount only)
    from tests.infra.iam_eval import Principal, Request, same_account_decision

    cdk_default = [
        {
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
            "Resource": QUEUE_ARN,
            "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
        }
    ]
    context = {"aws:SourceArn": OTHER_RULE_ARN, "aws:SourceAccount": "123456789012"}
    # THEN the evaluator shows the attack the fix closes (so the test above can fail)
    assert same_account_decision(
        [], cdk_default, Principal(service="events.amazonaws.com"), Request("sqs:SendMessage", QUEUE_ARN, context)
    )


def test_fanout_state_machine_reads_only_the_manifests(template: dict[str, Any]) -> None:
    # GIVEN the fan-out state machine's role WHEN synthesized THEN its only S3 access is GetObject on the
    # manifests (CDK's item reader would have granted GetObject on bucket/*)
    roles = _of_type(template, "AWS::IAM::Role")
    machine_role = next(k for k in roles if k.startswith("FanoutStateMachineRole"))
    s3_statements = [
        st for st in _policy_statements(template, machine_role) if any(a.startswith("s3:") for a in _actions(st))
    ]
    assert s3_statements
    for st in s3_statements:
        assert _actions(st) == ["s3:GetObject"]
        assert [r.split(">", 1)[-1] for r in _resources(st)] == ["/reports/*/partials/manifest.json"]
    # AND nowhere in the stack does any policy grant s3 on a bare bucket/* pattern
    for policy in _of_type(template, "AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(a.startswith("s3:") for a in _actions(st)):
                assert not [r for r in _resources(st) if r.endswith(">/*")], st


def test_aggregate_function_is_sized_for_ten_thousand_partials(template: dict[str, Any]) -> None:
    # GIVEN the measured growth of the aggregate step (bench/aggregate_partials.py, docs/processing.md)
    from stacks.components.trace_processor import AGGREGATE_MEMORY_MB, AGGREGATE_TIMEOUT_S

    _, fn = _function(template, "lambdas.trace_processor.aggregate.handler")
    # THEN the function gets a full vCPU (~8x the ~220 MB the streaming merge measured at 10,000 partials; before it,
    # 6,144 MB was short of the 6,932 MB peak) and the longest Lambda timeout
    assert fn["MemorySize"] == AGGREGATE_MEMORY_MB >= 1769
    assert fn["Timeout"] == AGGREGATE_TIMEOUT_S == 900


def _role_of(template: dict[str, Any], handler: str) -> str:
    _, fn = _function(template, handler)
    return str(fn["Role"]["Fn::GetAtt"][0])


def test_only_the_processor_and_the_aggregate_step_read_instance_metrics(template: dict[str, Any]) -> None:
    # GIVEN the synthesized processing stack (issue 15: the report shows the job's CloudWatch instance metrics)
    readers = {
        _role_of(template, "lambdas.trace_processor.handler.handler"),
        _role_of(template, "lambdas.trace_processor.aggregate.handler"),
    }
    granted: dict[str, list[dict[str, Any]]] = {}
    for policy_id, policy in _of_type(template, "AWS::IAM::Policy").items():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any("cloudwatch:GetMetricData" in _actions(st) for st in statements):
            for role in policy["Properties"]["Roles"]:
                granted.setdefault(role["Ref"], []).append({"policy": policy_id, "statements": statements})
    # THEN exactly those two roles may call GetMetricData, each through one policy of its own
    assert set(granted) == readers
    for role_id, policies in granted.items():
        (only,) = policies
        # AND that policy is the one statement (the cdk-nag IAM5 acknowledgement is scoped to it): the exact
        # action, on "*" (GetMetricData supports no resource type), with nothing else gained
        assert only["statements"] == [{"Action": "cloudwatch:GetMetricData", "Effect": "Allow", "Resource": "*"}]
        assert only["policy"].startswith(
            ("TraceProcessorProcessorReadJobMetrics", "TraceProcessorAggregateReadJobMetrics")
        )
        # AND no other policy of the role grants any cloudwatch:Get* / List* read
        others = [
            st
            for st in _policy_statements(template, role_id)
            if not any(a == "cloudwatch:GetMetricData" for a in _actions(st))
        ]
        assert not [
            a for st in others for a in _actions(st) if a.startswith("cloudwatch:") and a != "cloudwatch:PutMetricData"
        ]
    # AND the analyze-file step, which only parses one trace, cannot read metrics
    assert _role_of(template, "lambdas.trace_processor.analyze_file.handler") not in granted


def test_processor_env_carries_the_links_prefix_and_the_system_thresholds(
    template: dict[str, Any], example_config: Any
) -> None:
    # GIVEN the processor and the aggregate step THEN both get the alarm name prefix for the console links and
    # the configured system-rule thresholds, validated by their environment model at cold start
    from lambdas.trace_processor.env import ProcessorEnv

    for handler in ("lambdas.trace_processor.handler.handler", "lambdas.trace_processor.aggregate.handler"):
        _, fn = _function(template, handler)
        env = fn["Environment"]["Variables"]
        assert env["NAME_PREFIX"] == example_config.prefix
        assert json.loads(env["SYSTEM_RULE_THRESHOLDS"]) == example_config.processing.system_rule_thresholds
        plain = {k: v for k, v in env.items() if isinstance(v, str)}
        parsed = ProcessorEnv.from_environ({**plain, "TRACE_BUCKET": "b-x-y", "TOPIC_ARN": "arn:aws:sns:us-east-1:1:t",
                                            "IDEMPOTENCY_TABLE": "t", "AWS_REGION": "eu-west-1"})  # fmt: skip
        assert parsed.name_prefix == example_config.prefix
        assert parsed.region == "eu-west-1"


def test_only_the_processor_may_describe_fanout_executions_and_only_those(template: dict[str, Any]) -> None:
    # GIVEN the synthesized stack (the processor checks that an existing execution of a job's name has its input)
    processor = _role_of(template, "lambdas.trace_processor.handler.handler")
    holders = {
        role["Ref"]: st
        for res in _of_type(template, "AWS::IAM::Policy").values()
        for st in res["Properties"]["PolicyDocument"]["Statement"]
        if "states:DescribeExecution" in _actions(st)
        for role in res["Properties"]["Roles"]
    }
    # THEN of the functions' roles only the processor's holds it (the state machine's own role has it for its
    # map runs), alone in its statement, on the fan-out machine's executions only
    lambdas = _of_type(template, "AWS::Lambda::Function").values()
    functions = {str(f["Properties"]["Role"]["Fn::GetAtt"][0]) for f in lambdas}
    assert set(holders) & functions == {processor}
    statement = holders[processor]
    assert _actions(statement) == ["states:DescribeExecution"]
    (resource,) = _resources(statement)
    assert ":execution:" in resource
    assert resource.endswith(":*")
    assert "FanoutStateMachine" in json.dumps(statement["Resource"])


TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:profstack-notifications"


def _topic_policy(template: dict[str, Any]) -> list[dict[str, Any]]:
    from tests.infra.iam_eval import Resolver

    (topic_id,) = _of_type(template, "AWS::SNS::Topic")
    (policy,) = _of_type(template, "AWS::SNS::TopicPolicy").values()
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    statements: list[dict[str, Any]] = Resolver(refs={topic_id: TOPIC_ARN})(policy["Properties"]["PolicyDocument"])[
        "Statement"
    ]
    return statements


def test_only_the_configured_addresses_may_subscribe_to_every_users_notifications(
    template: dict[str, Any], example_config: Any
) -> None:
    from tests.infra.iam_eval import Principal, Request, same_account_decision

    statements = _topic_policy(template)
    sns_everything = [{"Effect": "Allow", "Action": "sns:*", "Resource": "*"}]

    def subscribe(who: str, endpoint: str, protocol: str = "email") -> bool:
        context = {"aws:SecureTransport": "true", "sns:Endpoint": endpoint, "sns:Protocol": protocol}
        request = Request("sns:Subscribe", TOPIC_ARN, context)
        return same_account_decision(sns_everything, statements, Principal(arn=who), request)

    # GIVEN the topic every user's findings, failure reasons and kernel names go through, and a user of the
    # account whose identity policy allows sns:* (say alice)
    alice = "arn:aws:iam::123456789012:role/alice-dev"
    # WHEN she subscribes her own address, an SQS queue or an HTTPS endpoint of hers THEN denied
    assert not subscribe(alice, "alice@example.com")
    assert not subscribe(alice, "arn:aws:sqs:us-east-1:123456789012:alice-inbox", "sqs")
    assert not subscribe(alice, "https://alice.example/hook", "https")
    # AND the configured addresses (what CloudFormation subscribes) are not denied
    for email in example_config.notifications.emails:
        assert subscribe("arn:aws:iam::123456789012:role/cdk-deploy", email)
    # AND publishing is untouched by the statement (the functions and alarms publish)
    publish = Request("sns:Publish", TOPIC_ARN, {"aws:SecureTransport": "true"})
    assert same_account_decision(sns_everything, statements, Principal(arn=alice), publish)


def test_without_configured_addresses_nobody_may_subscribe() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_kms as kms
    from aws_cdk.assertions import Template

    from stacks.components.notification_topic import NotificationTopic
    from tests.infra.iam_eval import Principal, Request, same_account_decision

    stack = cdk.Stack(cdk.App(), "t")
    NotificationTopic(stack, "Notifications", key=kms.Key(stack, "K"), emails=[])
    template = Template.from_stack(stack).to_json()
    request = Request("sns:Subscribe", TOPIC_ARN, {"aws:SecureTransport": "true", "sns:Endpoint": "x@example.com"})
    allow = [{"Effect": "Allow", "Action": "sns:*", "Resource": "*"}]
    caller = Principal(arn="arn:aws:iam::123456789012:role/x")
    assert not same_account_decision(allow, _topic_policy(template), caller, request)


def test_only_the_processor_may_take_a_job_event_off_the_queue(template: dict[str, Any]) -> None:
    from tests.infra.iam_eval import Principal, Request, same_account_decision

    # GIVEN the job queue's policy (a job's event is its only trigger: an event received and deleted by someone
    # else means that job never gets a report)
    statements, _ = _queue_policy(template)
    sqs_everything = [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]
    secure = {"aws:SecureTransport": "true"}

    def can(who: str, action: str) -> bool:
        return same_account_decision(sqs_everything, statements, Principal(arn=who), Request(action, QUEUE_ARN, secure))

    # WHEN a role outside the processing path with sqs:* (an administrator, a user's role, a look-alike path)
    for who in (
        "arn:aws:iam::123456789012:role/Admin",
        "arn:aws:iam::123456789012:role/profstack/users/alice/x",
        "arn:aws:iam::123456789012:role/profstack/processing-evil/x",
    ):
        # THEN it cannot receive, delete, hide or purge the messages
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:PurgeQueue"):
            assert not can(who, action), (who, action)
        # AND the queue's attributes stay readable (dashboards, operators)
        assert can(who, "sqs:GetQueueAttributes")
    # AND the processor's role (what the event-source mapping polls with) keeps receive and delete
    processor = "arn:aws:iam::123456789012:role/profstack/processing/TraceProcessorRole"
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert can(processor, action)
