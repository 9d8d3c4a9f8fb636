"""`profstack verify`: a smoke test of a deployed ProfStack, read-only.

    profstack verify [--config PATH] [--region REGION] [--json]

One line per check, `ok`, `warn` or `FAIL`, each naming what it looked at and, when it is not ok, what to do:

* the three stacks are deployed and settled (`*_COMPLETE`, not rolled back), with the outputs the CLI reads;
* the trace bucket: KMS default encryption, versioning, public access blocked, and the policy's boundary
  statements (users read only their own prefixes: docs/security.md);
* the job queue: KMS-encrypted, its dead-letter queue after `processing.max_receive_count` receives, the
  policy that lets only ProfStack's rule send and only the processor consume; the dead-letter queue's depth;
* a dry run of the pipeline's entry: EventBridge's TestEventPattern says the rule that feeds the queue takes a
  finished job's event and not a running job's; the queue's event-source mapping is enabled; the processor
  function is active on x86_64, and an `Invoke` with `InvocationType=DryRun` is allowed (nothing runs);
* the notification topic's e-mail subscriptions (confirmed, pending, missing);
* the alarms on the topic, any of them in ALARM (each has a runbook: docs/operate.md);
* the SageMaker domain is InService and each configured user has a profile.

Exit status: 0 when nothing failed (warnings allowed), 1 otherwise. Permissions: read-only calls of
CloudFormation, S3, SQS, EventBridge, Lambda, SNS, CloudWatch and SageMaker (docs/operate.md, Verify).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from profstack.cli import CliError, _aws
from profstack.cli._aws import add_config_argument, load, region_of
from profstack.cli._help import REGION, command
from profstack.config import ProfStackConfig
from profstack.escape import one_line
from profstack.jobs.events import DETAIL_TYPE, SOURCE
from profstack.tensorboard.names import DOMAIN_ID_OUTPUT, tensorboard_stack_name, user_profile_name

OK, WARN, FAIL = "ok", "warn", "FAIL"
#: statements of the trace bucket's policy that carry its boundary (stacks/components/trace_store.py; a test
#: checks them against the synthesized policy)
BOUNDARY_SIDS = (
    "UserDataReadOnlyByOwnerProcessingBreakGlass",
    "UserRolesOnlyTheirOwnObjects",
    "TraceFoldersWrittenOnlyByOwnersPipelineWriters",
    "ReportsWrittenOnlyByProcessingBreakGlass",
)
#: statements of the job queue's policy (stacks/components/job_events.py)
QUEUE_SIDS = ("OnlyProfStackJobEventRule", "ConsumedOnlyByTheProcessor")
SETTLED = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE")
PROCESSOR_ARCHITECTURE = "x86_64"


@dataclass
class Check:
    name: str
    status: str
    detail: str

    def line(self) -> str:
        # names and details come from the account (stack outputs, profiles, subscriptions): one escaping rule
        return f"{self.status:<4} {one_line(self.name)}: {one_line(self.detail)}"


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str) -> None:
        self.checks.append(Check(name, status, detail))

    @property
    def failed(self) -> bool:
        return any(c.status == FAIL for c in self.checks)


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "verify",
        help="smoke-test a deployed ProfStack: stacks, bucket policy, queue, pipeline dry run, alarms (read-only)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=("profstack verify", "profstack verify --config config/deploy.yaml --region eu-west-1 --json"),
        note="Exit status 0 when no check failed (warnings allowed), 1 otherwise. Runbooks: docs/operate.md.",
    )
    add_config_argument(parser)
    parser.add_argument("--region", metavar=REGION, help="AWS region (default: config, then your AWS setup)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(handler=run)


@contextmanager
def _checking(report: Report, name: str) -> Iterator[None]:
    """An AWS failure inside a check is that check's FAIL line, not the end of the run."""
    try:
        yield
    except CliError as exc:
        report.add(name, FAIL, str(exc))


