"""Environment of the live-analysis dispatcher, validated once at cold start (stacks/components/live_analysis.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from lambdas.common.env import EnvError, TagFilterEnv
from lambdas.live_analysis.jobs import OwnerRules

__all__ = ["DispatchEnv", "EnvError"]


class DispatchEnv(TagFilterEnv):
    """The dispatcher: which function analyses a job, the deployment's job tag filter, what decides whose a job is
    (as the trace processor decides it: lambdas/trace_processor/env.py), and where its state lives between runs."""

    analyser_function: Annotated[str, Field(alias="ANALYSER_FUNCTION", min_length=1)]
    users: Annotated[frozenset[str], Field(alias="USERS", default_factory=frozenset)]
    user_tag_key: Annotated[str, Field(min_length=1, alias="USER_TAG_KEY")] = "profstack:user"
    ownership: Annotated[Literal["verified", "tag"], Field(alias="OWNERSHIP")] = "verified"
    owner_tag_guard: Annotated[bool, Field(alias="OWNER_TAG_GUARD")] = False
    name_prefix: Annotated[str, Field(alias="NAME_PREFIX", pattern=r"^[a-z][a-z0-9-]{1,20}$")] = "profstack"
    #: the idempotency table: one item (STATE_ID) holds the cursor between runs; None: every run starts afresh
    state_table: Annotated[str | None, Field(alias="STATE_TABLE")] = None

    @field_validator("users", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else None
        return value

    @field_validator("state_table", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None

    def owner_rules(self) -> OwnerRules:
        return OwnerRules(
            users=self.users,
            user_tag_key=self.user_tag_key,
            ownership=self.ownership,
            owner_tag_guard=self.owner_tag_guard,
            name_prefix=self.name_prefix,
        )
