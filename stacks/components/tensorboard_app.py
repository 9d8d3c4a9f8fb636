"""Per-user TensorBoard apps through a Lambda-backed custom resource provider (docs/platform-facts.md A1).

`AWS::SageMaker::App` cannot have AppType TensorBoard, so `TensorBoardAppProvider` wraps
lambdas/tensorboard_app (on_event starts CreateApp/DeleteApp, is_complete polls DescribeApp
until InService/Deleted) in a `custom_resources.Provider`. One provider serves every user;
`TensorBoardApp` is one custom resource per user.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from profstack.tensorboard.names import APP_NAME, app_arn_patterns, user_profile_name
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import acknowledge_function_baseline, iam5_resource
from stacks.components.python_function import PowertoolsSettings, ProfStackFunction, stack_logs_key

# A TensorBoard app takes a few minutes to reach InService; a replace (delete + create) twice that.
POLL_INTERVAL = cdk.Duration.seconds(20)
TOTAL_TIMEOUT = cdk.Duration.minutes(30)


class TensorBoardAppProvider(Construct):
    """The provider; `service_token` feeds TensorBoardApp. IAM covers only the given users' apps."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_id: str,
        user_names: Sequence[str],
        log_retention: logs.RetentionDays,
        role_path: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        environment = {"DOMAIN_ID": domain_id}
        powertools = PowertoolsSettings(service="tensorboard-app-provider")
        self.on_event = ProfStackFunction(
            self,
            "OnEvent",
            handler_module="lambdas.tensorboard_app.on_event",
            description="ProfStack TensorBoard app custom resource: start CreateApp/DeleteApp",
            log_retention=log_retention,
            powertools=powertools,
            environment=environment,
            timeout=cdk.Duration.minutes(1),
            memory_size=256,
            role_path=role_path,
        )
        self.is_complete = ProfStackFunction(
            self,
            "IsComplete",
            handler_module="lambdas.tensorboard_app.is_complete",
            description="ProfStack TensorBoard app custom resource: poll DescribeApp until done",
            log_retention=log_retention,
            powertools=powertools,
            environment=environment,
            timeout=cdk.Duration.minutes(1),
            memory_size=256,
            role_path=role_path,
        )
        app_arns = [
            arn
            for name in user_names
            for arn in app_arn_patterns(stack.partition, stack.region, stack.account, domain_id, name)
        ]
        for function in (self.on_event, self.is_complete):
            function.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["sagemaker:CreateApp", "sagemaker:DeleteApp", "sagemaker:DescribeApp"],
                    resources=app_arns,
                )
            )

        framework_logs = logs.LogGroup(
            self,
            "FrameworkLogs",
            retention=log_retention,
            encryption_key=stack_logs_key(self),
            removal_policy=cdk.RemovalPolicy.DESTROY,  # logs of a stateless provider; retention bounds them
        )
        # Own roles for the CDK framework functions: the default ones carry the AWS managed
        # AWSLambdaBasicExecutionRole policy; these may only write their own log group.
        framework_roles = []
        for role_id in ("FrameworkOnEventRole", "FrameworkCompleteRole"):
            role = iam.Role(
                self,
                role_id,
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description="CDK custom-resource framework of the ProfStack TensorBoard app provider",
            )
            framework_logs.grant_write(role)
            framework_roles.append(role)
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event.function,
            is_complete_handler=self.is_complete.function,
            query_interval=POLL_INTERVAL,
            total_timeout=TOTAL_TIMEOUT,
            log_group=framework_logs,
            framework_on_event_role=framework_roles[0],
            framework_complete_and_timeout_role=framework_roles[1],
            # Waiter logging would need logs:PutLogEvents etc. on Resource "*" (CDK's statement); the
            # waiter only relays is_complete, whose every poll the ProfStack function logs itself.
            disable_waiter_state_machine_logging=True,
        )
        self._acknowledge(framework_roles)
        self.service_token = self.provider.service_token

    def _acknowledge(self, framework_roles: list[iam.Role]) -> None:
        sync = (
            "Invoked synchronously by the CDK provider framework, which reports any failure to "
            "CloudFormation; there is no asynchronous event to keep in a DLQ."
        )
        for function in (self.on_event, self.is_complete):
            acknowledge_function_baseline(function, async_reason=sync)
        invoke_reason = (
            "lambda:InvokeFunction on the provider's own functions; the ':*' suffix (CDK grantInvoke) "
            "covers their versions and aliases, nothing else."
        )
        targets = [self.on_event.function, self.is_complete.function]
        for role in framework_roles:
            for target in targets:
                acknowledge(role, iam5_resource(self, f"{target.function_arn}:*"), invoke_reason)
        framework = self.provider.node
        for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout"):
            framework_function = framework.find_child(name)
            acknowledge(
                framework_function,
                "Serverless-LambdaDLQ",
                "CDK custom-resource framework function: CloudFormation and the waiter state machine "
                "invoke it and receive its failures; a DLQ would hold nothing actionable.",
            )
            acknowledge(
                framework_function,
                "Serverless-LambdaDefaultMemorySize",
                "CDK custom-resource framework function (not ProfStack code); it only relays "
                "small JSON events, so the default memory size fits.",
            )
            acknowledge(
                framework_function,
                "Serverless-LambdaTracing",
                "CDK custom-resource framework function that only relays events; ProfStack functions "
                "use no X-Ray either (stacks/components/python_function.py): logs carry every step.",
            )
        waiter = framework.find_child("waiter-state-machine")
        for fn_id in ("framework-isComplete", "framework-onTimeout"):
            acknowledge(
                waiter,
                iam5_resource(self, f"{framework.find_child(fn_id).function_arn}:*"),  # type: ignore[attr-defined]
                "The CDK waiter state machine may invoke only the provider's framework functions; "
                "':*' covers their versions and aliases.",
            )
        acknowledge(
            waiter,
            "AwsSolutions-SF1",
            "CDK's provider waiter only relays is_complete polls; the ProfStack is_complete function "
            "logs every poll with its decision, and CloudFormation events record the outcome.",
        )
        for rule in ("AwsSolutions-SF2", "Serverless-StepFunctionStateMachineXray"):
            acknowledge(
                waiter,
                rule,
                "CDK's provider waiter only polls is_complete, which logs every poll with its decision; "
                "CloudFormation events record the outcome.",
            )


class TensorBoardApp(Construct):
    """One user's TensorBoard app (`default`). `depends_on`: the user's profile and execution role, so
    that the app is deleted before them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        provider: TensorBoardAppProvider,
        domain_id: str,
        user_name: str,
        instance_type: str,
        depends_on: Sequence[Construct],
    ) -> None:
        super().__init__(scope, construct_id)
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::TensorBoardApp",
            properties={
                "DomainId": domain_id,
                "UserProfileName": user_profile_name(user_name),
                "AppName": APP_NAME,
                "InstanceType": instance_type,
            },
        )
        # Created after (and so deleted before) the profile and its role with their policies, and after the
        # provider's permissions: DeleteUserProfile fails while the profile still has apps.
        self.resource.node.add_dependency(*depends_on)
        self.resource.node.add_dependency(provider.on_event, provider.is_complete)
        self.app_arn = self.resource.get_att_string("AppArn")
