"""Time of the run grouping (``runs.group_runs``) and of the fan-out merge's grouping path.

    python -m bench.group_runs                    # the sweep alone: 2,000 and 10,000 entries
    python -m bench.group_runs --reference        # and the all-pairs reference (before; ~5 min)
    python -m bench.group_runs --merge-only --reference   # merge_partials over 2,000 / 10,000 partials (~4 min)

Shapes: **fan-out** (one entry per rank, every span overlapping every other, one identity: world size n,
nccl; the largest fan-out job), **fan-out, no distributedInfo** (the same with world size and backend
unknown), **small runs** (runs of 8 ranks one after another, world size 8, nccl), and two hostile ones:
**many identities, half unknown** (half the ranks claim distinct world sizes, half none, all overlapping)
and **fan-out, half the spans reversed** (start after end: tested pair by pair, see ``runs.group_runs``).
``--merge`` / ``--merge-only`` build one real partial (the engine's summary of
samples/traces/hta/trace_filter/sampled_rank-0.json.gz), copy it n times with distinct ranks (fan-out:
every copy at the same time; small runs: groups of 8 copies shifted in time) and time
``merge.merge_partials`` with the rules' ``cross_rank``; with ``--reference`` also with ``group_runs``
swapped for the reference, and checks that both merged summaries are equal. Best of ``--repeat`` runs
(the reference: one run). Wall time on whatever core the OS gives: compare within a run.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

from bench.timing import best_wall
from profstack.analysis import runs
from profstack.analysis.runs import Entry, Identity

Grouping = Callable[[Sequence[Entry]], list[list[int]]]


def fanout(n: int, *, known: bool = True) -> list[Entry]:
    ident = Identity(world_size=n, backend="nccl") if known else Identity()
    return [Entry(r, str(r), [f"rank{r}.json"], (1000.0 + r % 13, 9.0e6 + r % 17), ident) for r in range(n)]


def small_runs(n: int) -> list[Entry]:
    ident = Identity(world_size=8, backend="nccl")
    out = []
    for i in range(n):
        run, rank = divmod(i, 8)
        start = run * 1.0e7 + rank % 3
        out.append(Entry(rank, f"{rank}.{run}", [f"rank{rank}.{run}.json"], (start, start + 5.0e6), ident))
    return out


def many_identities(n: int) -> list[Entry]:
    """Half the ranks each claim another world size, half claim none (compatible with every one)."""
    half = n // 2
    out = [
        Entry(r, str(r), [f"rank{r}.json"], (0.0, 10.0), Identity(world_size=r + 1, backend="nccl"))
        for r in range(half)
    ]
    return out + [Entry(r, str(r), [f"rank{r}.json"], (1.0, 9.0), Identity()) for r in range(half, n)]


def reversed_spans(n: int) -> list[Entry]:
    """Fan-out where half the spans start after they end (a damaged partial's negative duration)."""
    out = fanout(n)
    for e in out[1::2]:
        assert e.span is not None
        e.span = (e.span[1], e.span[0])
    return out


SHAPES: dict[str, Callable[[int], list[Entry]]] = {
    "fan-out": fanout,
    "fan-out, no distributedInfo": lambda n: fanout(n, known=False),
    "small runs (8 ranks each)": small_runs,
    "many identities, half unknown": many_identities,
    "fan-out, half the spans reversed": reversed_spans,
}


def _reference() -> Grouping:
    from tests.unit.analysis.runs_reference import group_runs

    return group_runs


def bench_grouping(sizes: list[int], repeat: int, reference: bool) -> None:
    print("| shape | entries | runs | sweep s | all-pairs reference s | same runs |")
    print("|---|---|---|---|---|---|")
    for name, make in SHAPES.items():
        for n in sizes:
            entries = make(n)
            seconds, got = best_wall(functools.partial(runs.group_runs, entries), repeat)
            ref_s, same = "", ""
            if reference:
                before, want = best_wall(functools.partial(_reference(), entries), 1)
                ref_s, same = f"{before:.2f}", "yes" if got == want else "NO"
            print(f"| {name} | {n:,} | {len(got):,} | {seconds:.4f} | {ref_s} | {same} |", flush=True)


def _partials(n: int, shape: str) -> list[dict[str, Any]]:
    from profstack.analysis import analyze, discover_sources
    from tests.conftest import TRACES_DIR

    sample = TRACES_DIR / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    template = json.loads(json.dumps(dict(analyze(discover_sources([sample])).summary)))
    out = []
    for i in range(n):
        part = copy.deepcopy(template)
        for rank in part["ranks"]:
            rank["rank"] = i
        for item in part["inputs"]:
            item["rank"], item["name"] = i, f"rank{i}.json.gz"
        for rank in part["ranks"]:
            rank["sources"] = [f"rank{i}.json.gz"]
        if shape == "small runs (8 ranks each)":
            for run in part["runs"]:
                run["start_us"] += (i // 8) * 1.0e9
        out.append(part)
    return out


class _Timed:
    """``runs.group_runs`` (or another grouping), remembering its fastest call."""

    def __init__(self, grouping: Grouping) -> None:
        self.grouping, self.seconds = grouping, float("inf")

    def __call__(self, entries: Sequence[Entry]) -> list[list[int]]:
        started = time.perf_counter()
        try:
            return self.grouping(entries)
        finally:
            self.seconds = min(self.seconds, time.perf_counter() - started)


def bench_merge(sizes: list[int], repeat: int, reference: bool) -> None:
    from profstack.analysis import AnalysisOptions, merge, rules

    limits = AnalysisOptions().limits

    def cross(table: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
        return rules.cross_rank(table, limits)

    print("\n| merge_partials | partials | runs | merge s | of it group_runs s | merge s, reference grouping | same |")
    print("|---|---|---|---|---|---|---|")
    for shape in ("fan-out", "small runs (8 ranks each)"):
        for n in sizes:
            partials = _partials(n, shape)

            def merged(p: list[dict[str, Any]] = partials) -> Any:
                return merge.merge_partials(p, [], cross_rank=cross)

            timed = _Timed(runs.group_runs)
            with mock.patch.object(runs, "group_runs", timed):
                seconds, got = best_wall(merged, repeat)
            ref_s, same = "", ""
            if reference:
                with mock.patch.object(runs, "group_runs", _reference()):
                    before, want = best_wall(merged, 1)
                ref_s, same = f"{before:.2f}", "yes" if got == want else "NO"
            print(
                f"| {shape} | {n:,} | {len(got['runs']):,} | {seconds:.3f} | {timed.seconds:.3f} | {ref_s} | {same} |",
                flush=True,
            )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_runs", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000", help="entries / partials, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the sweep; the best is reported")
    parser.add_argument("--reference", action="store_true", help="also time the all-pairs reference (before)")
    parser.add_argument("--merge", action="store_true", help="also time merge_partials on synthetic partials")
    parser.add_argument("--merge-only", action="store_true", help="time merge_partials only")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not args.merge_only:
        bench_grouping(sizes, args.repeat, args.reference)
    if args.merge or args.merge_only:
        bench_merge(sizes, args.repeat, args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
