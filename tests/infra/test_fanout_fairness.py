"""Fan-outs are fair by construction (#42 item 11): the synthesized state machine's per-job cap (the Distributed
Map's MaxConcurrency), its retries and the analyze-file function's reserved concurrency, run in a discrete-event
simulation with the admission rule the function applies (lambdas/trace_processor/slots.py, `admit`), one test per
starvation shape.

Neither moto nor any emulator runs map items concurrently against a throttled function, so the simulation is the
test: every number in it (MaxConcurrency, each Retry's interval, backoff, cap, attempts and jitter, the reserved
concurrency) is read from the synthesized template. A map whose item ends starts its next item at once, ahead of any
throttled retry (the race that starved bob); an item holds its slot for its whole run (up to the 900 s timeout).

Before: MaxConcurrency 20 and throttle retries of at most 755 s, no admission: two of alice's large fan-outs held
all 40 slots, and every file of bob's failed after its retries ran out (the first test runs those numbers too)."""

from __future__ import annotations

import heapq
import itertools
import json
import random
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from lambdas.trace_processor.slots import Shares, admit
from tests.infra.conftest import SynthesizedApp

TOO_MANY = "Lambda.TooManyRequestsException"
OWNER_BUSY = "OwnerBusyError"


@dataclass(frozen=True)
class Retrier:
    errors: tuple[str, ...]
    interval: float
    backoff: float
    max_delay: float | None
    attempts: int
    jitter: bool

    def matches(self, error: str) -> bool:
        return error in self.errors or "States.ALL" in self.errors or "States.TaskFailed" in self.errors

    def wait(self, retry: int, rng: random.Random) -> float:
        delay = self.interval * self.backoff**retry
        if self.max_delay is not None:
            delay = min(delay, self.max_delay)
        return rng.uniform(0, delay) if self.jitter else delay


@dataclass(frozen=True)
class FanoutShape:
    slots: int
    max_concurrency: int
    retriers: tuple[Retrier, ...]
    admission: bool


def _definition(template: dict[str, Any]) -> dict[str, Any]:
    (machine,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "X" for p in parts)))


def shape_of(template: dict[str, Any]) -> FanoutShape:
    """The synthesized numbers: the map's MaxConcurrency, the Lambda item's retriers, AnalyzeFile's reserved
    concurrency, and whether the function admits items by owner (it names OwnerBusyError in a retrier)."""
    states = _definition(template)["States"]
    (mapped,) = [s for s in states.values() if s["Type"] == "Map"]
    item = mapped["ItemProcessor"]["States"]["AnalyzeFileInLambda"]
    retriers = tuple(
        Retrier(
            tuple(r["ErrorEquals"]),
            float(r.get("IntervalSeconds", 1)),
            float(r.get("BackoffRate", 2.0)),
            float(r["MaxDelaySeconds"]) if "MaxDelaySeconds" in r else None,
            int(r.get("MaxAttempts", 3)),
            r.get("JitterStrategy") == "FULL",
        )
        for r in item["Retry"]
    )
    (fn,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler") == "lambdas.trace_processor.analyze_file.handler"
    ]
    return FanoutShape(
        slots=int(fn["ReservedConcurrentExecutions"]),
        max_concurrency=int(mapped["MaxConcurrency"]),
        retriers=retriers,
        admission=any(OWNER_BUSY in r.errors for r in retriers),
    )


#: what main had before #42 item 11 (stacks/components/fanout_workflow.py at 7b6ecc3)
BEFORE = FanoutShape(
    slots=40,
    max_concurrency=20,
    retriers=(
        Retrier((TOO_MANY,), 5, 2, 120, 10, jitter=True),
        Retrier(("States.TaskFailed",), 10, 2, None, 2, jitter=False),
    ),
    admission=False,
)


@dataclass
class Execution:
    owner: str
    name: str
    pending: deque[tuple[int, float]]  # (index, seconds the file takes)
    in_flight: int = 0
    done: int = 0
    failed: list[int] = field(default_factory=list)
    first_start: float | None = None
    finished: float | None = None

    @property
    def total(self) -> int:
        return self.done + len(self.failed) + len(self.pending) + self.in_flight


