"""ProcessingStack: finished training job -> EventBridge -> SQS -> trace processor -> report,
metrics, TensorBoard scalars and a notification; Step Functions fan-out for big jobs; alarms and
a training-jobs dashboard. Stateless: the bucket, keys and idempotency table come from StorageStack."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from profstack.config import Alarms, History, Notifications, Processing
from stacks.components.fanout_workflow import FanoutWorkflow
from stacks.components.job_alarm_manager import JobAlarmManager
from stacks.components.job_events import JobEventQueue
from stacks.components.job_history import JobHistory
from stacks.components.live_analysis import LiveAnalysis
from stacks.components.notification_topic import NotificationTopic
from stacks.components.owner_tag_guard import OwnerTagGuard
from stacks.components.processing_alarms import ProcessingAlarms
from stacks.components.python_function import log_retention
from stacks.components.role_paths import analyst_role_path, processing_role_path, role_arn_pattern
from stacks.components.trace_access import TraceAccess
from stacks.components.trace_processor import (
    VISIBILITY_TIMEOUT_FACTOR,
    TraceProcessorFunctions,
    processor_environment,
)
from stacks.components.training_dashboard import TrainingJobsDashboard


class ProcessingStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        trace_bucket: s3.IBucket,
        data_key: kms.IKey,
        messaging_key: kms.IKey,
        idempotency_table: dynamodb.ITable,
        processing: Processing,
        alarms: Alarms,
        notifications: Notifications,
        user_tag_key: str,
        users: Sequence[str],
        log_retention_days: int,
        name_prefix: str,
        history: History | None = None,
        history_users: Sequence[str] = (),
        logs_key: kms.IKey | None = None,
        behaviour_tags: Sequence[str] = (),
        break_glass: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.logs_key = logs_key  # every log group of the stack (stacks/components/python_function.py)
        service = f"{name_prefix}-trace-processor"
        # Every role that reads or writes users' data sits on this path: the trace bucket's policy lets
        # exactly these (and the users' own roles, break-glass) in (stacks/components/role_paths.py).
        role_path = processing_role_path(name_prefix)
        access = TraceAccess(bucket=trace_bucket, key=data_key, extra_prefixes=processing.extra_trace_prefixes)

        self.notifications = NotificationTopic(self, "Notifications", key=messaging_key, emails=notifications.emails)
        self.events = JobEventQueue(
            self,
            "JobEvents",
            key=messaging_key,
            visibility_timeout=cdk.Duration.seconds(processing.lambda_timeout_seconds * VISIBILITY_TIMEOUT_FACTOR),
            max_receive_count=processing.max_receive_count,
            tag_filter=processing.job_tag_filter,
            consumers=[role_arn_pattern(role_path)],  # the processor's role sits on the processing path
        )
        self.functions = TraceProcessorFunctions(
            self,
            "TraceProcessor",
            access=access,
            queue=self.events.queue,
            table=idempotency_table,
            topic=self.notifications.topic,
            processing=processing,
            user_tag_key=user_tag_key,
            users=users,
            log_retention_days=log_retention_days,
            service=service,
            role_path=role_path,
            name_prefix=name_prefix,
        )
        self.fanout = FanoutWorkflow(
            self,
            "Fanout",
            access=access,
            analyze_file=self.functions.analyze_file,
            aggregate=self.functions.aggregate,
            processing=processing,
            log_retention=log_retention(log_retention_days),
            role_path=role_path,
        )
        self.functions.use_state_machine(self.fanout.state_machine)
        self.alarms = ProcessingAlarms(
            self,
            "Alarms",
            thresholds=alarms,
            topic=self.notifications.topic,
            dead_letter_queue=self.events.dead_letter_queue,
            processor=self.functions.processor.function,
            state_machine=self.fanout.state_machine,
            service=service,
        )
        # Per-job, per-host alarms (issue 15); they replace the fleet-wide fixed-gpus_per_host alarms.
        self.job_alarm_manager = (
            JobAlarmManager(
                self,
                "JobAlarmManager",
                thresholds=alarms,
                topic=self.notifications.topic,
                name_prefix=name_prefix,
                tag_filter=processing.job_tag_filter,
                log_retention=log_retention(log_retention_days),
            )
            if alarms.per_job_alarms
            else None
        )
        self.dashboard = TrainingJobsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{name_prefix}-training-jobs",
            thresholds=alarms,
            queue=self.events.queue,
            dead_letter_queue=self.events.dead_letter_queue,
            processor=self.functions.processor.function,
            state_machine=self.fanout.state_machine,
            live_dashboard_name=self.job_alarm_manager.dashboard_name if self.job_alarm_manager else None,
            alarm_manager=self.job_alarm_manager.function.function if self.job_alarm_manager else None,
            processor_service=service,
        )
        # --- across jobs (issue 16): history tables, Athena workgroup, the processor's history access ---
        self.history = None
        if history is not None and history.enabled:
            self.history = JobHistory(
                self,
                "History",
                bucket=trace_bucket,
                key=data_key,
                users=history_users,
                history=history,
                name_prefix=name_prefix,
                analyst_role_path=analyst_role_path(name_prefix),
            )
            self.history.grant_processor(self.functions.processor, construct_id="ProcessorAccess")
            self.history.grant_processor(self.functions.aggregate, construct_id="AggregateAccess")
            cdk.CfnOutput(self, "HistoryWorkGroup", value=self.history.workgroup_name)
        # --- end across jobs ---
        # --- issue 36: analysis while a job runs, and actions on findings (stacks/components/live_analysis.py) ---
        self.live = None
        if processing.live.enabled:
            self.live = LiveAnalysis(
                self,
                "LiveAnalysis",
                access=access,
                processor=self.functions,
                processor_env=processor_environment(
                    access=access,
                    table=idempotency_table,
                    topic=self.notifications.topic,
                    processing=processing,
                    user_tag_key=user_tag_key,
                    users=users,
                    name_prefix=name_prefix,
                ),
                topic=self.notifications.topic,
                processing=processing,
                user_tag_key=user_tag_key,
                users=users,
                log_retention_days=log_retention_days,
                name_prefix=name_prefix,
                role_path=role_path,
            )
        # --- end issue 36 ---
        if processing.owner_tag_guard.enabled:
            self.owner_tag_guard = OwnerTagGuard(
                self,
                "OwnerTagGuard",
                user_tag_key=user_tag_key,
                role_names=processing.owner_tag_guard.role_names,
                behaviour_tags=behaviour_tags,
                break_glass=break_glass,
            )
        cdk.CfnOutput(self, "QueueUrl", value=self.events.queue.queue_url)
        cdk.CfnOutput(self, "DeadLetterQueueUrl", value=self.events.dead_letter_queue.queue_url)
        cdk.CfnOutput(self, "TopicArn", value=self.notifications.topic.topic_arn)
        cdk.CfnOutput(self, "FanoutStateMachineArn", value=self.fanout.state_machine.state_machine_arn)
