"""TensorBoardStack: managed TensorBoard per user.

A SageMaker domain (created or imported), a user profile with its own least-privilege
execution role per config user, a TensorBoard app per user through a custom resource
provider (docs/platform-facts.md A1), and a scheduled reaper of idle apps. Removing a user from
the config removes their app, then their profile, on the next deploy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from profstack.actions import ACTIONS_TAG, LIVE_TAG
from profstack.config import CreateDomain, ImportDomain, TensorBoard, User
from profstack.guardrails import Scope
from profstack.history.family import DEFAULT_TAG_KEY
from profstack.tensorboard.names import DOMAIN_ID_OUTPUT
from stacks.components.idle_reaper import IdleReaper
from stacks.components.role_paths import platform_role_path, user_role_path
from stacks.components.sagemaker_domain import StudioDomain
from stacks.components.tensorboard_app import TensorBoardApp, TensorBoardAppProvider
from stacks.components.user_workspace import UserWorkspace

#: the behaviour tags of the example config (profstack.guardrails.behaviour_tag_keys gives a config's own)
DEFAULT_BEHAVIOUR_TAGS = tuple(sorted((ACTIONS_TAG, LIVE_TAG, DEFAULT_TAG_KEY)))


class TensorBoardStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain: CreateDomain | ImportDomain,
        tensorboard: TensorBoard,
        users: Sequence[User],
        trace_bucket: s3.IBucket,
        data_key: kms.IKey,
        log_retention: logs.RetentionDays,
        domain_name: str,
        name_prefix: str,
        logs_key: kms.IKey | None = None,
        behaviour_tags: Sequence[str] = DEFAULT_BEHAVIOUR_TAGS,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.logs_key = logs_key  # every log group of the stack (stacks/components/python_function.py)
        self.domain = StudioDomain(self, "Domain", domain=domain, domain_name=domain_name, key=data_key)
        domain_id = self.domain.domain_id
        cdk.CfnOutput(self, DOMAIN_ID_OUTPUT, value=domain_id, description="SageMaker domain of ProfStack")
        # who is who, for every user's explicit Denies (profstack/guardrails.py, issue 42)
        self.isolation = Scope(
            prefix=name_prefix,
            users=tuple(u.name for u in users),
            user_tag_key=tensorboard.user_tag_key,
            behaviour_tags=tuple(behaviour_tags),
            partition=self.partition,
            region=self.region,
            account=self.account,
            domain_id=domain_id,
            principals={u.name: tuple(u.principals) for u in users if u.principals},
        )
        self.domain.deny_every_users_things(self.isolation)

        self.workspaces: dict[str, UserWorkspace] = {}
        self.apps: dict[str, TensorBoardApp] = {}
        if not users:
            return
        names = [u.name for u in users]
        # the roles that act on every user's app sit on the platform path (the SCP template spares it)
        platform_path = platform_role_path(name_prefix)
        self.app_provider = TensorBoardAppProvider(
            self,
            "AppProvider",
            domain_id=domain_id,
            user_names=names,
            log_retention=log_retention,
            role_path=platform_path,
        )
        for user in users:
            # Construct ids are the user names: removing a user removes exactly their resources.
            workspace = UserWorkspace(
                self,
                f"User-{user.name}",
                user=user,
                domain_id=domain_id,
                trace_bucket=trace_bucket,
                data_key=data_key,
                user_tag_key=tensorboard.user_tag_key,
                role_path=user_role_path(name_prefix, user.name),
                name_prefix=name_prefix,
                isolation=self.isolation,
                security_group_ids=self.domain.security_group_ids,
            )
            self.workspaces[user.name] = workspace
            self.apps[user.name] = TensorBoardApp(
                workspace,
                "TensorBoard",
                provider=self.app_provider,
                domain_id=domain_id,
                user_name=user.name,
                instance_type=user.tensorboard_instance_type or tensorboard.default_instance_type,
                depends_on=[workspace.profile, workspace.role],
            )
            # Scoped to the workspace: output ids stay unique even for names like "a-l" and "al". With many users
            # the access policy comes in parts (IAM's size limit): every part is attached to the person.
            parts = workspace.access_policies
            for index, policy in enumerate(parts, start=1):
                cdk.CfnOutput(
                    workspace,
                    "AccessPolicyArn" if index == 1 else f"AccessPolicyArn{index}",
                    value=policy.managed_policy_arn,
                    description=f"Attach to {user.name}'s IAM identity to open their TensorBoard"
                    + (f" (part {index} of {len(parts)}: attach every part)" if len(parts) > 1 else ""),
                )
        self.reaper = IdleReaper(
            self,
            "IdleReaper",
            domain_id=domain_id,
            user_names=names,
            tensorboard=tensorboard,
            log_retention=log_retention,
            role_path=platform_path,
        )
