"""Environment of the TensorBoard app provider functions, validated once at cold start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

DOMAIN_ID_PATTERN = r"^d-[a-z0-9]{12}$"


class EnvError(RuntimeError):
    """The function was deployed with a missing or malformed environment variable."""


class ProviderEnv(BaseModel):
    """Set by stacks/components/tensorboard_app.py."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    # The only domain this provider manages apps in; its IAM policy is scoped to it as well.
    domain_id: Annotated[str, Field(alias="DOMAIN_ID", pattern=DOMAIN_ID_PATTERN)]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProviderEnv:
        try:
            return cls.model_validate(dict(os.environ if environ is None else environ))
        except ValidationError as exc:
            raise EnvError(f"invalid function environment: {exc}") from None
