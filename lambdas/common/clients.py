"""boto3 clients of the TensorBoard functions, created on first use rather than at import, so importing
a handler (tests, bundle import checks) makes no client and tests can replace it."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import boto3

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


@lru_cache(maxsize=1)
def sagemaker() -> SageMakerClient:
    return boto3.client("sagemaker")
