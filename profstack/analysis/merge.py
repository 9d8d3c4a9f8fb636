"""One job summary from per-file partial summaries (the fan-out path): the one merger of partials.

``engine.analyze`` assembles a summary from parsed files; this assembles one from summaries the engine
already wrote (one per file, analysed in parallel). Both use the same pieces from ``summary``: the
cross-rank section, the severity order and the "UnreadableTraceFiles" finding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
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


def _regroup(
    ranks: list[dict[str, Any]], spans: list[tuple[float, float] | None], cross_rank: CrossRank
) -> tuple[list[Run], list[Any], list[CrossRankRow], tuple[int, str, Any] | None]:
    """Runs over every rank entry of the job, as ``engine.assemble`` groups them: entries of different
    ranks that overlap in time (and agree on world size and backend) are one run, and the cross-rank rules
    compare the ranks of one run only. Entries of one rank are labelled ``<rank>.<i>`` in time order."""
    by_rank: dict[Any, list[int]] = {}
    for i, r in enumerate(ranks):
        by_rank.setdefault(r.get("rank"), []).append(i)
    for members in by_rank.values():
        members.sort(key=lambda i: (_start(spans[i]), str(ranks[i].get("label"))))
        for n, i in enumerate(members):
            ranks[i]["label"] = f"{ranks[i].get('rank')}.{n}" if len(members) > 1 else str(ranks[i].get("rank"))
    entries = [
        runs.Entry(
            r["rank"] if isinstance(r.get("rank"), int) else -1 - i,
            str(r["label"]),
            [str(s) for s in r.get("sources") or []],
            spans[i],
            _identity(r),
        )
        for i, r in enumerate(ranks)
    ]
    records: list[Run] = []
    findings: list[Any] = []
    table: list[CrossRankRow] = []
    best: tuple[int, str, Any] | None = None
    for n, members in enumerate(runs.group_runs(entries), 1):
        run_id = f"run-{n}"
        base = runs.run_record(run_id, [entries[i] for i in members], [spans[i] for i in members])
        for i in members:
            ranks[i]["run"] = run_id
        rows = [cross_rank_row(cast(RankSummary, ranks[i]), run_id) for i in members]
        run_cross, run_findings = cross_rank([dict(r) for r in rows])
        findings.extend(run_findings)
        count = len({ranks[i].get("rank") for i in members})
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


def merge_partials(
    partials: Sequence[Mapping[str, Any]], missing: Sequence[Mapping[str, Any]], *, cross_rank: CrossRank
) -> Summary:
    """One job summary from per-file summaries (fan-out). Per-rank sections are kept as the engine
    wrote them; the cross-rank table, stragglers and load balance are recomputed over all ranks by
    the engine's own `cross_rank` (injected), so both paths apply the same rules.
    `missing` lists files whose partial never arrived (failed map item): they are flagged inputs
    (``{"name", "size", "reason"}``), and the "UnreadableTraceFiles" finding is recomputed over all inputs."""
    if not partials and not missing:
        raise ValueError("nothing to merge")
    base: dict[str, Any] = dict(partials[0]) if partials else {"schema_version": SUMMARY_SCHEMA_VERSION}
    inputs: list[Any] = []
    errors: list[Any] = []
    warnings: list[Any] = []
    ranks: list[dict[str, Any]] = []
    spans: list[tuple[float, float] | None] = []
    found: list[Any] = []
    for part in partials:
        inputs.extend(part.get("inputs") or [])
        errors.extend(part.get("errors") or [])
        warnings.extend(part.get("warnings") or [])
        for rank in part.get("ranks") or []:
            if isinstance(rank, Mapping):
                ranks.append(dict(rank))
                spans.append(_span(rank, part))
        # A one-file partial has no cross-rank findings worth keeping: they are recomputed below, and so
        # is the unreadable-files finding (over every input of the job).
        found.extend(
            f
            for f in part.get("findings") or []
            if len(f.get("ranks") or []) <= 1 and f.get("rule_id") != UNREADABLE_RULE_ID
        )
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
    order = sorted(
        range(len(ranks)),
        key=lambda i: (
            not isinstance(ranks[i].get("rank"), int),
            rank if isinstance(rank := ranks[i].get("rank"), int) else 0,
            _start(spans[i]),
        ),
    )
    ranks, spans = [ranks[i] for i in order], [spans[i] for i in order]
    entries_per_rank = Counter(str(r.get("rank")) for r in ranks)
    split = sorted(rank for rank, n in entries_per_rank.items() if n > 1)
    if split:
        warnings.append(
            {
                "source": "fan-out",
                "error_type": "RankFilesNotMerged",
                "message": (
                    f"rank(s) {', '.join(split)} have several trace files; the fan-out analyses each file "
                    "alone, so they are reported as separate entries (<rank>.<i>): successive profiling "
                    "cycles of one process, which `profstack analyze` merges into one entry, stay apart here"
                ),
                "fatal": False,
            }
        )
    timeless = sorted({str(r.get("label") or r.get("rank")) for r, sp in zip(ranks, spans, strict=True) if sp is None})
    if timeless and len(ranks) > 1:
        warnings.append(
            {
                "source": "fan-out",
                "error_type": "RunUnknown",
                "message": (
                    f"rank entries {', '.join(timeless)} have no time range in their partial summary (none, or "
                    "one that ends before it starts), so it is unknown which run they belong to: each is "
                    "reported as a run of its own and not compared with the other ranks"
                ),
                "fatal": False,
            }
        )
    run_records, cross_findings, rows, best = _regroup(ranks, spans, cross_rank)
    found.extend(cross_findings)
    found.sort(key=lambda f: severity_rank(f.get("severity")))
    unreadable = unreadable_finding([i for i in inputs if isinstance(i, Mapping)])
    if unreadable is not None:
        found.insert(0, unreadable)  # up front, as engine.analyze puts it
    base.update(
        complete=all(p.get("complete", False) for p in partials) and not missing,
        inputs=inputs,
        errors=errors,
        warnings=warnings,
        runs=run_records,
        ranks=ranks,
        # as summary.cross_rank_section lays it out; the injected rules' result is spread as it came
        cross_rank={
            "rank_count": len({row["rank"] for row in rows}),
            "table": rows,
            **(best[2] if best is not None else cross_rank([])[0]),
            **({"run": best[1]} if best is not None else {}),
        },
        findings=found,
    )
    return cast(Summary, base)