class Verifier:
    def __init__(self, config: ProfStackConfig, region: str | None) -> None:
        self.config, self.region = config, region
        self.report = Report()
        self.outputs: dict[str, dict[str, str]] = {}
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = _aws.make_client(service, self.region)
        return self._clients[service]

    def call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        return _aws.call(what, fn, **kwargs)

    @property
    def stacks(self) -> dict[str, tuple[str, ...]]:
        prefix = self.config.prefix
        return {
            f"{prefix}-storage": ("TraceBucketName",),
            tensorboard_stack_name(prefix): (DOMAIN_ID_OUTPUT,),
            f"{prefix}-processing": ("QueueUrl", "DeadLetterQueueUrl", "TopicArn"),
        }

    # ------------------------------------------------------------------ stacks

    def check_stacks(self) -> None:
        cloudformation = self.client("cloudformation")
        for stack, wanted in self.stacks.items():
            with _checking(self.report, f"stack {stack}"):
                found = self._describe_stack(cloudformation, stack)
                if found is None:
                    self.report.add(f"stack {stack}", FAIL, "not deployed: npx cdk deploy --all (docs/operate.md)")
                    continue
                status = str(found.get("StackStatus"))
                outputs = {str(o["OutputKey"]): str(o["OutputValue"]) for o in found.get("Outputs", [])}
                self.outputs[stack] = outputs
                missing = [k for k in wanted if k not in outputs]
                if status not in SETTLED:
                    self.report.add(f"stack {stack}", FAIL, f"{status}: wait for it to settle, or read its events")
                elif missing:
                    self.report.add(f"stack {stack}", FAIL, f"{status} but without output(s) {', '.join(missing)}")
                else:
                    self.report.add(f"stack {stack}", OK, f"{status}, outputs {', '.join(wanted)}")

    def _describe_stack(self, cloudformation: Any, stack: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        with _aws.aws_errors(f"DescribeStacks {stack}"):
            try:
                found = cloudformation.describe_stacks(StackName=stack)["Stacks"]
            except ClientError as exc:
                if "does not exist" in str(exc.response.get("Error", {}).get("Message", "")):
                    return None
                raise
        return dict(found[0]) if found else None

    def output(self, stack: str, key: str) -> str | None:
        return self.outputs.get(stack, {}).get(key)

    # ------------------------------------------------------------------ bucket

    def check_bucket(self) -> None:
        bucket = self.output(f"{self.config.prefix}-storage", "TraceBucketName")
        if not bucket:
            return
        s3 = self.client("s3")
        name = f"bucket {bucket}"
        with _checking(self.report, f"{name} encryption"):
            rules = self.call("GetBucketEncryption", s3.get_bucket_encryption, Bucket=bucket)[
                "ServerSideEncryptionConfiguration"
            ]["Rules"]
            algorithms = {r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules}
            ok = "aws:kms" in algorithms
            self.report.add(f"{name} encryption", OK if ok else FAIL, "SSE-KMS by default" if ok else f"{algorithms}")
        with _checking(self.report, f"{name} versioning"):
            status = self.call("GetBucketVersioning", s3.get_bucket_versioning, Bucket=bucket).get("Status")
            self.report.add(f"{name} versioning", OK if status == "Enabled" else FAIL, str(status or "never enabled"))
        with _checking(self.report, f"{name} public access"):
            block = self.call("GetPublicAccessBlock", s3.get_public_access_block, Bucket=bucket)
            flags = block.get("PublicAccessBlockConfiguration", {})
            off = sorted(k for k, v in flags.items() if not v)
            self.report.add(
                f"{name} public access", FAIL if off or not flags else OK, f"off: {off}" if off else "all blocked"
            )
        with _checking(self.report, f"{name} policy"):
            policy = json.loads(self.call("GetBucketPolicy", s3.get_bucket_policy, Bucket=bucket)["Policy"])
            sids = {str(s.get("Sid")) for s in policy.get("Statement", []) if s.get("Effect") == "Deny"}
            missing = [sid for sid in BOUNDARY_SIDS if sid not in sids]
            detail = (
                f"missing Deny statement(s) {', '.join(missing)}: someone edited the policy; redeploy the storage stack"
                if missing
                else f"{len(sids)} Deny statements, the per-user boundary among them"
            )
            self.report.add(f"{name} policy", FAIL if missing else OK, detail)

    # ------------------------------------------------------------------ queue and pipeline entry

    def check_queue(self) -> str | None:
        stack = f"{self.config.prefix}-processing"
        url, dlq_url = self.output(stack, "QueueUrl"), self.output(stack, "DeadLetterQueueUrl")
        if not url or not dlq_url:
            return None
        sqs = self.client("sqs")
        queue_arn = None
        with _checking(self.report, "job queue"):
            attributes = self.call(
                "GetQueueAttributes", sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["All"]
            )["Attributes"]
            queue_arn = attributes.get("QueueArn")
            redrive = json.loads(attributes.get("RedrivePolicy") or "{}")
            problems = []
            if not attributes.get("KmsMasterKeyId"):
                problems.append("not KMS-encrypted")
            if int(redrive.get("maxReceiveCount", 0)) != self.config.processing.max_receive_count:
                problems.append(
                    f"dead-letter after {redrive.get('maxReceiveCount')} receives, config says "
                    f"{self.config.processing.max_receive_count}: deploy the config"
                )
            sids = {str(s.get("Sid")) for s in json.loads(attributes.get("Policy") or "{}").get("Statement", [])}
            problems += [f"policy lacks {sid}" for sid in QUEUE_SIDS if sid not in sids]
            waiting = attributes.get("ApproximateNumberOfMessages", "0")
            detail = (
                "; ".join(problems)
                or f"KMS-encrypted, dead-letter after {redrive.get('maxReceiveCount')}, {waiting} waiting"
            )
            self.report.add("job queue", FAIL if problems else OK, detail)
        with _checking(self.report, "dead-letter queue"):
            depth = int(
                self.call(
                    "GetQueueAttributes",
                    sqs.get_queue_attributes,
                    QueueUrl=dlq_url,
                    AttributeNames=["ApproximateNumberOfMessages"],
                )["Attributes"].get("ApproximateNumberOfMessages", 0)
            )
            self.report.add(
                "dead-letter queue",
                WARN if depth else OK,
                f"{depth} message(s): runbook DeadLetterQueueNotEmpty in docs/operate.md" if depth else "empty",
            )
        return str(queue_arn) if queue_arn else None

    def check_rule(self, queue_arn: str) -> None:
        events = self.client("events")
        with _checking(self.report, "event rule"):
            names = self.call("ListRuleNamesByTarget", events.list_rule_names_by_target, TargetArn=queue_arn).get(
                "RuleNames", []
            )
            if not names:
                self.report.add(
                    "event rule", FAIL, f"no EventBridge rule targets {queue_arn}: redeploy the processing stack"
                )
                return
            rule = self.call("DescribeRule", events.describe_rule, Name=names[0])
            pattern = str(rule.get("EventPattern") or "")
            if rule.get("State") != "ENABLED":
                self.report.add("event rule", FAIL, f"{names[0]} is {rule.get('State')}: enable it")
                return
            finished = self._matches(events, pattern, "Completed")
            running = self._matches(events, pattern, "InProgress")
            ok = finished and not running
            detail = (
                f"{names[0]} takes a Completed job's event, not an InProgress one (TestEventPattern)"
                if ok
                else f"{names[0]} {'drops' if not finished else 'takes'} a "
                f"{'Completed' if not finished else 'InProgress'} job's event: redeploy the processing stack"
            )
            if finished and self.config.processing.job_tag_filter is not None:
                detail += " (a job carrying processing.job_tag_filter's tag)"
            self.report.add("event rule", OK if ok else FAIL, detail)

    def _matches(self, events: Any, pattern: str, status: str) -> bool:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        tags = {}
        tag_filter = self.config.processing.job_tag_filter
        if tag_filter is not None:
            tags[tag_filter.key] = tag_filter.value
        event = {
            "id": "profstack-verify",
            "detail-type": DETAIL_TYPE,
            "source": SOURCE,
            "account": self.account(),
            "time": now,
            "region": _aws.resolve_region(self.region) or "us-east-1",
            "resources": [],
            "detail": {"TrainingJobName": "profstack-verify", "TrainingJobStatus": status, "Tags": tags},
        }
        result = self.call("TestEventPattern", events.test_event_pattern, EventPattern=pattern, Event=json.dumps(event))
        return bool(result.get("Result"))

    def account(self) -> str:
        if "account" not in self.outputs:
            identity = self.call("GetCallerIdentity", self.client("sts").get_caller_identity)
            self.outputs["account"] = {"id": str(identity["Account"])}
        return self.outputs["account"]["id"]

    def check_processor(self, queue_arn: str) -> None:
        lambda_ = self.client("lambda")
        with _checking(self.report, "processor"):
            mappings = self.call(
                "ListEventSourceMappings", lambda_.list_event_source_mappings, EventSourceArn=queue_arn
            ).get("EventSourceMappings", [])
            if not mappings:
                self.report.add("processor", FAIL, f"no Lambda reads {queue_arn}: redeploy the processing stack")
                return
            mapping = mappings[0]
            function = str(mapping["FunctionArn"])
            found = self.call("GetFunctionConfiguration", lambda_.get_function_configuration, FunctionName=function)
            problems = []
            if mapping.get("State") not in {"Enabled", "Enabling", "Updating"}:
                problems.append(f"its event-source mapping is {mapping.get('State')}")
            if found.get("State", "Active") != "Active":
                problems.append(f"the function is {found.get('State')} ({found.get('StateReason', '')})")
            architectures = found.get("Architectures") or [PROCESSOR_ARCHITECTURE]
            if PROCESSOR_ARCHITECTURE not in architectures:
                problems.append(f"it runs on {architectures}, built for {PROCESSOR_ARCHITECTURE}")
            self.call("Invoke (DryRun)", lambda_.invoke, FunctionName=function, InvocationType="DryRun")
            name = function.rsplit(":", 1)[-1]
            self.report.add(
                "processor",
                FAIL if problems else OK,
                "; ".join(problems)
                or f"{name}: active, {PROCESSOR_ARCHITECTURE}, fed by the queue, DryRun invoke allowed",
            )

    # ------------------------------------------------------------------ topic, alarms, domain

    def check_topic(self) -> str | None:
        topic = self.output(f"{self.config.prefix}-processing", "TopicArn")
        if not topic:
            return None
        sns = self.client("sns")
        with _checking(self.report, "notifications"):
            subscriptions = [
                s
                for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic)
                for s in page.get("Subscriptions", [])
            ]
            emails = {str(s.get("Endpoint", "")).lower(): s for s in subscriptions if s.get("Protocol") == "email"}
            pending = sorted(e for e, s in emails.items() if s.get("SubscriptionArn") == "PendingConfirmation")
            missing = sorted(set(self.config.notifications.emails) - set(emails))
            problems = []
            if pending:
                problems.append(f"not confirmed yet: {', '.join(pending)} (each must click the link AWS mailed)")
            if missing:
                problems.append(f"configured but not subscribed: {', '.join(missing)} (deploy the config)")
            if not emails:
                problems.append("no e-mail subscription: set notifications.emails")
            confirmed = len(emails) - len(pending)
            self.report.add("notifications", WARN if problems else OK, "; ".join(problems) or f"{confirmed} confirmed")
        return topic

    def check_alarms(self, topic: str) -> None:
        cloudwatch = self.client("cloudwatch")
        with _checking(self.report, "alarms"):
            alarms = [
                a
                for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"])
                for a in page.get("MetricAlarms", [])
                if topic in a.get("AlarmActions", [])
            ]
            firing = sorted(str(a["AlarmName"]) for a in alarms if a.get("StateValue") == "ALARM")
            if not alarms:
                self.report.add("alarms", FAIL, f"no alarm notifies {topic}: redeploy the processing stack")
            elif firing:
                self.report.add("alarms", WARN, f"in ALARM: {', '.join(firing)} (runbooks: docs/operate.md)")
            else:
                self.report.add("alarms", OK, f"{len(alarms)} alarm(s) on the topic, none in ALARM")

    def check_domain(self) -> None:
        domain = self.output(tensorboard_stack_name(self.config.prefix), DOMAIN_ID_OUTPUT)
        if not domain:
            return
        sagemaker = self.client("sagemaker")
        with _checking(self.report, f"domain {domain}"):
            status = self.call("DescribeDomain", sagemaker.describe_domain, DomainId=domain).get("Status")
            self.report.add(f"domain {domain}", OK if status == "InService" else FAIL, str(status))
        for user in self.config.users:
            name = f"user {user.name}"
            with _checking(self.report, name):
                profile = self.call(
                    "DescribeUserProfile",
                    sagemaker.describe_user_profile,
                    DomainId=domain,
                    UserProfileName=user_profile_name(user.name),
                )
                status = profile.get("Status")
                self.report.add(name, OK if status == "InService" else FAIL, f"profile {status}")

    def run(self) -> Report:
        self.check_stacks()
        self.check_bucket()
        queue_arn = self.check_queue()
        if queue_arn:
            self.check_rule(queue_arn)
            self.check_processor(queue_arn)
        topic = self.check_topic()
        if topic:
            self.check_alarms(topic)
        self.check_domain()
        return self.report


def run(args: argparse.Namespace) -> int:
    config = load(args)
    report = Verifier(config, region_of(args, config)).run()
    if args.json:
        print(json.dumps({"ok": not report.failed, "checks": [c.__dict__ for c in report.checks]}, indent=2))
    else:
        for check in report.checks:
            print(check.line())
        fails = sum(c.status == FAIL for c in report.checks)
        warns = sum(c.status == WARN for c in report.checks)
        print(f"{len(report.checks)} checks: {fails} failed, {warns} warning(s)")
    return 1 if report.failed else 0
