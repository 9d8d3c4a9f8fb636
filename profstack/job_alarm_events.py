"""Event names shared by the handler and the stack (importing the handler would run its cold start)."""

from __future__ import annotations

TRAINING_DETAIL_TYPE = "SageMaker Training Job State Change"
SCHEDULE_DETAIL_TYPE = "Scheduled Event"
