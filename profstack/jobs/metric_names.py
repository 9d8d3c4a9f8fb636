"""CloudWatch metric names shared by the trace processor (EMF) and the stacks (alarms, dashboard,
IAM condition). Pure constants."""

from __future__ import annotations

# CloudWatch namespace of every ProfStack metric; IAM limits PutMetricData to it (condition key).
NAMESPACE = "ProfStack"
JOB_DIMENSION = "TrainingJobName"
#: which engine analysed the job ("c" or "python"): on JOBS_ANALYSED (profstack.analysis.native)
ENGINE_DIMENSION = "Engine"
JOBS_ANALYSED = "JobsAnalysed"
# JobProcessingFailures is also published per failure reason: the failure log's `reason` code
# (lambdas/trace_processor/errors.py).
REASON_DIMENSION = "FailureReason"

GPU_IDLE_PERCENT = "GPUIdlePercent"
LAUNCH_DELAY_P95_US = "LaunchDelayP95Micros"
STEP_TIME_P50_MS = "StepTimeP50Millis"
STEP_TIME_P95_MS = "StepTimeP95Millis"
DATALOADER_PERCENT = "DataLoaderPercent"
TRACE_BYTES = "TraceBytes"
TRACE_FILES = "TraceFiles"
UNREADABLE_TRACE_FILES = "UnreadableTraceFiles"
JOBS_WITHOUT_TRACES = "JobsWithoutTraces"
JOBS_REPORTED = "JobsReported"
JOBS_FANNED_OUT = "JobsFannedOut"
PROCESSING_FAILURES = "JobProcessingFailures"
# Across jobs (issue 16): Regression findings against the job's family, and what the GPUs cost
REGRESSIONS = "Regressions"
GPU_HOURS = "GPUHours"
GPU_COST_USD = "GPUCostUSD"
LOST_GPU_COST_USD = "LostGPUCostUSD"
FINDINGS_PREFIX = "Findings"  # + severity, e.g. FindingsHigh
SEVERITIES = ("critical", "warning", "info")  # summary.schema.json findings[].severity


def findings_metric(severity: str) -> str:
    return f"{FINDINGS_PREFIX}{severity.capitalize()}"
