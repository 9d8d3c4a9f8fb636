"""The owner's report index, rewritten after each report (issue 36, item 2): ``reports/<user>/index.json`` (the
rows) and ``reports/<user>/index.html`` (the page), in the trace bucket under the bucket's default encryption,
like every report. Called by ``outputs.publish_report`` after summary.json (the job's commit marker).

No lost rows under concurrent reports (two jobs of one user finishing together, or a re-delivery):

1. the job's row goes to ``reports/<user>/<job>/index-row.json`` first (a fixed key: a re-delivery overwrites it);
2. index.json is read (with its ETag), the row upserted, and written back **conditionally**: ``If-Match`` the
   ETag read, or ``If-None-Match: *`` when there was none. A writer that lost the race gets 412 (or 409 while the
   other write is in flight), reads again and retries. A missing or unreadable index.json, or one with a row that
   cannot be read, is rebuilt from the row files of every job folder (so the first report after an upgrade, a
   deleted index or a damaged row loses nothing). Rows beyond MAX_INDEX_JOBS are counted in index.json's `older`
   (the page and `profstack reports list` say so; `--all` lists them from their row files), never dropped silently;
3. index.html is rendered from the rows just committed; afterwards index.json's ETag is read again, and if
   another writer committed meanwhile the page is rendered again from its rows. The last page written is
   therefore always the rendering of the last index.json committed.

A fault of the index never costs the job its report (written before): throttling and 5xx propagate (the record is
retried, the e-mail is not repeated: notification.notify_once), any other failure is logged.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from lambdas.trace_processor.aws import TRANSIENT_CODES, S3Location, error_code, put_bytes
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.telemetry import logger
from profstack import layout
from profstack.history.family import FamilyRules, resolve_family
from profstack.report import index as idx

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: conditional-write attempts before the record is retried (each a read and a write; jittered back-off)
MAX_ATTEMPTS = 8
#: page re-renders when other writers keep committing (each of them renders the page again after it)
MAX_PAGE_PASSES = 4
#: parallel GetObject calls when index.json is rebuilt from the row files (1,000 jobs: ~1 s instead of ~15 s)
REBUILD_READERS = 16
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412", "409"})
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


class IndexConflictError(RuntimeError):
    """index.json kept changing under every attempt; transient: the record is retried."""


def index_location(ctx: JobContext, name: str) -> S3Location:
    return S3Location(ctx.trace_bucket, layout.user_reports_prefix(ctx.user) + name)


def row_location(bucket: str, user: str, job: str) -> S3Location:
    return S3Location(bucket, layout.job_reports_prefix(user, job) + idx.ROW_FILE)


def _seconds(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def job_duration_s(describe: Mapping[str, Any] | None) -> float | None:
    """Training time from SageMaker's description (TrainingStartTime to TrainingEndTime), None when unknown."""
    if not describe:
        return None
    start, end = _seconds(describe.get("TrainingStartTime")), _seconds(describe.get("TrainingEndTime"))
    if start is None or end is None or end < start:
        return None
    return end - start


#: the job's tags from SageMaker, by ARN (history.job_tags); None where the role may not call ListTags
TagReader = Callable[[str], Mapping[str, str]]


def job_family(
    ctx: JobContext, rules: FamilyRules, *, describe: Mapping[str, Any] | None, tags: TagReader | None
) -> str | None:
    """The job's family as the history step resolves it: its `profstack:family` tag (from SageMaker, when `tags` is
    given: with history on, the functions that publish reports may call ListTags), else the job-name rules."""
    arn = describe.get("TrainingJobArn") if describe else None
    found = resolve_family(ctx.job, tags(str(arn)) if tags is not None and arn else {}, rules)
    return found[0] if found else None


def build_row(
    ctx: JobContext,
    summary: Mapping[str, Any],
    *,
    describe: Mapping[str, Any] | None,
    rules: FamilyRules,
    tags: TagReader | None = None,
) -> dict[str, Any]:
    return idx.index_row(
        summary,
        job=ctx.job,
        status=ctx.status,
        ended_at=datetime.fromtimestamp(ctx.end_time_s, UTC),
        family=job_family(ctx, rules, describe=describe, tags=tags),
        duration_s=job_duration_s(describe),
    )


