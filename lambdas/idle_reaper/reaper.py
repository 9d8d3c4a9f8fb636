"""Decide which TensorBoard apps are idle and delete them (or only say so, in dry-run mode).

An app is idle when it has been InService for longer than the TTL since the user's last
activity (`LastUserActivityTimestamp` from DescribeApp), or since its creation when
SageMaker reports no activity yet. Every app seen gets one Decision; the handler logs
each one and counts the reaped ones as a metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from profstack.tensorboard.apps import IN_SERVICE, delete_app, describe_app, error_code, list_tensorboard_apps

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

Action = Literal["reaped", "would-reap", "keep", "skip", "error"]


@dataclass(frozen=True, kw_only=True)
class Decision:
    user_profile: str
    app_name: str
    status: str
    action: Action
    reason: str
    idle_minutes: float | None = None
    idle_since: str | None = None  # ISO 8601
    idle_reference: Literal["last-user-activity", "creation-time"] | None = None


@dataclass(frozen=True)
class ReapResult:
    decisions: tuple[Decision, ...]

    def count(self, action: Action) -> int:
        return sum(1 for d in self.decisions if d.action == action)


class ReapError(RuntimeError):
    """At least one idle app could not be deleted; the others were handled."""


def _decide_one(
    client: SageMakerClient,
    listed: dict[str, Any],
    *,
    domain_id: str,
    ttl: timedelta,
    dry_run: bool,
    now: datetime,
) -> Decision:
    profile = str(listed["UserProfileName"])
    name = str(listed.get("AppName", ""))
    try:
        state = describe_app(client, domain_id=domain_id, user_profile_name=profile, app_name=name)
    except ClientError as exc:
        # one app the reaper may not read (AccessDenied on an app it does not own, throttling) is that app's
        # error; every app after it is still judged
        return Decision(
            user_profile=profile,
            app_name=name,
            status=str(listed.get("Status", "")),
            action="error",
            reason=f"DescribeApp failed: {error_code(exc)}",
        )
    if state is None or state.status != IN_SERVICE:
        status = state.status if state is not None else "NotFound"
        return Decision(user_profile=profile, app_name=name, status=status, action="keep", reason="not InService")
    reference: Literal["last-user-activity", "creation-time"]
    if state.last_user_activity is not None:
        since, reference = state.last_user_activity, "last-user-activity"
    elif state.creation_time is not None:
        since, reference = state.creation_time, "creation-time"
    else:
        return Decision(
            user_profile=profile,
            app_name=name,
            status=state.status,
            action="keep",
            reason="SageMaker reports neither activity nor creation time",
        )
    idle = now - since
    timed = Decision(
        user_profile=profile,
        app_name=name,
        status=state.status,
        action="keep",
        reason=f"idle for less than the TTL of {ttl}",
        idle_minutes=round(idle.total_seconds() / 60, 1),
        idle_since=since.isoformat(),
        idle_reference=reference,
    )
    if idle <= ttl:
        return timed
    if dry_run:
        return replace(timed, action="would-reap", reason="idle beyond the TTL; dry run")
    try:
        delete_app(client, domain_id=domain_id, user_profile_name=profile, app_name=name)
    except ClientError as exc:
        return replace(timed, action="error", reason=f"DeleteApp failed: {error_code(exc)}")
    return replace(timed, action="reaped", reason="idle beyond the TTL")


def reap_idle_apps(
    client: SageMakerClient,
    *,
    domain_id: str,
    user_profiles: Iterable[str],
    idle_ttl: timedelta,
    dry_run: bool,
    now: datetime,
) -> ReapResult:
    """Walk every TensorBoard app of the domain; delete the idle ones of the managed profiles."""
    managed = frozenset(user_profiles)
    decisions: list[Decision] = []
    for listed in list_tensorboard_apps(client, domain_id=domain_id):
        profile = str(listed["UserProfileName"])
        if profile not in managed:
            decisions.append(
                Decision(
                    user_profile=profile,
                    app_name=str(listed.get("AppName", "")),
                    status=str(listed.get("Status", "")),
                    action="skip",
                    reason="profile is not managed by ProfStack",
                )
            )
            continue
        if listed.get("Status") != IN_SERVICE:
            decisions.append(
                Decision(
                    user_profile=profile,
                    app_name=str(listed.get("AppName", "")),
                    status=str(listed.get("Status", "")),
                    action="keep",
                    reason="not InService",
                )
            )
            continue
        decisions.append(_decide_one(client, listed, domain_id=domain_id, ttl=idle_ttl, dry_run=dry_run, now=now))
    return ReapResult(tuple(decisions))
