"""Alarms on live training jobs, from SageMaker's instance metrics (docs/platform-facts.md A8).

Hosts come and go with jobs (dimension Host = <job>/algo-<n>), so a static per-host alarm
cannot exist. Each alarm is a CloudWatch Metrics Insights query aggregated over every host
in the namespace, which yields one time series:

- GPU memory high: MAX over hosts of GPUMemoryUtilization.
- GPU utilisation low: MIN over hosts of GPUUtilization, sustained for evaluation_periods
  minutes, so a job warming up for a few minutes does not page anyone.

SageMaker sums both metrics over a host's GPUs (0..100*N), so the per-GPU thresholds from the
config are multiplied by alarms.gpus_per_host. Fleets that mix GPU counts per host should set
the smallest count (memory alarm errs early) and read the dashboard per host.
"""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct

from profstack.config import Alarms

SAGEMAKER_NAMESPACE = "/aws/sagemaker/TrainingJobs"
PERIOD_SECONDS = 60  # SageMaker publishes instance metrics every minute (docs/platform-facts.md A8)


def insights_query(statistic: str, metric: str) -> str:
    # Not SQL against a database: a CloudWatch Metrics Insights expression built from constants.
    return f'SELECT {statistic}({metric}) FROM SCHEMA("{SAGEMAKER_NAMESPACE}", Host)'  # noqa: S608


class TrainingJobAlarms(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, thresholds: Alarms, topic: sns.ITopic, name_prefix: str
    ) -> None:
        super().__init__(scope, construct_id)
        gpus = thresholds.gpus_per_host
        self.alarms: dict[str, cloudwatch.CfnAlarm] = {}

        def add(alarm_id: str, *, query: str, threshold: float, operator: str, description: str) -> None:
            self.alarms[alarm_id] = cloudwatch.CfnAlarm(
                self,
                alarm_id,
                alarm_name=f"{name_prefix}-{alarm_id}",
                alarm_description=description,
                metrics=[
                    cloudwatch.CfnAlarm.MetricDataQueryProperty(
                        id="q1", expression=query, period=PERIOD_SECONDS, return_data=True
                    )
                ],
                threshold=threshold,
                comparison_operator=operator,
                evaluation_periods=thresholds.evaluation_periods,
                datapoints_to_alarm=thresholds.evaluation_periods,
                treat_missing_data="notBreaching",  # no training job running is not an alarm
                alarm_actions=[topic.topic_arn],
                ok_actions=[topic.topic_arn],
            )

        add(
            "TrainingGpuMemoryHigh",
            query=insights_query("MAX", "GPUMemoryUtilization"),
            threshold=thresholds.gpu_memory_high_percent * gpus,
            operator="GreaterThanThreshold",
            description=(
                f"A training host used more than {thresholds.gpu_memory_high_percent}% of GPU memory per GPU "
                f"(summed over {gpus} GPUs) for {thresholds.evaluation_periods} min: risk of OOM. "
                "Find the host on the training-jobs dashboard."
            ),
        )
        add(
            "TrainingGpuUtilizationLow",
            query=insights_query("MIN", "GPUUtilization"),
            threshold=thresholds.gpu_utilization_low_percent * gpus,
            operator="LessThanThreshold",
            description=(
                f"A training host kept its GPUs below {thresholds.gpu_utilization_low_percent}% utilisation "
                f"(per GPU, {gpus} GPUs) for {thresholds.evaluation_periods} min: the job is likely input-, "
                "CPU- or launch-bound. Profile it and read its ProfStack report."
            ),
        )
