"""The run grouping as it was before the sweep (commit b0ccea8): every pair of entries tested.

Kept verbatim as the reference ``runs.group_runs`` must equal for every input (tests/unit/analysis/
test_group_runs.py, ``python -m bench.group_runs --reference``). O(n^2): tests use it on small inputs only.
"""

from __future__ import annotations

from collections.abc import Sequence

from profstack.analysis.runs import Entry


def group_runs(entries: Sequence[Entry]) -> list[list[int]]:
    """Indices of ``entries`` per run, runs in time order: entries of different ranks overlapping in time join."""
    n = len(entries)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            a, b = entries[i], entries[j]
            if a.rank == b.rank or a.span is None or b.span is None:
                continue
            overlap = a.span[0] <= b.span[1] and b.span[0] <= a.span[1]
            if overlap and a.identity.conflict(b.identity, same_process=False) is None:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)

    def start(members: list[int]) -> tuple[float, str]:
        spans = [entries[i].span for i in members if entries[i].span is not None]
        first = min((s[0] for s in spans if s is not None), default=float("inf"))
        return (first, entries[members[0]].files[0] if entries[members[0]].files else "")

    return sorted(groups.values(), key=start)
