"""One job summary from per-file partial summaries (the fan-out path): the one merger of partials.

``engine.analyze`` assembles a summary from parsed files; this assembles one from summaries the engine
already wrote (one per file, analysed in parallel). Both use the same pieces from ``summary``: the
cross-rank section, the severity order and the "UnreadableTraceFiles" finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from profstack.analysis.summary import (
    SUMMARY_SCHEMA_VERSION,
    UNREADABLE_RULE_ID,
    CrossRankResult,
    Summary,
    severity_rank,
    unreadable_finding,
)

#: ``rules.cross_rank`` with the job's thresholds bound: table rows -> (stragglers/load balance, findings)
CrossRank = Callable[[list[dict[str, Any]]], tuple[Mapping[str, Any] | CrossRankResult, list[Any]]]


def _get(mapping: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(part)
    return mapping


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
    ranks: list[Any] = []
    table: list[Any] = []
    found: list[Any] = []
    for part in partials:
        inputs.extend(part.get("inputs") or [])
        errors.extend(part.get("errors") or [])
        warnings.extend(part.get("warnings") or [])
        ranks.extend(part.get("ranks") or [])
        table.extend(_get(part, "cross_rank", "table") or [])
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
    rows = sorted(table, key=lambda r: (r.get("rank", 0), str(r.get("label", ""))))
    cross, cross_findings = cross_rank([dict(r) for r in rows])
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
        ranks=sorted(ranks, key=lambda r: (r.get("rank") is None, r.get("rank") or 0)),
        cross_rank={"rank_count": len({r.get("rank") for r in rows}), "table": rows, **cross},
        findings=found,
    )
    return cast(Summary, base)