# ------------------------------------------------------------------------------------------ S3


def _get(s3: S3Client, location: S3Location) -> tuple[bytes, str] | None:
    try:
        response = s3.get_object(Bucket=location.bucket, Key=location.key)
    except ClientError as exc:
        if error_code(exc) in _MISSING_CODES:
            return None
        raise
    body = response["Body"]
    try:
        return body.read(idx.MAX_INDEX_BYTES + 1), str(response["ETag"])
    finally:
        body.close()


def _etag(s3: S3Client, location: S3Location) -> str | None:
    try:
        return str(s3.head_object(Bucket=location.bucket, Key=location.key)["ETag"])
    except ClientError as exc:
        if error_code(exc) in _MISSING_CODES:
            return None
        raise


def rebuild_rows(s3: S3Client, bucket: str, user: str) -> list[dict[str, Any]]:
    """Every job folder's row file under reports/<user>/, read REBUILD_READERS at a time (a folder without one
    is a job reported before the index existed, or still being written: skipped), newest first, all of them."""
    prefix = layout.user_reports_prefix(user)
    jobs: list[str] = []
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        for folder in page.get("CommonPrefixes", []):
            job = str(folder.get("Prefix", ""))[len(prefix) :].rstrip("/")
            if layout.is_segment(job):
                jobs.append(job)

    def read(job: str) -> list[dict[str, Any]]:
        found = _get(s3, row_location(bucket, user, job))
        if found is None:
            return []
        try:
            return idx.parse_row_file(found[0])
        except idx.IndexFormatError:
            logger.warning("report index: unreadable row file skipped", extra={"job": job})
            return []

    rows: list[Mapping[str, Any] | None] = []
    with ThreadPoolExecutor(max_workers=REBUILD_READERS) as pool:
        for found in pool.map(read, jobs):
            rows.extend(found)
    return idx.merge_rows(rows)


def _conditional_put(s3: S3Client, location: S3Location, data: bytes, etag: str | None) -> bool:
    """PutObject If-Match `etag` (If-None-Match * when None); False when another writer got there first."""
    try:
        if etag is not None:
            s3.put_object(
                Bucket=location.bucket, Key=location.key, Body=data, ContentType="application/json", IfMatch=etag
            )
        else:
            s3.put_object(
                Bucket=location.bucket, Key=location.key, Body=data, ContentType="application/json", IfNoneMatch="*"
            )
    except ClientError as exc:
        if error_code(exc) in _CONFLICT_CODES:
            return False
        raise
    return True


def current_rows(s3: S3Client, bucket: str, user: str, found: bytes | None) -> tuple[list[dict[str, Any]], int]:
    """(every row the index should hold, newest first, uncut; the `older` count they come with) from index.json's
    bytes: rebuilt from the row files when it is missing or unreadable, or when a row of it cannot be read (its job's
    row file has it; a running job's row, which has no row file, is kept from the index)."""
    if found is None:
        return rebuild_rows(s3, bucket, user), 0
    try:
        doc = idx.parse_index(found)
    except idx.IndexFormatError as exc:
        logger.warning("report index unreadable; rebuilt from the row files", extra={"error": str(exc)[:300]})
        return rebuild_rows(s3, bucket, user), 0
    if not doc.unreadable:
        return doc.rows, doc.older
    logger.warning("report index: rows unreadable; rebuilt from the row files", extra={"rows": doc.unreadable})
    rebuilt = rebuild_rows(s3, bucket, user)
    have = {r["job"] for r in rebuilt}
    return idx.merge_rows([*rebuilt, *(r for r in doc.rows if r["job"] not in have)]), 0


