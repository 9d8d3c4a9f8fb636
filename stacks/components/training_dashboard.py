"""CloudWatch dashboard for training jobs: SageMaker's instance metrics (A8) and ProfStack's own health.

Per GPU: SageMaker's instance metrics carry only the `Host` dimension, so a dashboard CloudFormation
writes cannot know a host's instance type, and metric math cannot divide one SEARCH array by another.
The per-GPU view is therefore the live dashboard the alarm manager rewrites every reconcile with one
`metric / <that host's GPU count>` line per running host (lambdas/alarm_manager/dashboard.py); this
dashboard links to it and shows the raw per-host sums, labelled as sums.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from profstack.config import Alarms
from profstack.jobs import metric_names as m

SAGEMAKER_NAMESPACE = "/aws/sagemaker/TrainingJobs"


def _search(
    *, namespace: str, dimensions: str, metric: str, stat: str, period: int, label: str
) -> cloudwatch.MathExpression:
    return cloudwatch.MathExpression(
        expression=f"SEARCH('{{{namespace},{dimensions}}} MetricName=\"{metric}\"', '{stat}', {period})",
        label=label,
        period=cdk.Duration.seconds(period),
        using_metrics={},
    )


class TrainingJobsDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        thresholds: Alarms,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        processor: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        live_dashboard_name: str | None = None,
        alarm_manager: lambda_.IFunction | None = None,
        processor_service: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name, default_interval=cdk.Duration.days(1)
        )

        def per_host(metric: str, title: str, note: str, *, width: int = 12) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=f"{title} ({note})",
                left=[
                    _search(
                        namespace=SAGEMAKER_NAMESPACE,
                        dimensions="Host",
                        metric=metric,
                        stat="Average",
                        period=60,
                        label="",
                    )
                ],
                width=width,
                height=6,
            )

        def per_job(metric: str, title: str, *, threshold: float | None = None) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=title,
                left=[
                    _search(
                        namespace=m.NAMESPACE,
                        dimensions=f"{m.JOB_DIMENSION},service",  # Powertools adds `service`
                        metric=metric,
                        stat="Maximum",
                        period=300,
                        label="",
                    )
                ],
                left_annotations=(
                    [cloudwatch.HorizontalAnnotation(value=threshold, label="alarm threshold")]
                    if threshold is not None
                    else None
                ),
                width=8,
                height=6,
            )

        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    "## Training jobs\n"
                    f"Instance metrics from `{SAGEMAKER_NAMESPACE}` (dimension `Host` = `<job>/algo-<n>`, 1 min). "
                    "**GPUUtilization and GPUMemoryUtilization are summed over the host's GPUs (0-100 x N)**: "
                    f"divide by the GPU count. Low-utilisation guide: {thresholds.gpu_utilization_low_percent}% "
                    f"per GPU; memory high: {thresholds.gpu_memory_high_percent}% per GPU. "
                    f"Per-job trace metrics come from ProfStack (`{m.NAMESPACE}`, dimension `{m.JOB_DIMENSION}`). "
                    + (
                        f"**Per GPU, per running host: dashboard `{live_dashboard_name}`** (rewritten by the alarm "
                        "manager with each host's own GPU count)."
                        if live_dashboard_name
                        else "Per-job alarms are off (alarms.per_job_alarms), so no per-GPU dashboard is kept."
                    )
                ),
                width=24,
                height=4,
            )
        )
        self.dashboard.add_widgets(
            per_host("GPUUtilization", "GPU utilisation", "sum over GPUs"),
            per_host("GPUMemoryUtilization", "GPU memory", "sum over GPUs"),
        )
        self.dashboard.add_widgets(
            per_host("CPUUtilization", "CPU utilisation", "sum over vCPUs", width=8),
            per_host("MemoryUtilization", "Host memory", "0-100", width=8),
            per_host("DiskUtilization", "Disk", "0-100", width=8),
        )
        self.dashboard.add_widgets(
            per_job(m.GPU_IDLE_PERCENT, "GPU idle % (trace)", threshold=thresholds.gpu_idle_high_percent),
            per_job(m.LAUNCH_DELAY_P95_US, "Launch delay p95 (us)", threshold=thresholds.launch_delay_p95_high_us),
            per_job(m.DATALOADER_PERCENT, "DataLoader % of step", threshold=thresholds.dataloader_high_percent),
        )
        self.dashboard.add_widgets(
            per_job(m.STEP_TIME_P95_MS, "Step time p95 (ms)"),
            per_job(m.findings_metric("critical"), "Critical findings"),
            per_job(m.TRACE_BYTES, "Trace bytes analysed"),
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(markdown="## ProfStack health", width=24, height=1),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Processing queue depth",
                left=[
                    queue.metric_approximate_number_of_messages_visible(label="queued", statistic="Maximum"),
                    dead_letter_queue.metric_approximate_number_of_messages_visible(
                        label="dead-lettered (DLQ depth)", statistic="Maximum"
                    ),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Age of the oldest message (s)",
                left=[
                    queue.metric_approximate_age_of_oldest_message(label="queue", statistic="Maximum"),
                    dead_letter_queue.metric_approximate_age_of_oldest_message(label="DLQ", statistic="Maximum"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Processor errors and throttles",
                left=[
                    processor.metric_invocations(statistic="Sum"),
                    processor.metric_errors(statistic="Sum"),
                    processor.metric_throttles(statistic="Sum"),
                ],
                right=[processor.metric_duration(statistic="Maximum", label="duration max (ms)")],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Processing failures (by the processor)",
                left=[
                    cloudwatch.Metric(
                        namespace=m.NAMESPACE,
                        metric_name=m.PROCESSING_FAILURES,
                        dimensions_map={"service": processor_service},
                        statistic="Sum",
                        label="records failed",
                    )
                ]
                if processor_service
                else [processor.metric_errors(statistic="Sum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Fan-out executions",
                left=[state_machine.metric_started(), state_machine.metric_succeeded(), state_machine.metric_failed()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Per-job alarm manager",
                left=[
                    alarm_manager.metric_invocations(statistic="Sum"),
                    alarm_manager.metric_errors(statistic="Sum"),
                    alarm_manager.metric_throttles(statistic="Sum"),
                ],
                right=[alarm_manager.metric_duration(statistic="Maximum", label="duration max (ms)")],
                width=8,
            )
            if alarm_manager is not None
            else cloudwatch.TextWidget(markdown="Per-job alarms are off.", width=8, height=6),
        )
