"""The owners' fair shares of the analyze-file slots (lambdas/trace_processor/slots.py, #42 item 11) on moto's
DynamoDB: a share per owner with a running fan-out, leases that free themselves when a function dies, and no lost
update when two functions change the shared item at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from lambdas.trace_processor.slots import OwnerBusyError, Shares, SlotStore, admit, share

TABLE = "profstack-idempotency"


@pytest.fixture
def dynamodb(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def test_each_owner_with_a_running_fanout_gets_an_equal_share(dynamodb: Any) -> None:
    now = [1000.0]
    store = SlotStore(dynamodb, TABLE, clock=lambda: now[0], sleep=lambda _: None)
    # GIVEN alice's fan-out alone: she may take every one of the 4 slots
    store.register("alice/big-Completed", "alice")
    for i in range(4):
        store.acquire(f"alice/big/{i}", "alice", 4, 960)
    with pytest.raises(OwnerBusyError, match="share \\(4 of 4\\)"):
        store.acquire("alice/big/4", "alice", 4, 960)
    # WHEN bob's fan-out starts THEN alice's share is 2: her items over it wait, bob's may start as slots free
    store.register("bob/small-Completed", "bob")
    store.release("alice/big/0")
    with pytest.raises(OwnerBusyError, match="share \\(2 of 4\\)"):
        store.acquire("alice/big/5", "alice", 4, 960)
    store.acquire("bob/small/0", "bob", 4, 960)
    # AND a retry of an item that holds a lease is admitted (its function was retried by Step Functions)
    store.acquire("alice/big/1", "alice", 4, 960)
    # WHEN bob's fan-out ends (its aggregate step) THEN alice's share is all the slots again
    store.release("bob/small/0")
    store.unregister("bob/small-Completed")
    store.acquire("alice/big/6", "alice", 4, 960)


def test_a_lease_of_a_function_that_died_frees_itself_and_so_does_a_fanout_that_never_ended(dynamodb: Any) -> None:
    now = [0.0]
    store = SlotStore(dynamodb, TABLE, clock=lambda: now[0], sleep=lambda _: None)
    store.register("bob/x-Completed", "bob")
    store.acquire("alice/a/0", "alice", 2, 960)  # share 1 of 2 while bob's fan-out is registered
    with pytest.raises(OwnerBusyError):
        store.acquire("alice/a/1", "alice", 2, 960)
    # WHEN the function holding the lease is killed (no release) and its lease outlives the timeout
    now[0] = 961.0
    # THEN the slot is free again for alice
    store.acquire("alice/a/1", "alice", 2, 960)
    # AND a fan-out registered 8 h + 10 min ago and never unregistered no longer counts
    now[0] = 8 * 3600 + 600 + 1.0
    store.acquire("alice/a/2", "alice", 2, 960)
    store.acquire("alice/a/3", "alice", 2, 960)


def test_two_functions_changing_the_item_at_once_lose_no_lease(dynamodb: Any) -> None:
    store = SlotStore(dynamodb, TABLE, sleep=lambda _: None)
    store.register("alice/j-Completed", "alice")
    real_put = dynamodb.put_item
    calls = [0]

    def racing_put(**kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:  # another function commits between this one's read and its write
            SlotStore(dynamodb, TABLE, sleep=lambda _: None).acquire("alice/j/other", "alice", 8, 960)
        return real_put(**kwargs)

    dynamodb.put_item = racing_put
    store.acquire("alice/j/mine", "alice", 8, 960)
    dynamodb.put_item = real_put
    item = dynamodb.get_item(TableName=TABLE, Key={"id": {"S": "fanout-slots"}})["Item"]
    shares = Shares.from_json(item["shares"]["S"], int(item["version"]["N"]))
    assert set(shares.leases) == {"alice/j/mine", "alice/j/other"}


@settings(max_examples=300)
@given(
    held=st.dictionaries(st.sampled_from(["alice", "bob", "carol", "dan"]), st.integers(0, 40), max_size=4),
    waiting=st.sets(st.sampled_from(["alice", "bob", "carol", "dan"])),
    slots=st.integers(1, 64),
)
def test_no_owner_is_admitted_beyond_an_equal_share(held: dict[str, int], waiting: set[str], slots: int) -> None:
    shares = Shares(
        fanouts={f"{o}/f": (o, 1e12) for o in waiting},
        leases={f"{o}/{i}": (o, 1e12) for o, n in held.items() for i in range(n)},
    )
    for owner in ("alice", "bob", "carol", "dan"):
        allowed = admit(shares, owner, f"{owner}/new", slots)
        active = shares.owners() | {owner}
        # admitted exactly while below the equal share, and the share is never zero (everyone makes progress)
        assert allowed == (shares.held(owner) < max(1, slots // len(active)))
        assert share(shares, owner, slots) >= 1
