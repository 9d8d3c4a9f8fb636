"""Environment of the live-analysis dispatcher, validated once at cold start (stacks/components/live_analysis.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lambdas.common.env import EnvError, TagFilterEnv

__all__ = ["DispatchEnv", "EnvError"]


class DispatchEnv(TagFilterEnv):
    """The dispatcher: which function analyses a job, and the deployment's job tag filter."""

    analyser_function: Annotated[str, Field(alias="ANALYSER_FUNCTION", min_length=1)]
