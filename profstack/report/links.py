"""Where a user opens their reports, as text for the e-mail and the CLI: the commands that open a report or the
index with every link working (``profstack reports open|index``, a local server: profstack/cli/reports_serve.py),
and the S3 console's pages for the objects, which open for a signed-in owner.

An ``s3://`` URI is not a link, and a presigned URL of a report opens the page but none of its relative links (each
resolves to an unsigned URL of an SSE-KMS object, which S3 refuses). The console's URLs are its own deep links as
of 2026-12 (*verify* after console changes: not a documented API). Pure functions.
"""

from __future__ import annotations

import shlex
from urllib.parse import quote

from profstack.jobs.links import console_base


def s3_object_console_url(region: str, bucket: str, key: str) -> str:
    """The S3 console's page of one object (its Open and Download buttons presign for the signed-in user)."""
    return (
        f"{console_base(region)}/s3/object/{quote(bucket, safe='')}?region={region}&bucketType=general"
        f"&prefix={quote(key, safe='')}"
    )


def s3_folder_console_url(region: str, bucket: str, prefix: str) -> str:
    """The S3 console's listing of a folder (a job's report, summary and Perfetto timelines)."""
    return (
        f"{console_base(region)}/s3/buckets/{quote(bucket, safe='')}?region={region}&bucketType=general"
        f"&prefix={quote(prefix, safe='')}&showversions=false"
    )


def open_command(user: str, job: str) -> str:
    """The command that opens a job's report with every link working (run where the user's credentials are)."""
    return f"profstack reports open {shlex.quote(job)} --user {shlex.quote(user)}"


def index_command(user: str) -> str:
    return f"profstack reports index --user {shlex.quote(user)}"
