"""Fair shares of the analyze-file function's slots between owners (#42 item 11: fair by construction).

The analyze-file function has `fanout_reserved_concurrency` slots (40). Each fan-out's Distributed Map runs at most
`fanout_max_concurrency_per_job` items at once (10), so four fan-outs run at full width; beyond that the map items
compete for slots, and a map whose item just finished starts its next one at once, ahead of any other owner's
throttled retry. So one owner with several huge fan-outs could hold every slot for as long as their files last.

This module makes every owner with a running fan-out entitled to an equal share: an item may start only while its
owner holds fewer than `max(1, slots // active owners)` slots, where an owner is active from the moment the processor
starts their fan-out (`register`, before any item of it runs) until its aggregate step ends (`unregister`). An item
over its owner's share raises OwnerBusyError at once, giving its slot back; the state machine retries it with
backoff for hours (stacks/components/fanout_workflow.py). So when bob's fan-out starts beside alice's two huge ones,
alice's share drops to half at once, her items over it stop starting as her running ones end (each within the
function's 900 s), and bob's items take the slots they free.

State: one item of the idempotency table (SLOTS_ID), read and written with optimistic concurrency (a version number):
`fanouts` (execution -> owner, expiry: the state machine's 8 h timeout) and `leases` (map item -> owner, expiry: the
function's timeout and a margin, so a function killed mid-item frees its slot by itself). The roles may touch only
this item of the table (dynamodb:LeadingKeys).

`admit` is the pure rule (tests/infra/test_fanout_fairness.py runs it in a simulation of the synthesized map).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.trace_processor.errors import ProcessingError
from profstack.layout import FANOUT_SLOTS_ID

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: the idempotency table's item that holds the shares (never a job's record: those are "<function>#<hash>")
SLOTS_ID = FANOUT_SLOTS_ID
#: a lease outlives the analyze-file function's timeout by this much, then frees itself
LEASE_MARGIN_S = 60
#: a registered fan-out outlives the state machine's timeout by this much
FANOUT_MARGIN_S = 600
STATE_MACHINE_TIMEOUT_S = 8 * 3600
#: conditional-write attempts on the shared item before the step fails (and Step Functions retries it)
MAX_WRITE_ATTEMPTS = 12


class OwnerBusyError(ProcessingError):
    """The item's owner already holds their fair share of the analyze-file slots: the state machine retries the item
    later (its Retry on this error's name). Never stored as a result."""


@dataclass
class Shares:
    """The shared item, as read: registered fan-outs and running items, each with its owner and expiry (epoch s)."""

    fanouts: dict[str, tuple[str, float]] = field(default_factory=dict)
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    version: int = 0

    def live(self, now: float) -> Shares:
        """Without what has expired (a fan-out or function that ended without saying so)."""
        return Shares(
            {k: v for k, v in self.fanouts.items() if v[1] > now},
            {k: v for k, v in self.leases.items() if v[1] > now},
            self.version,
        )

    def owners(self) -> set[str]:
        return {owner for owner, _ in self.fanouts.values()} | {owner for owner, _ in self.leases.values()}

    def held(self, owner: str) -> int:
        return sum(1 for o, _ in self.leases.values() if o == owner)

    def to_json(self) -> str:
        return json.dumps(
            {
                "fanouts": {k: list(v) for k, v in sorted(self.fanouts.items())},
                "leases": {k: list(v) for k, v in sorted(self.leases.items())},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | None, version: int) -> Shares:
        try:
            data = json.loads(text or "{}")
        except ValueError:
            data = {}

        def entries(raw: Any) -> dict[str, tuple[str, float]]:
            if not isinstance(raw, Mapping):
                return {}
            out: dict[str, tuple[str, float]] = {}
            for key, value in raw.items():
                if isinstance(value, list) and len(value) == 2 and isinstance(value[1], int | float):
                    out[str(key)] = (str(value[0]), float(value[1]))
            return out

        doc = data if isinstance(data, Mapping) else {}
        return cls(entries(doc.get("fanouts")), entries(doc.get("leases")), version)


def share(shares: Shares, owner: str, slots: int) -> int:
    """How many slots `owner` may hold now: an equal share among the owners with a running fan-out (this one too)."""
    active = shares.owners() | {owner}
    return max(1, slots // len(active))


def admit(shares: Shares, owner: str, lease: str, slots: int) -> bool:
    """Whether the item `lease` of `owner` may start (its own earlier lease, a retry of it, counts as admitted)."""
    if lease in shares.leases:
        return True
    return shares.held(owner) < share(shares, owner, slots)


class SlotStore:
    """The shared item in the idempotency table, changed by conditional writes (version)."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table: str,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._db, self._table, self._clock, self._sleep = dynamodb, table, clock, sleep

    def _read(self) -> Shares:
        item = self._db.get_item(TableName=self._table, Key={"id": {"S": SLOTS_ID}}, ConsistentRead=True).get("Item")
        if not item:
            return Shares()
        return Shares.from_json(item.get("shares", {}).get("S"), int(item.get("version", {}).get("N", "0")))

    def _write(self, shares: Shares) -> bool:
        condition: dict[str, Any] = (
            {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(shares.version)}}}
            if shares.version
            else {"ConditionExpression": "attribute_not_exists(id)"}
        )
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "id": {"S": SLOTS_ID},
                    "version": {"N": str(shares.version + 1)},
                    "shares": {"S": shares.to_json()},
                },
                **condition,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def change(self, edit: Callable[[Shares, float], bool]) -> bool:
        """Read, `edit` (False: nothing to write, and the result), write if unchanged meanwhile; retried on a race."""
        for attempt in range(MAX_WRITE_ATTEMPTS):
            now = self._clock()
            shares = self._read()
            fresh = shares.live(now)
            if not edit(fresh, now):
                return False
            if self._write(fresh):
                return True
            self._sleep(min(1.0, 0.02 * 2**attempt) * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not crypto
        raise ProcessingError(f"{SLOTS_ID}: changed under {MAX_WRITE_ATTEMPTS} attempts")

    def register(self, execution: str, owner: str) -> None:
        def edit(shares: Shares, now: float) -> bool:
            shares.fanouts[execution] = (owner, now + STATE_MACHINE_TIMEOUT_S + FANOUT_MARGIN_S)
            return True

        self.change(edit)

    def unregister(self, execution: str) -> None:
        self.change(lambda shares, _: shares.fanouts.pop(execution, None) is not None)

    def acquire(self, lease: str, owner: str, slots: int, lease_s: float) -> None:
        """Take a slot for the item, or raise OwnerBusyError (the state machine retries the item later)."""
        refused: list[int] = []

        def edit(shares: Shares, now: float) -> bool:
            if not admit(shares, owner, lease, slots):
                refused.append(share(shares, owner, slots))
                return False
            shares.leases[lease] = (owner, now + lease_s)
            return True

        if not self.change(edit) and refused:
            raise OwnerBusyError(
                f"{owner} already holds their share ({refused[-1]} of {slots}) of the analyze-file slots; "
                "the item is retried"
            )

    def release(self, lease: str) -> None:
        self.change(lambda shares, _: shares.leases.pop(lease, None) is not None)
