"""One job summary from per-file partial summaries (the fan-out path): the one merger of partials.

``engine.analyze`` assembles a summary from parsed files; this assembles one from summaries the engine
already wrote (one per file, analysed in parallel). Both use the same pieces from ``summary``: the
cross-rank section, the severity order and the "UnreadableTraceFiles" finding.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from profstack.analysis import runs
from profstack.analysis.loose import at as _get
from profstack.analysis.loose import number as _num
from profstack.analysis.summary import (
    SUMMARY_SCHEMA_VERSION,
    UNREADABLE_RULE_ID,
    CrossRankResult,
    CrossRankRow,
    RankSummary,
    Run,
    RunCrossRank,
    Summary,
    cross_rank_row,
    severity_rank,
    unreadable_finding,
)

#: ``rules.cross_rank`` with the job's thresholds bound: table rows -> (stragglers/load balance, findings)
CrossRank = Callable[[list[dict[str, Any]]], tuple[Mapping[str, Any] | CrossRankResult, list[Any]]]


def _span(rank: Mapping[str, Any], partial: Mapping[str, Any]) -> tuple[float, float] | None:
    """A rank entry's time range, from the partial's record of the run it was in; None when that record is
    missing or damaged (a negative duration: the engine never writes one), so the entry is a run of its own
    (RunUnknown) rather than joined by a range that ends before it starts."""
    for run in partial.get("runs") or []:
        if isinstance(run, Mapping) and run.get("id") == rank.get("run"):
            start, duration = _num(run.get("start_us")), _num(run.get("duration_us"))
            if start is not None and duration is not None and duration >= 0:
                return (start, start + duration)
    return None


def _start(span: tuple[float, float] | None) -> float:
    return span[0] if span is not None else float("inf")


def _identity(rank: Mapping[str, Any]) -> runs.Identity:
    """What tells runs of different ranks apart (world size, backend; ``runs.Identity``)."""
    dist = _get(rank, "distributed")
    world, backend = _get(dist, "world_size"), _get(dist, "backend")
    return runs.Identity(
        world_size=world if isinstance(world, int) and not isinstance(world, bool) else None,
        backend=backend if isinstance(backend, str) else None,
    )


@dataclass
class _Entry:
    """One rank entry of the job, as the merge keeps it: what grouping and the cross-rank rules need (a few
    hundred bytes), and its full section only while it is among the MAX_FULL_RANK_SECTIONS kept."""

    order: tuple[bool, int, float]
    rank: Any
    sources: list[str]
    span: tuple[float, float] | None
    identity: runs.Identity
    row: dict[str, Any]
    section: dict[str, Any] | None
    label: str = ""


def _regroup(entries: list[_Entry], cross_rank: CrossRank) -> tuple[list[Run], list[Any], list[CrossRankRow], Any]:
    """Runs over every rank entry of the job, as ``engine.assemble`` groups them: entries of different
    ranks that overlap in time (and agree on world size and backend) are one run, and the cross-rank rules
    compare the ranks of one run only. Entries of one rank are labelled ``<rank>.<i>`` in time order."""
    by_rank: dict[Any, list[int]] = {}
    for i, e in enumerate(entries):
        by_rank.setdefault(e.rank, []).append(i)
    for members in by_rank.values():
        members.sort(key=lambda i: (_start(entries[i].span), str(entries[i].row.get("label"))))
        for n, i in enumerate(members):
            entries[i].label = f"{entries[i].rank}.{n}" if len(members) > 1 else str(entries[i].rank)
    grouped = [
        runs.Entry(e.rank if isinstance(e.rank, int) else -1 - i, e.label, e.sources, e.span, e.identity)
        for i, e in enumerate(entries)
    ]
    records: list[Run] = []
    findings: list[Any] = []
    table: list[CrossRankRow] = []
    best: tuple[int, str, Any] | None = None
    for n, members in enumerate(runs.group_runs(grouped), 1):
        run_id = f"run-{n}"
        base = runs.run_record(run_id, [grouped[i] for i in members], [entries[i].span for i in members])
        rows = []
        for i in members:
            entries[i].row.update(label=entries[i].label, run=run_id)
            section = entries[i].section
            if section is not None:
                section.update(label=entries[i].label, run=run_id)
            rows.append(cast(CrossRankRow, entries[i].row))
        run_cross, run_findings = cross_rank([dict(r) for r in rows])
        findings.extend(run_findings)
        count = len({entries[i].rank for i in members})
        records.append(
            {
                "id": base["id"],
                "label": base["label"],
                "files": base["files"],
                "ranks": base["ranks"],
                "start_us": base["start_us"],
                "duration_us": base["duration_us"],
                "cross_rank": cast(RunCrossRank, {"rank_count": count, **run_cross}),
            }
        )
        if best is None or count > best[0]:
            best = (count, run_id, run_cross)
        table.extend(rows)
    return records, findings, table, best


_LIST_KEYS = ("ranks", "inputs", "errors", "warnings", "findings")


def partial_problem(partial: object) -> str | None:
    """Why a per-file summary cannot be merged (one line), or None. A partial of another summary schema (major
    version), or one whose sections are not the types the merge reads, is one bad rank, not a lost job."""
    if not isinstance(partial, Mapping):
        return f"not a summary object but {type(partial).__name__}"
    version = partial.get("schema_version")
    major = SUMMARY_SCHEMA_VERSION.split(".", 1)[0]
    if not isinstance(version, str) or version.split(".", 1)[0] != major:
        return f"summary schema {str(version)[:20]!r}, and this engine merges {major}.x"
    for key in _LIST_KEYS:
        value = partial.get(key)
        if value is not None and not isinstance(value, list):
            return f"its {key!r} is a {type(value).__name__}, not a list"
    for key in ("ranks", "findings"):
        if any(not isinstance(item, Mapping) for item in partial.get(key) or []):
            return f"an entry of its {key!r} is not an object"
    cross = partial.get("cross_rank")
    if cross is not None and not isinstance(cross, Mapping):
        return "its 'cross_rank' is not an object"
    table = cross.get("table") if isinstance(cross, Mapping) else None
    if table is not None and (not isinstance(table, list) or any(not isinstance(r, Mapping) for r in table)):
        return "its 'cross_rank.table' is not a list of objects"
    return None


#: rank sections kept whole in a fanned-out job's summary (the lowest rank numbers); every rank keeps its row in
#: the cross-rank table, its input and its run. 10,000 ranks wrote a 784 MB summary.json and took 6.9 GB to merge.
MAX_FULL_RANK_SECTIONS = 128
#: errors, warnings and single-rank findings kept from the partials (most severe findings first); the rest counted
MAX_KEPT_NOTES = 2000


class PartialMerger:
    """Merges per-file summaries one at a time (`add`), holding per rank only what grouping and the cross-rank
    rules need, plus at most MAX_FULL_RANK_SECTIONS whole sections: memory and summary size grow by a few hundred
    bytes a partial, not by its size. `finish` assembles the job summary."""

    def __init__(self, cross_rank: CrossRank) -> None:
        self._cross_rank = cross_rank
        self._base: dict[str, Any] | None = None
        self._inputs: list[Any] = []
        self._errors: list[Any] = []
        self._warnings: list[Any] = []
        self._found: list[Any] = []
        self._entries: list[_Entry] = []
        self._kept: list[tuple[tuple[bool, int, float], int]] = []  # max-heap (negated) of kept sections' order
        self._dropped = {"errors": 0, "warnings": 0, "findings": 0, "sections": 0}
        self._complete = True
        self.count = 0

    def _note(self, kind: str, target: list[Any], items: Any) -> None:
        for item in items or []:
            if len(target) < MAX_KEPT_NOTES:
                target.append(item)
            else:
                self._dropped[kind] += 1

    def add(self, part: Mapping[str, Any]) -> str | None:
        """Fold one partial in; the reason when it cannot be merged (it is then not folded in at all)."""
        problem = partial_problem(part)
        if problem is None:
            try:
                entries = [self._entry(rank, part) for rank in part.get("ranks") or []]
            except (KeyError, TypeError, ValueError) as exc:  # a section without what the cross-rank row reads
                problem = f"a rank section lacks {exc!s:.80}"
        if problem is not None:
            return problem
        self.count += 1
        if self._base is None:
            self._base = {k: v for k, v in part.items() if k not in {"ranks", "inputs", "errors", "warnings"}}
        self._complete = self._complete and bool(part.get("complete", False))
        self._inputs.extend(part.get("inputs") or [])
        self._note("errors", self._errors, part.get("errors"))
        self._note("warnings", self._warnings, part.get("warnings"))
        # A one-file partial has no cross-rank findings worth keeping: they are recomputed, and so is the
        # unreadable-files finding (over every input of the job).
        self._note(
            "findings",
            self._found,
            [
                f
                for f in part.get("findings") or []
                if len(f.get("ranks") or []) <= 1 and f.get("rule_id") != UNREADABLE_RULE_ID
            ],
        )
        for entry in entries:
            self._keep(entry)
        return None

    def _entry(self, rank: Mapping[str, Any], part: Mapping[str, Any]) -> _Entry:
        section = dict(rank)
        span = _span(rank, part)
        value = rank.get("rank")
        order = (not isinstance(value, int), value if isinstance(value, int) else 0, _start(span))
        row = dict(cross_rank_row(cast(RankSummary, {**section, "label": str(section.get("label") or value)}), ""))
        sources = [str(s) for s in rank.get("sources") or []]
        return _Entry(order, value, sources, span, _identity(rank), row, section)

    def _keep(self, entry: _Entry) -> None:
        index = len(self._entries)
        self._entries.append(entry)
        heapq.heappush(self._kept, (_negated(entry.order), index))
        if len(self._kept) > MAX_FULL_RANK_SECTIONS:
            _, dropped = heapq.heappop(self._kept)  # the highest rank number goes
            self._entries[dropped].section = None
            self._dropped["sections"] += 1

    def finish(self, missing: Sequence[Mapping[str, Any]]) -> Summary:
        if not self._entries and self._base is None and not missing:
            raise ValueError("nothing to merge")
        base: dict[str, Any] = self._base if self._base is not None else {"schema_version": SUMMARY_SCHEMA_VERSION}
        inputs, errors, warnings, found = self._inputs, self._errors, self._warnings, self._found
        for item in missing:
            error = {
                "source": item["name"],
                "error_type": "PartialMissing",
                "message": f"{item['name']}: {item.get('reason') or 'analysis did not produce a result'}",
                "fatal": True,
            }
            inputs.append(
                {
                    "name": item["name"],
                    "rank": None,
                    "rank_source": "unknown",
                    "size_bytes": item.get("size"),
                    "status": "failed",
                    "events": 0,
                    "error": error,
                }
            )
            errors.append(error)
        entries = sorted(self._entries, key=lambda e: e.order)
        warnings += _rank_warnings(entries)
        warnings += self._cut_warnings(len(entries))
        run_records, cross_findings, rows, best = _regroup(entries, self._cross_rank)
        found.extend(cross_findings)
        found.sort(key=lambda f: severity_rank(f.get("severity")))
        unreadable = unreadable_finding([i for i in inputs if isinstance(i, Mapping)])
        if unreadable is not None:
            found.insert(0, unreadable)  # up front, as engine.analyze puts it
        base.update(
            complete=self._complete and not missing,
            inputs=inputs,
            errors=errors,
            warnings=warnings,
            runs=run_records,
            ranks=[e.section for e in entries if e.section is not None],
            # as summary.cross_rank_section lays it out; the injected rules' result is spread as it came
            cross_rank={
                "rank_count": len({row["rank"] for row in rows}),
                "table": rows,
                **(best[2] if best is not None else self._cross_rank([])[0]),
                **({"run": best[1]} if best is not None else {}),
            },
            findings=found,
        )
        return cast(Summary, base)

    def _cut_warnings(self, ranks: int) -> list[dict[str, Any]]:
        out = []
        if self._dropped["sections"]:
            out.append(
                {
                    "source": "fan-out",
                    "error_type": "RankSectionsOmitted",
                    "message": (
                        f"{self._dropped['sections']:,} of {ranks:,} rank sections are not in this summary (the "
                        f"{MAX_FULL_RANK_SECTIONS} lowest ranks are): every rank is still in the cross-rank table, "
                        "its run and the findings; `profstack analyze` on one rank's file gives its whole section"
                    ),
                    "fatal": False,
                }
            )
        dropped = {k: v for k, v in self._dropped.items() if k != "sections" and v}
        if dropped:
            counts = ", ".join(f"{v:,} {k}" for k, v in dropped.items())
            out.append(
                {
                    "source": "fan-out",
                    "error_type": "NotesCut",
                    "message": f"the partials held more notes than a summary keeps ({MAX_KEPT_NOTES:,} each): "
                    f"{counts} left out",
                    "fatal": False,
                }
            )
        return out


def _negated(order: tuple[bool, int, float]) -> tuple[bool, int, float]:
    return (not order[0], -order[1], -order[2])


def _rank_warnings(entries: list[_Entry]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    entries_per_rank = Counter(str(e.rank) for e in entries)
    split = sorted(rank for rank, n in entries_per_rank.items() if n > 1)
    if split:
        out.append(
            {
                "source": "fan-out",
                "error_type": "RankFilesNotMerged",
                "message": (
                    f"rank(s) {', '.join(split[:50])}{' …' if len(split) > 50 else ''} have several trace files; "
                    "the fan-out analyses each file alone, so they are reported as separate entries (<rank>.<i>): "
                    "successive profiling cycles of one process, which `profstack analyze` merges into one entry, "
                    "stay apart here"
                ),
                "fatal": False,
            }
        )
    timeless = sorted({str(e.row.get("label") or e.rank) for e in entries if e.span is None})
    if timeless and len(entries) > 1:
        out.append(
            {
                "source": "fan-out",
                "error_type": "RunUnknown",
                "message": (
                    f"rank entries {', '.join(timeless[:50])}{' …' if len(timeless) > 50 else ''} have no time "
                    "range in their partial summary (none, or one that ends before it starts), so it is unknown "
                    "which run they belong to: each is reported as a run of its own and not compared with the "
                    "other ranks"
                ),
                "fatal": False,
            }
        )
    return out


def merge_partials(
    partials: Iterable[Mapping[str, Any]], missing: Sequence[Mapping[str, Any]], *, cross_rank: CrossRank
) -> Summary:
    """One job summary from per-file summaries (fan-out), folded one at a time (PartialMerger). Per-rank
    sections are kept as the engine wrote them (the MAX_FULL_RANK_SECTIONS lowest ranks); the cross-rank
    table, stragglers and load balance are recomputed over all ranks by the engine's own `cross_rank`
    (injected), so both paths apply the same rules. `missing` lists files whose partial never arrived or
    could not be merged: they are flagged inputs (``{"name", "size", "reason"}``), and the
    "UnreadableTraceFiles" finding is recomputed over all inputs. A partial that cannot be merged raises."""
    merger = PartialMerger(cross_rank)
    for part in partials:
        problem = merger.add(part)
        if problem is not None:
            raise ValueError(f"a partial summary cannot be merged: {problem}")
    return merger.finish(missing)
