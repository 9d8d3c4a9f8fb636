"""Alarms on the processing pipeline and on the per-job metrics the processor publishes (EMF)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from profstack.config import Alarms
from profstack.jobs import metric_names as m

PERIOD = cdk.Duration.minutes(5)


def job_metric(name: str, *, service: str, statistic: str = "Maximum") -> cloudwatch.Metric:
    """A processor EMF metric without the job dimension (Powertools adds `service`)."""
    return cloudwatch.Metric(
        namespace=m.NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=PERIOD,
    )


class ProcessingAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        thresholds: Alarms,
        topic: sns.ITopic,
        dead_letter_queue: sqs.IQueue,
        processor: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        service: str,
    ) -> None:
        super().__init__(scope, construct_id)
        action = actions.SnsAction(topic)
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        def add(
            alarm_id: str,
            metric: cloudwatch.IMetric,
            threshold: float,
            description: str,
            *,
            operator: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        ) -> None:
            alarm = cloudwatch.Alarm(
                self,
                alarm_id,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=operator,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
            alarm.add_alarm_action(action)
            self.alarms[alarm_id] = alarm

        gte = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        add(
            "DeadLetterQueueNotEmpty",
            dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            thresholds.dlq_messages_threshold,
            "Training-job events failed processing and sit in the DLQ: read the processor's "
            "'job processing failed' log lines (field `reason`), fix, then redrive.",
            operator=gte,
        )
        add(
            "ProcessorErrors",
            processor.metric_errors(period=PERIOD, statistic="Sum"),
            1,
            "The trace processor Lambda failed (crash or timeout); records will be retried.",
            operator=gte,
        )
        add(
            "FanoutFailed",
            state_machine.metric_failed(period=PERIOD, statistic="Sum"),
            1,
            "A fan-out execution failed: the job's report was not aggregated.",
            operator=gte,
        )
        add(
            "JobGpuIdleHigh",
            job_metric(m.GPU_IDLE_PERCENT, service=service),
            thresholds.gpu_idle_high_percent,
            f"A finished job's GPUs were idle more than {thresholds.gpu_idle_high_percent}% of the "
            "profiled window (see the job's report).",
        )
        add(
            "JobLaunchDelayHigh",
            job_metric(m.LAUNCH_DELAY_P95_US, service=service),
            thresholds.launch_delay_p95_high_us,
            f"A finished job's kernel launch delay p95 exceeded {thresholds.launch_delay_p95_high_us} us "
            "(CPU/launch-bound).",
        )
        add(
            "JobDataLoaderHigh",
            job_metric(m.DATALOADER_PERCENT, service=service),
            thresholds.dataloader_high_percent,
            f"A finished job spent more than {thresholds.dataloader_high_percent}% of step time in the DataLoader.",
        )
