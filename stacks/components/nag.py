"""cdk-nag 3 acknowledgements with a written reason, in one place.

cdk-nag 3 reports through `cdk.Validations`; `Validations.acknowledge` takes the
`Acknowledgment`s positionally (docs/platform-facts.md, toolchain).
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one finding on `construct` and its children. `reason` says why it is safe."""
    if len(reason.strip()) < 20:
        raise ValueError(f"acknowledgement of {rule_id} needs a real reason, got {reason!r}")
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
