"""Which of a job's trace objects count as its evidence (#42 items 7 and 8): what the pipeline can verify about an
object it did not write, at the moment it reads it.

The trace bucket's policy is the first check: only the owner's execution roles and the pipeline may write a user's
trace folders (docs/security.md). Here, where the objects are read, the pipeline applies what it can verify itself:

* the name is trace-shaped (`layout.is_trace_key`, applied by the listing) and the object is not empty;
* S3's own LastModified, which no writer can choose, falls inside the job's run as DescribeTrainingJob tells it:
  nothing written before the job was created can be its output, and for an action (a stop) only what was written
  after its training started and not in the future counts (`RunWindow`);
* the object read is the object judged: every read requires the listed ETag (aws._ResumableS3Reader, If-Match).

What passes is preferred wherever a cap chooses (`select`): files written during the run come first, so files
planted to sort first cannot push the job's own traces past `processing.max_files_per_job`; and a cap never turns
into "no report": what fits is analysed and a warning names what was left out, and why. The listing itself is
bounded by keys seen, not by traces kept (`MAX_KEYS_LISTED`), so a folder of planted junk costs a bounded listing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lambdas.trace_processor.aws import S3Location, S3Object, list_objects
from profstack import layout

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: S3's and SageMaker's clocks are both AWS's; this much disagreement between them is tolerated
CLOCK_SKEW = timedelta(minutes=5)
#: SageMaker uploads the TensorBoard output after the training ends (secondary status Uploading): a file written
#: this long after the job's last change still counts as written during its run
UPLOAD_GRACE = timedelta(hours=1)
#: keys (of any name) one job's listing reads at most, over all its prefixes: 100 ListObjectsV2 pages. A folder with
#: more is said to be cut short; junk that is not trace-shaped counts here too, so it cannot make the listing endless
MAX_KEYS_LISTED = 100_000
#: left-out files named in a warning (the count says how many more)
NAMED_LEFT_OUT = 10

#: why an object is not the job's evidence, or is chosen last
BEFORE_JOB = "written before the job was created"
BEFORE_TRAINING = "written before the job's training started"
IN_FUTURE = "written after this analysis began"
AFTER_RUN = "written after the job ended"
EMPTY = "empty"


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class RunWindow:
    """When the job could have written its traces, from DescribeTrainingJob (times SageMaker sets, not the job's
    creator): `created` (CreationTime), `started` (TrainingStartTime; None while it has not started), `ended`
    (TrainingEndTime, else LastModifiedTime for a finished job; None while it runs)."""

    created: datetime | None
    started: datetime | None
    ended: datetime | None

    @classmethod
    def of(cls, describe: Mapping[str, Any] | None, *, running: bool = False) -> RunWindow:
        d = describe or {}
        ended = None if running else (_moment(d.get("TrainingEndTime")) or _moment(d.get("LastModifiedTime")))
        return cls(_moment(d.get("CreationTime")), _moment(d.get("TrainingStartTime")), ended)

    def excluded(self, obj: S3Object) -> str | None:
        """Why `obj` cannot be this job's output at all (then it is not analysed), or None."""
        if obj.modified is not None and self.created is not None and obj.modified < self.created - CLOCK_SKEW:
            return BEFORE_JOB
        return None

    def action_problem(self, obj: S3Object, now: datetime) -> str | None:
        """Why `obj` may not be evidence for an action on the running job (a stop), or None: it must be non-empty and
        written after the training started (the job's own code runs from then) and not after `now`."""
        if obj.size <= 0:
            return EMPTY
        excluded = self.excluded(obj)
        if excluded:
            return excluded
        if obj.modified is None:
            return None
        start = self.started or self.created
        if start is not None and obj.modified < start - CLOCK_SKEW:
            return BEFORE_TRAINING
        if obj.modified > now + CLOCK_SKEW:
            return IN_FUTURE
        return None

    def priority(self, obj: S3Object) -> tuple[int, str]:
        """Where `obj` stands when a cap chooses (lower first), and why it is not first: written during the run,
        then after it (a late upload), then empty files."""
        if obj.size <= 0:
            return 2, EMPTY
        if obj.modified is not None and self.ended is not None and obj.modified > self.ended + UPLOAD_GRACE:
            return 1, AFTER_RUN
        return 0, ""


@dataclass
class Listing:
    """A job's trace objects by key (the first MAX_KEYS_LISTED keys of its prefixes), and whether it was cut."""

    objects: list[S3Object]
    keys_seen: int
    cut: bool


def list_traces(s3: S3Client, prefixes: Sequence[S3Location], *, max_keys: int = MAX_KEYS_LISTED) -> Listing:
    """Every trace-shaped object under the prefixes (deduplicated, by key), counting every key read, trace or not;
    stops after `max_keys` keys (`cut`)."""
    found: dict[tuple[str, str], S3Object] = {}
    seen = 0
    for prefix in prefixes:
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            seen += 1
            if layout.is_trace_key(obj.key):
                found.setdefault((obj.bucket, obj.key), obj)
            if seen >= max_keys:
                return Listing(sorted(found.values(), key=lambda o: (o.bucket, o.key)), seen, True)
    return Listing(sorted(found.values(), key=lambda o: (o.bucket, o.key)), seen, False)


@dataclass
class Selection:
    """What a cap chose (in key order, the engine's order), what it left out and why, and the job warnings."""

    chosen: list[S3Object]
    left_out: list[tuple[S3Object, str]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)


def _named(items: Sequence[tuple[S3Object, str]]) -> str:
    names = ", ".join(f"{obj.uri} ({why})" for obj, why in items[:NAMED_LEFT_OUT])
    more = len(items) - NAMED_LEFT_OUT
    return names + (f" and {more:,} more" if more > 0 else "")


def select(listing: Listing, window: RunWindow, limit: int) -> Selection:
    """At most `limit` of the listed objects for a job's final report: none written before the job existed, files
    written during the run before late uploads and empty files, key order within each; and the warnings that say
    what was left out, naming the files."""
    excluded = [(o, why) for o in listing.objects if (why := window.excluded(o))]
    usable = [o for o in listing.objects if not window.excluded(o)]
    ranked = sorted(usable, key=lambda o: (window.priority(o)[0], o.bucket, o.key))
    chosen = sorted(ranked[:limit], key=lambda o: (o.bucket, o.key))
    capped = [(o, window.priority(o)[1] or "beyond the cap, by key") for o in ranked[limit:]]
    warnings: list[dict[str, Any]] = []
    if excluded:
        warnings.append(
            {
                "type": "TraceFilesNotFromThisJob",
                "message": f"{len(excluded):,} trace file(s) in this job's folders were written before the job was "
                f"created, so they cannot be its output, and were not analysed: {_named(excluded)}",
            }
        )
    if capped:
        warnings.append(
            {
                "type": "TooManyTraceFiles",
                "message": f"{len(usable):,} trace files, more than {limit:,} (processing.max_files_per_job): "
                f"{limit:,} were analysed, files written while the job ran first; {len(capped):,} left out: "
                f"{_named(capped)}. The report covers the analysed files only",
            }
        )
    if listing.cut:
        warnings.append(
            {
                "type": "TraceListingCut",
                "message": f"this job's folders hold more than {listing.keys_seen:,} objects; only those were listed, "
                "so trace files after them were not seen",
            }
        )
    return Selection(chosen, [*excluded, *capped], warnings)
