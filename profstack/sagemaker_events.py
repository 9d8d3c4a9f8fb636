"""Names of the `SageMaker Training Job State Change` event (docs/platform-facts.md A5), shared by the
EventBridge rule (stacks/components/job_events.py) and the processor's event model
(lambdas/trace_processor/events.py). Pure constants."""

from __future__ import annotations

DETAIL_TYPE = "SageMaker Training Job State Change"
SOURCE = "aws.sagemaker"
TERMINAL_STATUSES = ("Completed", "Failed", "Stopped")
