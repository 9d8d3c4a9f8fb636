"""The processor's adapter to the analysis engine and the report renderer (profstack.analysis,
profstack.report), injected so tests can replace it; and the one call that analyses a job's files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from lambdas.trace_processor.aws import S3Object, S3TraceSource
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.errors import CorruptTracesError, TraceIOError
from profstack.analysis.xplane import expand

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class Engine(Protocol):
    """The slice of profstack.analysis / profstack.report the processor uses (injected for tests)."""

    def analyze(
        self,
        sources: Sequence[S3TraceSource],
        *,
        top_k: int,
        rule_thresholds: Mapping[str, float],
        include_last_step: bool,
    ) -> dict[str, Any]: ...

    def trim(self, source: S3TraceSource, out: BinaryIO, *, max_events: int) -> bool:
        """Write a trimmed, gzip-compressed trace; False when the file cannot be trimmed."""
        ...

    def render_html(self, summary: Mapping[str, Any], *, sections: Sequence[str] = ()) -> str: ...

    def cross_rank(
        self, table: list[dict[str, Any]], rule_thresholds: Mapping[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]: ...


class ProfStackEngine:
    """The real engine. Imported lazily: the analysis package is heavy and only needed here.

    ``timeline_window``: the trimmed timelines' window (profstack.analysis.trim: median, slowest, all, A:B;
    config ``processing.timeline_window``)."""

    def __init__(self, *, timeline_window: str = "median") -> None:
        self.timeline_window = timeline_window

    def analyze(
        self,
        sources: Sequence[S3TraceSource],
        *,
        top_k: int,
        rule_thresholds: Mapping[str, float],
        include_last_step: bool,
    ) -> dict[str, Any]:
        from profstack.analysis import AnalysisOptions, analyze

        options = AnalysisOptions(
            top_k=top_k, rule_thresholds=dict(rule_thresholds), include_last_step=include_last_step
        )
        result = analyze(list(sources), options)
        return dict(result.summary)

    def cross_rank(
        self, table: list[dict[str, Any]], rule_thresholds: Mapping[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        from profstack.analysis import AnalysisOptions, rules

        th = AnalysisOptions(rule_thresholds=dict(rule_thresholds)).thresholds()
        cross, found = rules.cross_rank(table, th)
        return dict(cross), [dict(f) for f in found]

    def trim(self, source: S3TraceSource, out: BinaryIO, *, max_events: int) -> bool:
        from profstack.analysis import TraceError
        from profstack.analysis.trim import trim_timeline

        try:
            trim_timeline(source, out, window=self.timeline_window, max_events=max_events, compress=True)
        except TraceError:
            return False  # a truncated/corrupt file: already flagged by the analysis
        return True

    def render_html(self, summary: Mapping[str, Any], *, sections: Sequence[str] = ()) -> str:
        from profstack.report import render_html

        return str(render_html(dict(summary), sections=sections))


def raise_read_failures(sources: Sequence[S3TraceSource]) -> None:
    """A read that failed (throttled, reset past the budget, 412, 416, denied) is not a bad file: the
    engine recorded it as one, so the job is retried instead (TraceIOError), never reported partial."""
    failed = [s.failure for s in sources if s.failure is not None]
    if failed:
        first = failed[0]
        raise TraceIOError(
            f"{len(failed)} of {len(sources)} trace files could not be read ({first.code}): {first}"[:1000],
            code=first.code,
        )


def analyze_objects(s3: S3Client, engine: Engine, env: ProcessorEnv, objects: Sequence[S3Object]) -> dict[str, Any]:
    """The job's summary over its trace files, streamed from S3. An S3 read failure fails the job for a
    retry (TraceIOError); a file the engine cannot parse is an input with status failed/partial; when no
    file at all can be parsed, CorruptTracesError (retried, then dead-lettered)."""
    # an .xplane.pb is read as its Kineto events, one rank per device plane, a folder's XSpaces (one per host) as
    # one job: the same sources `profstack analyze` reads (profstack.analysis.xplane.expand)
    sources = expand([S3TraceSource(s3, o) for o in objects])
    summary = engine.analyze(
        sources, top_k=env.top_k, rule_thresholds=env.rule_thresholds, include_last_step=env.include_last_step
    )
    raise_read_failures(sources)
    inputs = [i for i in summary.get("inputs") or [] if isinstance(i, Mapping)]
    if inputs and all(i.get("status") == "failed" for i in inputs):
        reasons = "; ".join(str((i.get("error") or {}).get("message", i.get("name"))) for i in inputs)
        raise CorruptTracesError(f"no trace file could be analysed: {reasons}"[:1000])
    return summary
