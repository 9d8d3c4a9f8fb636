"""Names of the events about training jobs, shared by the EventBridge rules (stacks/components/job_events.py,
job_alarm_manager.py, live_analysis.py) and the handlers' event models (lambdas/trace_processor/events.py,
lambdas/alarm_manager), so that importing a handler (which runs its cold start) is never needed to name them.
`SageMaker Training Job State Change`: docs/platform-facts.md A5. Pure constants."""

from __future__ import annotations

DETAIL_TYPE = "SageMaker Training Job State Change"
SOURCE = "aws.sagemaker"
TERMINAL_STATUSES = ("Completed", "Failed", "Stopped")

#: the alarm manager's two triggers: a job's state change, and its periodic sweep (EventBridge's scheduled event)
TRAINING_DETAIL_TYPE = DETAIL_TYPE
SCHEDULE_DETAIL_TYPE = "Scheduled Event"

#: `detail.ProfStackReanalysis` of a re-analysis request (`profstack reports reanalyze` / `backfill`): an id that
#: makes the processor's idempotency key (and fan-out execution name) new, so a job is analysed again. The
#: request is otherwise the job's own state-change event: the processor reads the job's status and owner from
#: DescribeTrainingJob and ListTags as for SageMaker's events, so it can file a job under no one else.
REANALYSIS_FIELD = "ProfStackReanalysis"
REANALYSIS_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
