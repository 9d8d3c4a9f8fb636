"""The memory section (``analyzers.memory``) computes its per-device series from columns (a bin is a run of the
device's time-sorted events); it must equal the plain event-by-event definition on any events."""

from __future__ import annotations

import bisect
import math
from array import array
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis.analyzers.memory import OUT_BINS, _carry, memory
from profstack.analysis.memory import MemoryEvents


def reference_device(m: MemoryEvents, evs_in: list[int], *, steps: list[Any], t0: float, width: float, n: int) -> Any:
    """One device, event by event, as the section was first written."""
    evs = sorted(evs_in, key=lambda i: m.ts[i])
    alloc = [m.alloc[i] for i in evs]
    res = [m.reserved[i] for i in evs if m.reserved[i] >= 0]
    series_a, series_r = [-1] * n, [-1] * n
    ops: dict[int, list[int]] = {}
    for i in evs:
        b = min(int((m.ts[i] - t0) / width), n - 1)
        series_a[b] = max(series_a[b], m.alloc[i])
        if m.reserved[i] >= 0:
            series_r[b] = max(series_r[b], m.reserved[i])
        if m.nbytes[i] > 0:
            rec = ops.setdefault(m.op[i], [0, 0])
            rec[0] += 1
            rec[1] += m.nbytes[i]
    _carry(series_a)
    _carry(series_r)
    times = [m.ts[i] for i in evs]
    peaks = []
    for num, start, dur in steps:
        a, b = bisect.bisect_left(times, start), bisect.bisect_right(times, start + dur)
        if a < b:
            peaks.append((num, max(alloc[a:b])))
    return {
        "events": len(evs),
        "allocations": sum(1 for i in evs if m.nbytes[i] > 0),
        "frees": sum(1 for i in evs if m.nbytes[i] < 0),
        "allocated_bytes": sum(m.nbytes[i] for i in evs if m.nbytes[i] > 0),
        "peak_allocated_bytes": max(alloc),
        "peak_reserved_bytes": max(res) if res else None,
        "start_allocated_bytes": alloc[0],
        "end_allocated_bytes": alloc[-1],
        "max_allocated_bytes": series_a,
        "max_reserved_bytes": series_r if res else [],
        "step_peaks": peaks,
        "ops": ops,
    }


TIMES = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 1.0000000000000002, 99.99999999999999, 100.0, 1e6, 1712195495501688.5]),
    st.floats(0, 1000, allow_nan=False),
)
EVENT = st.tuples(
    TIMES,
    st.sampled_from([1, 2]),  # device type: cuda, hip
    st.sampled_from([0, 1]),
    st.integers(-(2**40), 2**40),  # bytes: allocations, frees, zero
    st.integers(-5, 2**40),  # total allocated
    st.sampled_from([-1, -7, 0, 4096, 2**41]),  # total reserved (< 0: unknown)
    st.integers(-1, 5),  # the allocating op's id (-1: none)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(EVENT, min_size=1, max_size=200),
    st.lists(st.tuples(st.integers(0, 9), TIMES, st.floats(0, 500)), max_size=6),
    st.sampled_from([1 << 16, 1, 2, 3, 7, 64]),
)
def test_the_section_equals_the_event_by_event_definition(events: list[Any], steps: list[Any], chunk: int) -> None:
    # GIVEN memory events with equal and nearly equal times, unknown reserved totals, frees and zero-byte events,
    # and the section's chunk as it is or small enough that bins, steps and time runs cross chunks
    from profstack.analysis import memory as mem_mod

    m = MemoryEvents()
    for ts, dtype, did, nbytes, alloc, reserved, _ in events:
        m.add(ts, 1, dtype=dtype, did=did, nbytes=nbytes, alloc=alloc, reserved=reserved)
    for k, (*_, op) in enumerate(events):
        m.op[k] = op
    steps = sorted(steps, key=lambda s: s[1])
    view = SimpleNamespace(
        d=SimpleNamespace(memory=m, memory_attributed=True),
        names=[f"op{k}" for k in range(6)],
        cpu_lo=-math.inf,
        cpu_hi=math.inf,
        steps_in=steps,
    )
    # WHEN the section is computed
    saved, mem_mod.CHUNK = mem_mod.CHUNK, chunk
    try:
        section = memory(view)  # type: ignore[arg-type]
    finally:
        mem_mod.CHUNK = saved
    # THEN each device is what the event-by-event definition gives
    t0, t1 = min(m.ts), max(m.ts)
    n = max(1, min(OUT_BINS, math.ceil(t1 - t0) or 1))
    width = (t1 - t0) / n if t1 > t0 else 1.0
    by_dev: dict[int, list[int]] = {}
    for i in range(len(m)):
        by_dev.setdefault(m.dev[i], []).append(i)
    assert len(section["devices"]) == len(by_dev)
    ops: dict[tuple[int, int], list[int]] = {}
    for key, dev in zip(sorted(by_dev), section["devices"], strict=True):
        want = reference_device(m, by_dev[key], steps=steps, t0=t0, width=width, n=n)
        got = {k: dev[k] for k in want if k in dev}  # type: ignore[literal-required]
        got["max_allocated_bytes"] = dev["timeline"]["max_allocated_bytes"]
        got["max_reserved_bytes"] = dev["timeline"]["max_reserved_bytes"]
        got["step_peaks"] = [(p["step"], p["peak_allocated_bytes"]) for p in dev["step_peaks"]]
        got["ops"] = want["ops"]
        assert got == want
        for op, rec in want["ops"].items():
            ops[(op, key)] = rec
    # AND the top operators are the largest of the same per-(op, device) totals
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:15]
    assert [(o["allocations"], o["bytes"]) for o in section["top_operators"]] == [tuple(r) for _, r in top]


