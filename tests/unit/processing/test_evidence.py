"""Which of a job's trace objects are its evidence, and what a cap keeps (lambdas/trace_processor/evidence.py,
#42 items 7 and 8), on generated folders: every listed file is either analysed or named as left out, files written
during the run always come before others, and nothing from before the job is ever analysed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from lambdas.trace_processor.aws import S3Object
from lambdas.trace_processor.evidence import (
    BEFORE_JOB,
    BEFORE_TRAINING,
    EMPTY,
    IN_FUTURE,
    Listing,
    RunWindow,
    select,
)

CREATED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
STARTED = CREATED + timedelta(minutes=10)
ENDED = CREATED + timedelta(hours=5)
WINDOW = RunWindow(CREATED, STARTED, ENDED)

# minutes relative to the job's creation: before it, during the run, long after it
files = st.lists(
    st.tuples(st.integers(-600, 900), st.integers(0, 3), st.text("abz09", min_size=1, max_size=6)),
    max_size=40,
    unique_by=lambda f: f[2],
)


def _objects(spec: list[tuple[int, int, str]]) -> list[S3Object]:
    return sorted(
        (
            S3Object("b", f"t/{name}.pt.trace.json", size, modified=CREATED + timedelta(minutes=m))
            for m, size, name in spec
        ),
        key=lambda o: o.key,
    )


@settings(max_examples=200)
@given(files, st.integers(1, 10))
def test_a_cap_keeps_run_files_first_and_accounts_for_every_file(spec: list[tuple[int, int, str]], limit: int) -> None:
    objects = _objects(spec)
    chosen = select(Listing(objects, len(objects), False), WINDOW, limit)
    picked = {o.key for o in chosen.chosen}
    left = {o.key for o, _ in chosen.left_out}
    # every file is analysed or named as left out, never both, never silently dropped
    assert picked | left == {o.key for o in objects}
    assert not picked & left
    assert len(chosen.chosen) <= limit
    assert [o.key for o in chosen.chosen] == sorted(picked)  # the engine's order
    # nothing from before the job existed is ever analysed
    assert not [o for o in chosen.chosen if WINDOW.excluded(o)]
    # a file written during the run is never left out while a late or empty one is analysed
    in_run = [o for o in objects if not WINDOW.excluded(o) and WINDOW.priority(o)[0] == 0]
    if any(o.key in left for o in in_run):
        assert all(WINDOW.priority(o)[0] == 0 for o in chosen.chosen)
    # and the warnings say so whenever something was left out
    kinds = {w["type"] for w in chosen.warnings}
    assert ("TraceFilesNotFromThisJob" in kinds) == any(WINDOW.excluded(o) for o in objects)
    assert ("TooManyTraceFiles" in kinds) == (len([o for o in objects if not WINDOW.excluded(o)]) > limit)


def test_an_action_rests_only_on_files_the_run_wrote() -> None:
    now = STARTED + timedelta(hours=1)

    def problem(minutes_after_creation: float, size: int = 10) -> str | None:
        obj = S3Object("b", "k.pt.trace.json", size, modified=CREATED + timedelta(minutes=minutes_after_creation))
        return RunWindow(CREATED, STARTED, None).action_problem(obj, now)

    assert problem(-60) == BEFORE_JOB
    assert problem(-6) == BEFORE_JOB  # beyond the 5 min clock skew
    assert problem(2) == BEFORE_TRAINING  # created, not training yet (training from minute 10, skew 5)
    assert problem(6) is None  # within the skew of the training's start
    assert problem(30) is None
    assert problem(30, size=0) == EMPTY
    assert problem(60 * 2) == IN_FUTURE
