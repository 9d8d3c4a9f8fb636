"""CloudWatch dashboard for training jobs: SageMaker's instance metrics (A8) and ProfStack's own."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from lambdas.trace_processor import metric_names as m
from profstack.config import Alarms

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
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name, default_interval=cdk.Duration.days(1)
        )

        def per_host(metric: str, title: str, note: str) -> cloudwatch.GraphWidget:
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
                width=12,
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
                    f"Per-job trace metrics come from ProfStack (`{m.NAMESPACE}`, dimension `{m.JOB_DIMENSION}`)."
                ),
                width=24,
                height=3,
            )
        )
        self.dashboard.add_widgets(
            per_host("GPUUtilization", "GPU utilisation", "sum over GPUs"),
            per_host("GPUMemoryUtilization", "GPU memory", "sum over GPUs"),
        )
        self.dashboard.add_widgets(
            per_host("CPUUtilization", "CPU utilisation", "sum over cores"),
            per_host("MemoryUtilization", "Host memory", "0-100"),
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
            cloudwatch.GraphWidget(
                title="Processing queue",
                left=[
                    queue.metric_approximate_number_of_messages_visible(label="queued"),
                    dead_letter_queue.metric_approximate_number_of_messages_visible(label="dead-lettered"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Processor",
                left=[processor.metric_invocations(), processor.metric_errors(), processor.metric_throttles()],
                right=[processor.metric_duration(statistic="Maximum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Fan-out executions",
                left=[state_machine.metric_started(), state_machine.metric_succeeded(), state_machine.metric_failed()],
                width=8,
            ),
        )