def test_the_attribution_and_the_section_stay_within_bytes_per_event() -> None:
    # GIVEN 100,000 memory events (a 1 GB profile_memory trace has ~500,000) on two devices and three threads,
    # slightly out of time order
    import random
    import tracemalloc

    from profstack.analysis import memory as mem_mod

    n, rnd = 100_000, random.Random(1)
    m = MemoryEvents()
    for i in range(n):
        m.add(
            1000.0 + i * 0.5 + rnd.random(),
            i % 3,
            dtype=1 if i % 2 else 0,
            did=0 if i % 2 else -1,
            nbytes=rnd.choice([512, -512]),
            alloc=rnd.randrange(1 << 30),
            reserved=1 << 31,
        )
    view = SimpleNamespace(
        d=SimpleNamespace(memory=m, memory_attributed=True),
        names=["op"],
        cpu_lo=-math.inf,
        cpu_hi=math.inf,
        steps_in=[(k, 1000.0 + k * 5000, 5000.0) for k in range(20)],
    )
    peaks = {}
    want = memory(view)  # type: ignore[arg-type]
    saved, mem_mod.CHUNK = mem_mod.CHUNK, 4096  # the chunk's own few MB apart, as on a trace of 1M events
    try:
        for name, run in (("spans", lambda: mem_mod._spans(m)), ("section", lambda: memory(view))):  # type: ignore[arg-type]
            # WHEN the attribution's per-thread spans and the memory section are computed
            tracemalloc.start()
            got = run()
            peaks[name] = tracemalloc.get_traced_memory()[1] / n
            tracemalloc.stop()
    finally:
        mem_mod.CHUNK = saved
    # THEN their transient memory is columns, not Python objects per event (sort keys as tuples took 133 bytes an
    # event, the section's lists 128-170, its whole-device columns 51): 15 and 9 bytes measured
    assert peaks["spans"] < 30, peaks
    assert peaks["section"] < 20, peaks
    # AND the section in small chunks is the section in one
    assert got == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 1.5, 2.0, 1e6, -3.0]), max_size=60), st.sampled_from([1, 2, 5, 1 << 16]))
def test_the_time_order_is_a_stable_sort_in_any_chunks(times: list[float], chunk: int) -> None:
    # GIVEN times with ties, in and out of order, and indices of some of them
    from profstack.analysis import memory as mem_mod

    ts = array("d", times)
    idx = array("i", range(0, len(times), 2)) if len(times) % 3 else array("i", range(len(times)))
    saved, mem_mod.CHUNK = mem_mod.CHUNK, chunk
    try:
        # WHEN ordered by time a chunk at a time
        got = mem_mod.in_time_order(ts, idx)
    finally:
        mem_mod.CHUNK = saved
    # THEN the order of a stable sort by time (equal times in index order), and the indices themselves when sorted
    assert list(got) == sorted(idx, key=ts.__getitem__)
    if list(idx) == sorted(idx, key=ts.__getitem__):
        assert got is idx


def test_gather_in_c_equals_the_python_map() -> None:
    import pytest

    from profstack.analysis import memory as section
    from profstack.analysis import native

    from .test_consume_native import C_MODULE

    if C_MODULE is None or not hasattr(C_MODULE, "gather"):
        pytest.skip("the C module is not built")
    columns = [
        array("d", [0.5, -0.0, 1e300, math.inf, 3.25]),
        array("q", [2**63 - 1, -(2**63), 0, 7, -1]),
        array("i", [-1, 2**31 - 1, 0, 5, 9]),
    ]
    for column in columns:
        for idx in (array("i", [4, 0, 0, 3, 1, 2]), array("i"), array("i", [2])):
            # GIVEN a column and indices WHEN gathered in C and by the Python map THEN the same array, bit for bit
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(native, "ACCEL", None)
                want = section.gather(column, idx)
            got = section.gather(column, idx)
            assert got.typecode == want.typecode == column.typecode
            assert got.tobytes() == want.tobytes()
        # AND an index out of range is declined in C, and the Python map raises as indexing does
        assert C_MODULE.gather(column, array("i", [5])) is NotImplemented
        assert C_MODULE.gather(column, array("i", [-1])) is NotImplemented
        with pytest.raises(IndexError):
            section.gather(column, array("i", [0, 5]))
    # AND indices of another type are declined
    assert C_MODULE.gather(columns[0], array("q", [0])) is NotImplemented
