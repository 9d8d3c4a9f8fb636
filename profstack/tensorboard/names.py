"""Names and URLs of ProfStack's SageMaker domain objects, shared by the stack, the Lambdas and the CLI.

One place decides how a config user maps to a user profile, which app is their
TensorBoard, and how a presigned URL lands on a job (docs/platform-facts.md A3, A4).
"""

from __future__ import annotations

import base64
import re
from typing import Final

# A SageMaker domain id, as DescribeDomain returns it; the config, the app provider and the reaper check it.
DOMAIN_ID_PATTERN: Final = r"^d-[a-z0-9]{12}$"

APP_TYPE: Final = "TensorBoard"
APP_NAME = "default"  # the name the SageMaker console uses (docs/platform-facts.md A3)

# CloudFormation output names of the TensorBoard stack; the CLI looks the domain id up by these.
DOMAIN_ID_OUTPUT = "DomainId"

# Presigned URLs: seconds the URL stays valid (API maximum 300) and the session length.
URL_EXPIRES_SECONDS = 300
SESSION_SECONDS = 43200


def tensorboard_stack_name(prefix: str) -> str:
    return f"{prefix}-tensorboard"


def user_profile_name(user: str) -> str:
    """The SageMaker user profile of a config user: the user name itself (both are lower-case slugs)."""
    return user


def app_arn_patterns(partition: str, region: str, account: str, domain_id: str, user: str) -> list[str]:
    """ARNs of a user's TensorBoard apps (A4). Both spellings of the app type, until a real ARN is seen."""
    base = f"arn:{partition}:sagemaker:{region}:{account}:app/{domain_id}/{user_profile_name(user)}"
    return [f"{base}/tensorboard/{APP_NAME}", f"{base}/TensorBoard/{APP_NAME}"]


# SageMaker training-job names; checked (full match: "job\n" is not a name) before a name goes into a URL
# and before the trace processor uses one from an event.
TRAINING_JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


class StudioNameError(ValueError):
    """A name that SageMaker would reject."""


def job_state(job_name: str) -> str:
    """The `state` parameter that opens a training job in the TensorBoard data manager (A3)."""
    if not TRAINING_JOB_NAME_RE.fullmatch(job_name):
        raise StudioNameError(f"'{job_name}' is not a valid training job name")
    path = f"/tensorboard/default/data/plugin/sagemaker_data_manager/add_folder_or_job?Redirect=True&Name={job_name}"
    return base64.b64encode(path.encode()).decode()


def tensorboard_url(presigned_url: str, job_name: str | None = None) -> str:
    """Turn a CreatePresignedDomainUrl result into one that lands in TensorBoard, optionally on a job."""
    url = f"{presigned_url}&redirect={APP_TYPE}"
    if job_name:
        # The SageMaker Python SDK appends the base64 text as is (padding included); so do we.
        url += f"&state={job_state(job_name)}"
    return url
