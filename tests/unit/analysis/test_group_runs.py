"""``runs.group_runs``: the sweep groups exactly as the all-pairs reference does, without testing all pairs."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.analysis import runs
from profstack.analysis.runs import Entry, Identity, group_runs
from tests.unit.analysis import runs_reference

# ------------------------------------------------------------------------------------------ strategies

# A small grid, so that spans overlap, touch (end == start) and are equal often.
_ends = st.integers(0, 24).map(float)
_odd = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 12.0])
_span = st.one_of(
    st.none(),
    st.tuples(_ends, st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])),  # start <= end
    st.tuples(_ends, _ends),  # any order: start > end too (a damaged partial's negative duration)
    st.tuples(st.one_of(_ends, _odd), st.one_of(_ends, _odd)),  # NaN and infinite ends
)
_identity = st.builds(
    Identity,
    process_clock=st.sampled_from([None, 1, 2]),  # not compared across ranks
    worker=st.sampled_from([None, "h_1", "h_2"]),
    world_size=st.sampled_from([None, None, 2, 2, 4]),  # unknown fields are compatible with anything
    backend=st.sampled_from([None, None, "nccl", "nccl", "gloo"]),
)
_entry = st.builds(
    Entry,
    rank=st.integers(-2, 3),  # the merge numbers rankless entries -1 - i
    label=st.sampled_from(["0", "1.0", "x"]),
    files=st.lists(st.sampled_from(["a.json", "b.json", "c.json"]), max_size=2),
    span=_span,
    identity=_identity,
)


@st.composite
def _entries(draw: st.DrawFn) -> list[Entry]:
    out = draw(st.lists(_entry, max_size=40))
    if out:  # exact duplicates (the same file listed twice, a partial delivered twice)
        out += draw(st.lists(st.sampled_from(out), max_size=6))
        out = draw(st.permutations(out))
    return out


# ------------------------------------------------------------------------------------------ equality


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries())
def test_sweep_groups_exactly_as_the_all_pairs_reference(entries: list[Entry]) -> None:
    # GIVEN any entries (ranks, spans with None / touching / equal / reversed / NaN / infinite ends,
    # identities with unknown and contradicting fields, duplicates) WHEN grouped
    # THEN the runs, their members and their order are the reference's
    assert group_runs(entries) == runs_reference.group_runs(entries)


def _random_entries(rng: random.Random, n: int, shape: str) -> list[Entry]:
    out: list[Entry] = []
    for i in range(n):
        rank = rng.randrange(max(2, n // 6)) if shape != "few ranks" else rng.randrange(3)
        if shape == "runs":  # runs of a few ranks, sometimes overlapping the next
            base = (i // 8) * 100.0 + rng.choice([0.0, 20.0, 95.0])
            span: tuple[float, float] | None = (base, base + rng.choice([5.0, 10.0, 110.0]))
        else:
            lo = float(rng.randrange(400))
            span = (lo, lo + rng.randrange(40)) if rng.random() > 0.05 else None
        ident = Identity(
            world_size=rng.choice([None, 8, 8, 8, 16]) if shape != "one identity" else 8,
            backend=rng.choice([None, "nccl", "nccl", "gloo"]) if shape != "one identity" else "nccl",
        )
        out.append(Entry(rank, str(rank), [f"r{rank}_{i}.json"], span, ident))
    return out


@pytest.mark.parametrize("shape", ["runs", "few ranks", "one identity", "mixed"])
def test_sweep_equals_the_reference_on_a_few_hundred_entries(shape: str) -> None:
    # GIVEN 300 seeded random entries of a shape (larger than hypothesis draws, so buckets hold many blocks)
    rng = random.Random(shape)
    for _ in range(3):
        entries = _random_entries(rng, 300, shape)
        # THEN the sweep and the reference agree
        assert group_runs(entries) == runs_reference.group_runs(entries)


# ------------------------------------------------------------------------------------------ the rule


def _e(rank: int, span: tuple[float, float] | None, world: int | None = 8, backend: str | None = "nccl") -> Entry:
    return Entry(rank, str(rank), [f"rank{rank}.json"], span, Identity(world_size=world, backend=backend))


def test_entries_of_one_rank_join_only_through_another_rank() -> None:
    # GIVEN two overlapping entries of rank 0, and a rank-1 entry that overlaps only the second
    alone = [_e(0, (0.0, 10.0)), _e(0, (5.0, 20.0))]
    # THEN the two rank-0 entries stay apart...
    assert group_runs(alone) == [[0], [1]]
    # ... until a rank-1 entry overlapping both joins them into one run (the union is transitive)
    assert group_runs([*alone, _e(1, (8.0, 9.0))]) == [[0, 1, 2]]
    # AND one overlapping only the second joins that one alone
    assert group_runs([*alone, _e(1, (15.0, 30.0))]) == [[0], [1, 2]]


def test_unknown_identity_fields_bridge_contradicting_ones() -> None:
    # GIVEN world size 8 and 16 (a contradiction) and an entry whose world size is unknown, all overlapping
    entries = [_e(0, (0.0, 10.0), world=8), _e(1, (0.0, 10.0), world=16), _e(2, (0.0, 10.0), world=None)]
    # THEN 8 and 16 are apart without the unknown one, and one run through it
    assert group_runs(entries[:2]) == [[0], [1]]
    assert group_runs(entries) == [[0, 1, 2]]
    assert group_runs(entries) == runs_reference.group_runs(entries)


def test_touching_spans_overlap_and_spanless_entries_stay_alone() -> None:
    entries = [_e(0, (0.0, 10.0)), _e(1, (10.0, 12.0)), _e(2, None), _e(3, (12.5, 13.0))]
    assert group_runs(entries) == [[0, 1], [3], [2]]  # the spanless one sorts last (start = inf)


def test_a_reversed_span_joins_only_a_span_covering_it() -> None:
    # GIVEN a span whose start is after its end (a damaged partial: negative duration)
    # (and two entries of rank 2, which do not join each other)
    entries = [_e(0, (10.0, 5.0)), _e(2, (6.0, 20.0)), _e(2, (4.0, 11.0)), _e(3, (10.0, 2.0))]
    # THEN it joins [4, 11] (4 <= 5 and 10 <= 11) but not [6, 20] (6 > 5), and two reversed ones never join
    assert group_runs(entries) == [[0, 2], [1], [3]]
    assert group_runs(entries) == runs_reference.group_runs(entries)


# ------------------------------------------------------------------------------------------ not all pairs


def _count_links(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    link = runs._Forest.link

    def counted(self: Any, root: int, j: int) -> None:
        calls[0] += 1
        link(self, root, j)

    monkeypatch.setattr(runs._Forest, "link", counted)
    return calls


@pytest.mark.parametrize("backend", ["nccl", None])
def test_fanout_shape_is_one_run_in_linear_work(monkeypatch: pytest.MonkeyPatch, backend: str | None) -> None:
    # GIVEN the fan-out shape at the largest job's size: 10,000 ranks of one job, all overlapping, one
    # identity (known, or with an unknown backend)
    n = 10_000
    entries = [_e(r, (float(r % 7), 1000.0 + r % 11), world=n, backend=backend) for r in range(n)]
    calls = _count_links(monkeypatch)
    # WHEN grouped THEN one run of every entry, after at most two links per entry (the previous entry's
    # block and the run's block), not one per overlapping pair (~n**2 / 2)
    assert group_runs(entries) == [list(range(n))]
    assert calls[0] <= 2 * n


def test_one_rank_waiting_is_joined_block_by_block_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 2,000 overlapping entries of rank 0, then 2,000 entries of other ranks overlapping all of them
    n = 2_000
    entries = [_e(0, (0.0, 100.0)) for _ in range(n)] + [_e(r, (50.0, 60.0)) for r in range(1, n + 1)]
    calls = _count_links(monkeypatch)
    # WHEN grouped THEN one run, and the rank-0 entries were joined once (by the first other rank), not
    # by every rank (which would be n * n links)
    assert group_runs(entries) == [list(range(2 * n))]
    assert calls[0] <= 4 * n


def test_many_identities_and_unknown_ones_stay_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 2,000 overlapping ranks each claiming another world size, and 2,000 overlapping ranks whose
    # world size and backend are unknown (compatible with each of them), and 2,000 of backend unknown
    n = 2_000
    entries = (
        [_e(r, (0.0, 10.0), world=r + 1) for r in range(n)]
        + [_e(n + r, (1.0, 9.0), world=None, backend=None) for r in range(n)]
        + [_e(2 * n + r, (2.0, 3.0), world=r % 50 + 1, backend=None) for r in range(n)]
    )
    calls = _count_links(monkeypatch)
    # WHEN grouped THEN one run (through the unknown ones), in a few links per entry and pool, where
    # visiting every compatible identity would take one per pair
    assert group_runs(entries) == [list(range(3 * n))]
    assert calls[0] <= 4 * 3 * n