class Simulation:
    """Step Functions Distributed Maps over one throttled Lambda function, second by simulated second."""

    def __init__(self, shape: FanoutShape, seed: int = 7) -> None:
        self.shape = shape
        self.rng = random.Random(seed)
        self.free = shape.slots
        self.shares = Shares()
        self.now = 0.0
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.executions: list[Execution] = []
        self.peak_held: dict[str, int] = {}
        self.holding: list[tuple[float, str, int]] = []  # (when, owner, slots held from then on)

    def _at(self, when: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.events, (when, next(self.seq), kind, payload))

    def start(self, when: float, owner: str, name: str, durations: list[float]) -> Execution:
        run = Execution(owner, name, deque(enumerate(durations)))
        self.executions.append(run)
        self._at(when, "start", run)
        return run

    def _fill(self, run: Execution) -> None:
        """The map keeps MaxConcurrency items in flight; a new item invokes at once."""
        while run.pending and run.in_flight < self.shape.max_concurrency:
            index, seconds = run.pending.popleft()
            run.in_flight += 1
            self._attempt(run, index, seconds, {})

    def _attempt(self, run: Execution, index: int, seconds: float, retries: dict[int, int]) -> None:
        if self.free == 0:
            return self._error(run, index, seconds, retries, TOO_MANY)
        lease = f"{run.name}/{index}"
        if self.shape.admission and not admit(self.shares, run.owner, lease, self.shape.slots):
            return self._error(run, index, seconds, retries, OWNER_BUSY)  # the slot is given back at once
        self.free -= 1
        self.shares.leases[lease] = (run.owner, float("inf"))
        held = self.shares.held(run.owner)
        self.peak_held[run.owner] = max(self.peak_held.get(run.owner, 0), held)
        self.holding.append((self.now, run.owner, held))
        run.first_start = self.now if run.first_start is None else run.first_start
        self._at(self.now + seconds, "end", (run, index, lease))
        return None

    def _error(self, run: Execution, index: int, seconds: float, retries: dict[int, int], error: str) -> None:
        for i, retrier in enumerate(self.shape.retriers):
            if retrier.matches(error):
                used = retries.get(i, 0)
                if used >= retrier.attempts:
                    break
                retries = {**retries, i: used + 1}
                self._at(self.now + retrier.wait(used, self.rng), "retry", (run, index, seconds, retries))
                return
        run.failed.append(index)  # tolerated by the map: the file is missing from the report
        run.in_flight -= 1
        self._after_item(run)

    def _after_item(self, run: Execution) -> None:
        if not run.pending and run.in_flight == 0:
            run.finished = self.now
            self.shares.fanouts.pop(run.name, None)  # the aggregate step
        else:
            self._fill(run)

    def run_until(self, done: Execution, limit_s: float = 12 * 3600) -> None:
        while self.events and done.finished is None:
            self.now, _, kind, payload = heapq.heappop(self.events)
            if self.now > limit_s:
                break
            if kind == "start":
                self.shares.fanouts[payload.name] = (payload.owner, float("inf"))  # the processor registers it
                self._fill(payload)
            elif kind == "end":
                run, index, lease = payload
                self.free += 1
                self.shares.leases.pop(lease, None)
                run.done += 1
                run.in_flight -= 1
                self._after_item(run)  # the map starts its next item now, ahead of anyone's retry
            else:
                run, index, seconds, retries = payload
                self._attempt(run, index, seconds, retries)


HUGE = [900.0] * 400  # a slot held for the function's whole timeout, 400 files
SMALL = [60.0] * 8


@pytest.fixture(scope="module")
def shape(synthesized: SynthesizedApp, example_config: Any) -> FanoutShape:
    return shape_of(synthesized.templates[f"{example_config.prefix}-processing"])


