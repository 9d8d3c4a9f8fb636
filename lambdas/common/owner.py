"""What confirms whose a job is, shared by the trace processor (lambdas/trace_processor/job.py, owner_of: the owner
of a report) and the live dispatcher (lambdas/live_analysis/jobs.py: whom a running job's analysis is fair to).
Pure: a job's description and tags in, facts out; the rules that combine them live with each caller."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: describe / tag markers of jobs another SageMaker service created on someone's behalf: the owner-tag guard only
#: sees CreateTrainingJob and CreateHyperParameterTuningJob calls, so their tags are whatever that service was given
_CREATED_BY_SERVICE = (("AutoMLJobArn", "AutoML"),)
_PIPELINE_TAG = "sagemaker:pipeline"


def role_user(role_arn: object, name_prefix: str) -> str | None:
    """The ProfStack user whose execution role (IAM path /<prefix>/users/<user>/) the job runs as, if any."""
    if not isinstance(role_arn, str):
        return None
    found = re.fullmatch(
        rf"arn:aws[a-z-]*:iam::\d{{12}}:role/{re.escape(name_prefix)}/users/([a-z][a-z0-9-]*)/[\w+=,.@-]+", role_arn
    )
    return found.group(1) if found else None


def created_by_service(describe: Mapping[str, Any], tags: Mapping[str, str]) -> str | None:
    for key, service in _CREATED_BY_SERVICE:
        if describe.get(key):
            return service
    if any(k.startswith(_PIPELINE_TAG) for k in tags):
        return "SageMaker Pipelines"
    return None
