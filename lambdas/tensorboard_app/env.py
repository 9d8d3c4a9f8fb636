"""Environment of the TensorBoard app provider functions (set by stacks/components/tensorboard_app.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lambdas.common.env import EnvError, FunctionEnv
from profstack.tensorboard.names import DOMAIN_ID_PATTERN

__all__ = ["EnvError", "ProviderEnv"]


class ProviderEnv(FunctionEnv):
    # The only domain this provider manages apps in; its IAM policy is scoped to it as well.
    domain_id: Annotated[str, Field(alias="DOMAIN_ID", pattern=DOMAIN_ID_PATTERN)]