def commit_row(
    s3: S3Client,
    bucket: str,
    user: str,
    row: Mapping[str, Any],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[dict[str, Any]], str]:
    """Upsert `row` into reports/<user>/index.json by conditional write; (the rows committed, their ETag)."""
    rows, etag, _ = commit_row_counted(s3, bucket, user, row, now=now, sleep=sleep)
    return rows, etag


def commit_row_counted(
    s3: S3Client,
    bucket: str,
    user: str,
    row: Mapping[str, Any],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[dict[str, Any]], str, int]:
    """commit_row(), and the `older` count committed with the rows."""
    location = S3Location(bucket, layout.user_reports_prefix(user) + idx.INDEX_JSON)
    for attempt in range(MAX_ATTEMPTS):
        found = _get(s3, location)
        etag = found[1] if found is not None else None
        rows, older = current_rows(s3, bucket, user, found[0] if found is not None else None)
        rows, fell_out = idx.upsert_counted(rows, row)
        older += fell_out  # jobs beyond the index are counted, and said, never dropped silently
        data = idx.dumps(idx.index_document(user, rows, generated_at=now(), older=older))
        if _conditional_put(s3, location, data, etag):
            committed = _etag(s3, location)
            return rows, committed or "", older
        sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not crypto
    raise IndexConflictError(f"{location.uri} changed under {MAX_ATTEMPTS} attempts")


def write_page(
    s3: S3Client,
    bucket: str,
    user: str,
    rows: list[dict[str, Any]],
    etag: str,
    *,
    older: int = 0,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """index.html from `rows` (committed with `etag`, with `older` jobs beyond them); again from the newer rows if
    index.json changed meanwhile."""
    prefix = layout.user_reports_prefix(user)
    json_location = S3Location(bucket, prefix + idx.INDEX_JSON)
    page_location = S3Location(bucket, prefix + idx.INDEX_HTML)
    for _ in range(MAX_PAGE_PASSES):
        page = idx.render_index_html(user, rows, generated_at=now(), older=older)
        put_bytes(s3, page_location, page.encode(), content_type="text/html; charset=utf-8")
        current = _etag(s3, json_location)
        if current is None or current == etag:
            return
        found = _get(s3, json_location)  # another report committed after ours: its rows, our page
        if found is None:
            return
        try:
            doc = idx.parse_index(found[0])
        except idx.IndexFormatError:
            return  # that writer rewrites the page itself
        rows, etag, older = doc.rows, found[1], doc.older
    logger.warning("report index page: index.json kept changing; the last writer renders it", extra={"user": user})


def update_index(
    s3: S3Client,
    ctx: JobContext,
    summary: Mapping[str, Any],
    *,
    describe: Mapping[str, Any] | None,
    rules: FamilyRules,
    tags: TagReader | None = None,
    row_file: bool = True,
) -> str | None:
    """The job's row file, index.json and index.html; the page's URI, or None when the index step failed
    for a reason a retry would not fix (logged; the report itself is already written). ``row_file=False`` (a
    running job's row, lambdas/live_analysis): index.json and the page only, so the row files a rebuild reads
    hold finished jobs' rows, which no late in-progress row can overwrite."""
    try:
        row = build_row(ctx, summary, describe=describe, rules=rules, tags=tags)
        if row_file:
            put_bytes(
                s3,
                row_location(ctx.trace_bucket, ctx.user, ctx.job),
                idx.dumps(row),
                content_type="application/json",
            )
        rows, etag, older = commit_row_counted(s3, ctx.trace_bucket, ctx.user, row)
        write_page(s3, ctx.trace_bucket, ctx.user, rows, etag, older=older)
    except ClientError as exc:
        if error_code(exc) in TRANSIENT_CODES:
            raise
        logger.error("report index not updated", extra={"job": ctx.job, "error": str(exc)[:500]})
        return None
    except (BotoCoreError, IndexConflictError):
        raise  # connection faults and a lost race 8 times over: the record is retried
    except Exception:  # a defect here must not cost the job its report (already written)
        logger.exception("report index step failed; the report is written without it")
        return None
    return index_location(ctx, idx.INDEX_HTML).uri
