"""Spell granular cdk-nag finding ids the way cdk-nag 3 does, so acknowledgements stay exact.

Granular findings (e.g. `AwsSolutions-IAM5[Resource::<Fn.Arn>:*]`) embed the flattened
CloudFormation reference. `flatten` ports cdk-nag's `flattenCfnReference`; `cross_stack`
turns another stack's value into the import token CloudFormation will see, so the id
names the export exactly as the synthesized template does.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

from stacks.components.nag_wildcards import flatten_cfn_reference


def flatten(scope: IConstruct, value: Any) -> str:
    """The flat text cdk-nag shows for `value` (a token, string or intrinsic) inside `scope`'s stack."""
    return flatten_cfn_reference(cdk.Stack.of(scope).resolve(value))


def cross_stack(scope: IConstruct, owner: IConstruct, value: str) -> str:
    """`value` of `owner`'s stack as `scope`'s stack will import it (unchanged within one stack)."""
    owner_stack = cdk.Stack.of(owner)
    if owner_stack.node.path == cdk.Stack.of(scope).node.path:
        return value
    return owner_stack.export_value(value)


def iam5_resource(scope: IConstruct, resource: Any) -> str:
    return f"AwsSolutions-IAM5[Resource::{flatten(scope, resource)}]"


def acknowledge_function_baseline(function: Any, *, async_reason: str) -> None:
    """Findings every ProfStackFunction raises, with why each is safe; `async_reason` covers the DLQ.

    `function` is a stacks.components.python_function.ProfStackFunction.
    """
    from stacks.components.nag import acknowledge

    acknowledge(
        function.function,
        "Serverless-LambdaTracing",
        "No X-Ray active tracing (stacks/components/python_function.py): no ProfStack code emits "
        "subsegments, so a trace would repeat the REPORT log line; structured logs with reason codes "
        "and EMF metrics are the diagnostics, and no role needs X-Ray's Resource '*' grant.",
    )
    acknowledge(function.function, "Serverless-LambdaDLQ", async_reason)
