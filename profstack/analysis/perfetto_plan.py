"""Where the trimmed Perfetto traces of an analysis go: the one naming plan (CLI today; Lambda to follow).

API (pure: a summary in, names out; no I/O)::

    from profstack.analysis.perfetto_plan import PERFETTO_MAX_EVENTS, perfetto_plan

    plan = perfetto_plan(summary, names)   # a summary as engine.analyze / merge_partials write it, and
                                           # the input names the caller can open (None: all)
    for out in plan.outputs:               # in order: ranks as the summary lists them, then their sources
        out.source                         # the input's name, as in summary["inputs"][].name
        out.file_name                      # "rank-<r>.trace.json.gz", "rank-<r>.<i>.trace.json.gz" when
                                           # rank <r> has several files (i = 0, 1, ... in summary order)
        trim_trace(<source>, fh, steps=..., max_events=PERFETTO_MAX_EVENTS, compress=True)
    plan.skipped                           # {name: reason} for inputs that get no trace (status "failed")

Rules: one output per distinct source of each rank (a rank's sources appear once even when it has several
entries, e.g. files analysed apart as "<r>.0", "<r>.1"); inputs whose status is ``failed`` are skipped (they
contributed nothing); ``partial`` inputs are trimmed (what could be read is still worth viewing) and a
file that then cannot be trimmed is the caller's to report. Characters of the rank other than letters,
digits, '-' and '_' become '_'.

To wire the Lambda (lambdas/trace_processor, today ``logic._rank_names``: ``rank-<r>-<n>`` and partial
files skipped): map each ``out.source`` to its S3 object (the engine names an S3 input by its URI or key
basename, as ``S3TraceSource.name`` does), write ``<reports>/perfetto/<out.file_name>``, and pass
``PERFETTO_MAX_EVENTS``. The Lambda's keys then change from ``rank-<r>-<n>`` to ``rank-<r>.<i>``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Cap on events per trimmed trace. A trace meant for a viewer must stay well under ~500 MB of JSON
#: (docs/platform-facts.md); Kineto events average ~200-250 bytes, so one million events is ~250 MB
#: before gzip.
PERFETTO_MAX_EVENTS = 1_000_000

SUFFIX = ".trace.json.gz"


@dataclass(frozen=True)
class PerfettoOutput:
    source: str  # the input's name (summary inputs[].name, ranks[].sources[])
    rank: str  # the rank it belongs to, as text
    file_name: str  # e.g. rank-3.trace.json.gz or rank-3.1.trace.json.gz


@dataclass(frozen=True)
class PerfettoPlan:
    outputs: list[PerfettoOutput] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # input name -> why it gets no trace


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def perfetto_plan(summary: Mapping[str, Any], available: Collection[str] | None = None) -> PerfettoPlan:
    """The trimmed traces to write for ``summary`` (see the module docstring for the rules).

    ``available``: the input names the caller can open (default: all); others are left out before
    numbering, and listed in ``skipped``."""
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    failed = {str(i.get("name")) for i in inputs if i.get("status") == "failed"}
    per_rank: dict[str, list[str]] = {}
    skipped = dict.fromkeys(sorted(failed), "the file could not be read (status failed)")
    for rank in summary.get("ranks") or []:
        label = str(rank.get("rank", rank.get("label", "0")))
        names = per_rank.setdefault(label, [])
        for raw in rank.get("sources") or []:
            name = str(raw)
            if available is not None and name not in available:
                skipped.setdefault(name, "the caller has no such input")
            elif name not in failed and name not in names:
                names.append(name)
    outputs = [
        PerfettoOutput(name, label, f"rank-{_safe(label)}{f'.{i}' if len(names) > 1 else ''}{SUFFIX}")
        for label, names in per_rank.items()
        for i, name in enumerate(names)
    ]
    return PerfettoPlan(outputs, skipped)