def test_two_huge_fanouts_of_alices_and_a_small_one_of_bobs_bob_gets_every_file(shape: FanoutShape) -> None:
    # GIVEN two of alice's huge fan-outs, and bob's small one starting 30 s later
    for numbers, expect_all in ((BEFORE, False), (shape, True)):
        sim = Simulation(numbers)
        sim.start(0, "alice", "alice-1", HUGE)
        sim.start(0, "alice", "alice-2", HUGE)
        bob = sim.start(30, "bob", "bob-1", SMALL)
        sim.run_until(bob)
        # THEN with the deployed numbers all of bob's files are analysed, within minutes (before: none was)
        assert bob.finished is not None
        assert (bob.failed == []) is expect_all, (numbers, bob.failed)
        if expect_all:
            assert bob.done == len(SMALL)
            assert bob.finished < 30 + 3 * 60
        else:
            assert len(bob.failed) == len(SMALL)


@pytest.mark.parametrize("alice_fanouts", [4, 6])
def test_alice_holding_every_slot_gives_bob_his_share_within_one_item_time(
    shape: FanoutShape, alice_fanouts: int
) -> None:
    # GIVEN alice's huge fan-outs holding every slot (4 x 10 = 40, or more waiting), then bob's small one
    sim = Simulation(shape)
    for i in range(alice_fanouts):
        sim.start(0, "alice", f"alice-{i}", HUGE)
    bob = sim.start(60, "bob", "bob-1", SMALL)
    sim.run_until(bob)
    # THEN every file of bob's is analysed; his first starts within one item time (900 s, the longest any slot is
    # held) and a retry wait (120 s) of his arrival, and he finishes within two
    assert bob.failed == []
    assert bob.first_start is not None
    assert bob.first_start <= 60 + 900 + 120
    assert bob.finished is not None
    assert bob.finished <= 60 + 2 * (900 + 120)
    # AND alice never held more than the slots (the function's reserved concurrency)
    assert sim.peak_held["alice"] <= shape.slots
    # AND it is the admission by owner that does it: the same cap and retries without it fail every file of bob's
    control = Simulation(replace(shape, admission=False))
    for i in range(alice_fanouts):
        control.start(0, "alice", f"alice-{i}", HUGE)
    unfair = control.start(60, "bob", "bob-1", SMALL)
    control.run_until(unfair)
    assert len(unfair.failed) == len(SMALL)


def test_three_owners_each_get_an_equal_share(shape: FanoutShape) -> None:
    # GIVEN alice's and carol's two huge fan-outs each, and bob's small one
    sim = Simulation(shape)
    for owner in ("alice", "carol"):
        for i in range(2):
            sim.start(0, owner, f"{owner}-{i}", HUGE)
    bob = sim.start(120, "bob", "bob-1", [900.0] * 30)  # bob's is not small: 30 files of 900 s
    sim.run_until(bob)
    # THEN bob's files all succeed
    assert bob.failed == []
    # AND from one item time after he arrived (every item started before him has ended) no owner takes more than
    # an equal third of the slots
    settled = [(owner, held) for when, owner, held in sim.holding if when >= 120 + 900]
    assert {owner for owner, _ in settled} == {"alice", "bob", "carol"}
    assert max(held for _, held in settled) <= shape.slots // 3
    assert sim.peak_held["alice"] == sim.peak_held["carol"] == shape.slots // 2


def test_throttle_retries_outlast_a_slot_held_for_the_whole_function_timeout(shape: FanoutShape) -> None:
    """The brief: a slot can be busy 900 s, so the retries of a throttled item must cover more, with backoff and
    jitter. Before: 10 attempts, at most 755 s without jitter (about 378 s on average with it)."""
    (throttle,) = [r for r in shape.retriers if TOO_MANY in r.errors]
    waits = [min(throttle.interval * throttle.backoff**n, throttle.max_delay or 1e9) for n in range(throttle.attempts)]
    assert throttle.jitter
    assert throttle.backoff > 1
    assert sum(waits) > 3 * 900  # the longest it may wait
    rng = random.Random(11)
    totals = [sum(rng.uniform(0, w) for w in waits) for _ in range(20_000)]
    assert sum(totals) / len(totals) > 2 * 900  # on average, with full jitter
    assert min(totals) > 900  # and in 20,000 draws never less than one slot's longest hold
    before = [min(5 * 2**n, 120) for n in range(10)]
    assert sum(before) == 755
