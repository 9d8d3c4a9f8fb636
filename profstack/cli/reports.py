"""`profstack reports`: find, open, download and compare your own reports, with your own AWS credentials.

    profstack reports list [--since 7d|DATE] [--family FAMILY] [--json] [--limit N]
    profstack reports open JOB [--no-browser] [--port PORT] [--idle MINUTES] [--print [--expires SECONDS]] [--json]
    profstack reports index [--no-browser] [--port PORT] [--idle MINUTES] [--print [--expires SECONDS]] [--json]
    profstack reports get JOB [DIR] [--json]
    profstack reports diff A B [--html FILE] [--limit N] [--json]
    profstack reports reanalyze JOB [--apply]                      (administrators: profstack/cli/reanalyze.py)
    profstack reports backfill --since WHEN [--until WHEN] [--apply]

Common options: --user USER (default $PROFSTACK_USER), --bucket BUCKET (default $PROFSTACK_TRACE_BUCKET, else the
storage stack's TraceBucketName output), --config PATH, --region REGION. Every key read is under reports/<U>/
(profstack/layout.py), and the trace bucket's policy lets a user's execution role read and list only its own
reports/<U>/ (docs/security.md): another user's jobs are neither listed nor opened, whatever is typed.

From your own machine (outside SageMaker), `--reader` assumes your report reader role: the role the access
policy attached to your IAM identity lets you assume, and no one else's; it lists and reads reports/<U>/ only.
It is found by the TensorBoard stack's export `<prefix>-report-reader-<U>` (or give it: `--role ARN`,
$PROFSTACK_REPORTS_ROLE).

`list` reads reports/<U>/index.json (one request, however many jobs), which the processor rewrites after each
report; without it (no report since the index existed) it lists the job folders and reads each job's row file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from profstack import layout
from profstack.cli import CliError, _aws, missing_aws_extra, reports_serve
from profstack.cli._aws import add_config_argument, aws_errors, load, region_of
from profstack.cli._help import (
    ARN,
    BUCKET,
    BUCKET_ENV,
    DEPRECATED_BUCKET_ENV,
    DIR,
    FILE,
    JOB,
    REGION,
    SECONDS,
    USER,
    WHEN,
    N,
    command,
)
from profstack.cli.diff import add_json_argument, add_limit_argument, print_diff
from profstack.report import index as idx

BUCKET_OUTPUT = "TraceBucketName"
#: `open`: seconds the presigned URL stays valid (SigV4 allows up to 7 days; role sessions end sooner)
URL_EXPIRES_SECONDS = 3600
MAX_URL_EXPIRES_SECONDS = 7 * 24 * 3600
#: what `get` downloads of a job's folder (partials/ and markers are the pipeline's own)
GET_FILES = ("summary.json", "report.html", "system.json", idx.ROW_FILE)
GET_FOLDERS = ("perfetto/",)
MAX_SUMMARY_BYTES = 256 << 20
#: parallel GetObject calls when the index is rebuilt from row files
READERS = 16
_SINCE_RE = re.compile(r"(\d+)([dhw])\Z")


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "reports",
        help="list, open, download and compare your own job reports (your AWS credentials)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=(
            "profstack reports list --user alice --since 7d",
            "profstack reports open --user alice my-training-job",
            "profstack reports ACTION --help",
        ),
    )
    commands = parser.add_subparsers(dest="reports_command", metavar="ACTION", required=True)

    listing = command(
        commands,
        "list",
        help="your jobs, newest first: status, duration, step time, GPU idle, cost",
        examples=(
            "profstack reports list --user alice",
            "profstack reports list --user alice --since 7d --family bert-large",
            "profstack reports list --user alice --since 2026-11-30 --json --limit 0",
        ),
    )
    listing.add_argument("--since", metavar=WHEN, help="only jobs that ended since: 7d, 12h, 2w or a date (UTC)")
    listing.add_argument("--family", metavar="FAMILY", help="only jobs of this family")
    add_json_argument(listing, "print the rows as JSON")
    listing.add_argument("--limit", type=int, default=50, metavar=N, help="rows printed (default 50; 0: all)")
    _common(listing)
    listing.set_defaults(handler=_with_hint(run_list))

    opening = command(
        commands,
        "open",
        help="open a job's report in your browser, every link in it working (served from this machine)",
        description="Serve your reports on 127.0.0.1, read with your credentials as the browser asks, and open the "
        "job's report: its links to the index, the Perfetto timelines, summary.json and your other reports all "
        "work while the command runs (Ctrl-C stops it). --print gives a presigned URL of the page alone instead.",
        examples=(
            "profstack reports open --user alice my-training-job",
            "profstack reports open --user alice my-training-job --no-browser --port 8765",
            "profstack reports open --user alice my-training-job --reader --print --expires 600",
            "profstack reports open --user alice my-training-job --json",
        ),
    )
    opening.add_argument("job", metavar=JOB, help="training job name")
    _serve_options(opening)
    _common(opening)
    opening.set_defaults(handler=_with_hint(run_open))

    indexing = command(
        commands,
        "index",
        help="open your report index in your browser, every link working (served from this machine)",
        description="Serve your reports on 127.0.0.1 as `reports open` does, and open reports/<you>/index.html: "
        "every job's report, summary and timelines open from it. --print gives a presigned URL of the page alone.",
        examples=(
            "profstack reports index --user alice",
            "profstack reports index --user alice --reader --idle 60",
            "profstack reports index --user alice --print",
        ),
    )
    _serve_options(indexing)
    _common(indexing)
    indexing.set_defaults(handler=_with_hint(run_index))

    get = command(
        commands,
        "get",
        help="download a job's summary, report and Perfetto timelines",
        examples=(
            "profstack reports get --user alice my-training-job",
            "profstack reports get --user alice my-training-job ./reports/my-training-job",
        ),
    )
    get.add_argument("job", metavar=JOB, help="training job name")
    get.add_argument("dir", metavar=DIR, nargs="?", type=Path, help="where to (default ./JOB)")
    add_json_argument(get, "print what was downloaded as JSON")
    _common(get)
    get.set_defaults(handler=_with_hint(run_get))

    diff = command(
        commands,
        "diff",
        help="compare two of your jobs by name (as `profstack diff`)",
        examples=(
            "profstack reports diff --user alice job-a job-b",
            "profstack reports diff --user alice job-a job-b --html diff.html --limit 50",
        ),
    )
    diff.add_argument("a", metavar="A", help="the baseline job")
    diff.add_argument("b", metavar="B", help="the job to compare with A")
    diff.add_argument("--html", type=Path, metavar=FILE, help="also write the comparison as an HTML page")
    add_limit_argument(diff)
    add_json_argument(diff, "print the comparison as JSON instead of text")
    _common(diff)
    diff.set_defaults(handler=_with_hint(run_diff))


def _serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-browser", action="store_true", help="serve and print the address, do not start a browser")
    parser.add_argument(
        "--port", type=int, default=0, metavar="PORT", help="local port to serve on (default: any free one)"
    )
    parser.add_argument(
        "--idle",
        type=int,
        default=reports_serve.IDLE_SECONDS // 60,
        metavar="MINUTES",
        help=f"stop after this many minutes without a request (default {reports_serve.IDLE_SECONDS // 60})",
    )
    parser.add_argument(
        "--print",
        action="store_true",
        help="only print a presigned URL of the page (for a browser on another machine; the links in the page "
        "will not open from it)",
    )
    parser.add_argument(
        "--expires",
        type=int,
        default=URL_EXPIRES_SECONDS,
        metavar=SECONDS,
        help=f"with --print: seconds the URL stays valid (default {URL_EXPIRES_SECONDS})",
    )
    add_json_argument(parser, "print {page, url, expires_in} (the presigned URL of --print) as JSON; serves nothing")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar=USER, help="your ProfStack user name (default $PROFSTACK_USER)")
    parser.add_argument(
        "--bucket",
        metavar=BUCKET,
        help=f"the trace bucket (default ${BUCKET_ENV}, else the storage stack's TraceBucketName output)",
    )
    parser.add_argument(
        "--reader",
        action="store_true",
        help="assume your report reader role (from your own machine; found by the stack export "
        "<prefix>-report-reader-<USER>)",
    )
    parser.add_argument("--role", metavar=ARN, help="the reader role to assume (default $PROFSTACK_REPORTS_ROLE)")
    add_config_argument(parser)
    parser.add_argument("--region", metavar=REGION, help="AWS region (default: config, then your AWS setup)")


# ------------------------------------------------------------------------------------------ where


class Place:
    """The caller's reports/<user>/ in the trace bucket, and an S3 client (``session``: an assumed reader role's)."""

    def __init__(self, s3: Any, bucket: str, user: str, region: str | None = None, session: Any = None) -> None:
        self.s3, self.bucket, self.user, self.region, self.session = s3, bucket, user, region, session
        self.prefix = layout.user_reports_prefix(user)

    def job_prefix(self, job: str) -> str:
        try:
            return layout.job_reports_prefix(self.user, job)
        except layout.LayoutError:
            raise CliError(f"'{job}' is not a training job name") from None

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def _user(args: argparse.Namespace) -> str:
    user = args.user or os.environ.get("PROFSTACK_USER")
    if not user:
        raise CliError("which user? pass --user U or set PROFSTACK_USER (your ProfStack user name)")
    if not layout.is_segment(user):
        raise CliError(f"'{user}' is not a ProfStack user name")
    return str(user)


def _stack_bucket(prefix: str, region: str | None) -> str:
    stack = f"{prefix}-storage"
    cloudformation = _aws.make_client("cloudformation", region)
    with aws_errors(f"looking up the trace bucket in stack {stack} (or pass --bucket)"):
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    for output in stacks[0].get("Outputs", []) if stacks else []:
        if output.get("OutputKey") == BUCKET_OUTPUT:
            return str(output["OutputValue"])
    raise CliError(f"stack {stack} has no {BUCKET_OUTPUT} output; pass --bucket")


def reader_export(prefix: str, user: str) -> str:
    """The TensorBoard stack's export naming `user`'s report reader role (stacks/components/user_workspace.py)."""
    return f"{prefix}-report-reader-{user}"


def _reader_arn(prefix: str, user: str, region: str | None) -> str:
    name = reader_export(prefix, user)
    cloudformation = _aws.make_client("cloudformation", region)
    with aws_errors(f"looking up export {name} (or pass --role ARN)"):
        for page in cloudformation.get_paginator("list_exports").paginate():
            for export in page.get("Exports", []):
                if export.get("Name") == name:
                    return str(export["Value"])
    raise CliError(f"no export {name}: is {user} a ProfStack user of this deployment? (or pass --role ARN)")


def reader_session(role_arn: str, user: str, region: str | None) -> Any:
    """A boto3 session as ``role_arn`` (the user's report reader role), assumed with the caller's credentials."""
    import boto3

    sts = _aws.make_client("sts", region)
    with aws_errors(f"assuming {role_arn} (your access policy allows only your own reader role)"):
        creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=f"profstack-reports-{user}"[:64])["Credentials"]
        return boto3.session.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
            region_name=_aws.resolve_region(region),
        )


def bucket_from_environment() -> str | None:
    """$PROFSTACK_TRACE_BUCKET (the name migrated launchers read too); $PROFSTACK_BUCKET, its older spelling, with
    a warning. Both set to different buckets is an error: which one was meant cannot be guessed."""
    current = os.environ.get(BUCKET_ENV) or None
    old = os.environ.get(DEPRECATED_BUCKET_ENV) or None
    if old and current and old != current:
        raise CliError(
            f"${BUCKET_ENV}={current} and ${DEPRECATED_BUCKET_ENV}={old} name different buckets: "
            f"unset ${DEPRECATED_BUCKET_ENV} (the older spelling) or pass --bucket"
        )
    if old and not current:
        print(
            f"profstack: warning: ${DEPRECATED_BUCKET_ENV} is deprecated; set ${BUCKET_ENV} instead "
            "(the same name migrated launchers read)",
            file=sys.stderr,
        )
    return current or old


def _config_naming_the_stacks(args: argparse.Namespace, *, need_bucket: bool) -> Any:
    """The config names the stacks (and the region); without the file, say what to pass instead of the file."""
    from profstack.config import default_config_path

    if need_bucket and Path(args.config) == default_config_path() and not Path(args.config).exists():
        raise CliError(
            f"which trace bucket? pass --bucket BUCKET or set {BUCKET_ENV} (the storage stack's TraceBucketName "
            f"output; your administrator has it), or --config PATH to read it from the deployed stack "
            f"(no {args.config} in {Path.cwd()})"
        )
    return load(args)


def place(args: argparse.Namespace) -> Place:
    """--bucket (or $PROFSTACK_TRACE_BUCKET) needs no config; otherwise the config names the stacks and region.
    With --reader / --role, S3 is read as the user's report reader role."""
    user = _user(args)
    bucket = args.bucket or bucket_from_environment()
    region = args.region
    role = args.role or os.environ.get("PROFSTACK_REPORTS_ROLE")
    if not bucket or args.reader:  # the config (read once) names the stacks and the region
        config = _config_naming_the_stacks(args, need_bucket=not bucket)
        region = region_of(args, config)
        bucket = bucket or _stack_bucket(config.prefix, region)
        if args.reader and not role:
            role = _reader_arn(config.prefix, user, region)
    if role:
        session = reader_session(str(role), user, region)
        with aws_errors("s3 client"):
            return Place(session.client("s3"), str(bucket), user, region, session)
    return Place(_aws.make_client("s3", region), str(bucket), user, region)


def _missing(exc: Exception) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(exc, ClientError) and str(exc.response.get("Error", {}).get("Code")) in {
        "NoSuchKey",
        "404",
        "NotFound",
    }


def _read(where: Place, key: str, limit: int) -> bytes | None:
    """An object's bytes (at most `limit`), None when it does not exist."""
    with aws_errors(f"reading {where.uri(key)}"):
        try:
            response = where.s3.get_object(Bucket=where.bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return None
            raise
        body = response["Body"]
        try:
            data: bytes = body.read(limit + 1)
        finally:
            body.close()
    if len(data) > limit:
        raise CliError(f"{where.uri(key)} is larger than {limit} bytes")
    return data


DENIED_HINT = (
    "only {user}'s ProfStack execution role (IAM path /<prefix>/users/{user}/, tag profstack:user={user}) may read "
    "reports/{user}/: run this where you work as it (your SageMaker Studio space), see docs/reports.md"
)


def _with_hint(handler: Any) -> Any:
    """An AccessDenied on the user's own prefix says which credentials the bucket admits (one line still)."""

    def run(args: argparse.Namespace) -> int:
        try:
            result: int = handler(args)
        except CliError as exc:
            if "AccessDenied" not in str(exc):
                raise
            user = args.user or os.environ.get("PROFSTACK_USER") or "<you>"
            raise CliError(f"{exc} ({DENIED_HINT.format(user=user)})") from None
        return result

    return run


# ------------------------------------------------------------------------------------------ list


def parse_since(text: str, now: datetime) -> datetime:
    """`7d`, `12h`, `2w`, or an ISO date or date-time (UTC unless it says otherwise)."""
    match = _SINCE_RE.fullmatch(text.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return now - timedelta(**{{"d": "days", "h": "hours", "w": "weeks"}[unit]: amount})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--since {text!r}: use 7d, 12h, 2w, or a date like 2026-11-30") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _folders(where: Place) -> Iterator[str]:
    paginator = where.s3.get_paginator("list_objects_v2")
    with aws_errors(f"listing {where.uri(where.prefix)}"):
        for page in paginator.paginate(Bucket=where.bucket, Prefix=where.prefix, Delimiter="/"):
            for folder in page.get("CommonPrefixes", []):
                job = str(folder.get("Prefix", ""))[len(where.prefix) :].rstrip("/")
                if layout.is_segment(job):
                    yield job


def rows_from_folders(where: Place) -> tuple[list[dict[str, Any]], int]:
    """Each job folder's row file (read in parallel): (rows, job folders without one)."""
    jobs = list(_folders(where))

    def read(job: str) -> bytes | None:
        return _read(where, where.job_prefix(job) + idx.ROW_FILE, idx.MAX_ROW_BYTES)

    rows: list[dict[str, Any]] = []
    without = 0
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        for data in pool.map(read, jobs):
            if data is None:
                without += 1
                continue
            try:
                rows.extend(idx.parse_row_file(data))
            except idx.IndexFormatError:
                without += 1
    return idx.merge_rows(rows), without


def load_rows(where: Place) -> tuple[list[dict[str, Any]], str]:
    """(rows newest first, a note for stderr or ""): the index, else the row files."""
    data = _read(where, where.prefix + idx.INDEX_JSON, idx.MAX_INDEX_BYTES)
    if data is not None:
        try:
            return idx.parse_rows(data), ""
        except idx.IndexFormatError as exc:
            note = f"{where.uri(where.prefix + idx.INDEX_JSON)} unreadable ({exc}); listed from the job folders"
    else:
        note = ""
    rows, without = rows_from_folders(where)
    if without:
        note = (note + "; " if note else "") + (
            f"{without} job folder(s) have no index row (reported before the index existed, or being written): "
            "`profstack reports get JOB` still fetches them"
        )
    return rows, note


def format_table(rows: list[dict[str, Any]]) -> str:
    cells = [idx.HEADERS, *(idx.text_cells(r) for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(idx.HEADERS) - 1)]
    lines = []
    for row in cells:
        head = "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
        lines.append(f"{head}  {row[-1][:120]}".rstrip())
    return "\n".join(lines) + "\n"


def run_list(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise CliError("--limit must be 0 (all) or more")
    now = datetime.now(UTC)
    since = parse_since(args.since, now) if args.since else None
    where = place(args)
    rows, note = load_rows(where)
    rows = idx.filter_rows(rows, since=since, family=args.family)
    shown = rows[: args.limit] if args.limit else rows
    if note:
        print(f"profstack: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no reports under {where.uri(where.prefix)}" + (" matching the filters" if since or args.family else ""))
        return 0
    print(format_table(shown), end="")
    if len(shown) < len(rows):
        print(f"... {len(rows) - len(shown)} more (--limit 0 lists all)")
    return 0


# ------------------------------------------------------------------------------------------ open, get


def _exists(where: Place, key: str) -> bool:
    with aws_errors(f"looking for {where.uri(key)}"):
        try:
            where.s3.head_object(Bucket=where.bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return False
            raise
    return True


def _no_report(where: Place, job: str) -> CliError:
    return CliError(
        f"no report for job '{job}' under {where.uri(where.prefix)} (your reports only; "
        "`profstack reports list` shows them)"
    )


def presigner(region: str | None, session: Any = None) -> Any:
    """An S3 client that presigns with SigV4: S3 refuses SigV2 URLs to SSE-KMS objects (every report is one).
    ``session``: the reader role's, when the reports are read as it."""
    from botocore.config import Config

    if session is not None:
        with aws_errors("s3 client"):
            return session.client("s3", config=Config(signature_version="s3v4"))
    try:
        import boto3
    except ModuleNotFoundError:  # pragma: no cover - the aws extra is there whenever make_client worked
        raise CliError(missing_aws_extra()) from None
    with aws_errors("s3 client"):
        session = boto3.session.Session(region_name=_aws.resolve_region(region))
        return session.client("s3", config=Config(signature_version="s3v4"))


def _presigned(where: Place, key: str, expires: int) -> str:
    with aws_errors("presigning the URL"):
        return str(
            presigner(where.region, where.session).generate_presigned_url(
                "get_object",
                Params={"Bucket": where.bucket, "Key": key, "ResponseContentType": "text/html; charset=utf-8"},
                ExpiresIn=expires,
            )
        )


def _check_serve_args(args: argparse.Namespace) -> None:
    if not 1 <= args.expires <= MAX_URL_EXPIRES_SECONDS:
        raise CliError(f"--expires must be 1 to {MAX_URL_EXPIRES_SECONDS} seconds")
    if not 0 <= args.port <= 65535:
        raise CliError("--port must be 0 (any free port) to 65535")
    if args.idle < 1:
        raise CliError("--idle must be at least 1 minute")
    if args.print and args.no_browser:
        raise CliError("--print and --no-browser do not go together: --print serves nothing")


def _open_page(args: argparse.Namespace, where: Place, key: str, relative: str) -> int:
    """Serve reports/<user>/ and open `relative` (profstack/cli/reports_serve.py), or with --print only presign
    the page."""
    if args.json:
        url = _presigned(where, key, args.expires)
        print(json.dumps({"page": where.uri(key), "url": url, "expires_in": args.expires}, indent=2))
        return 0
    if args.print:
        print(_presigned(where, key, args.expires))
        print(
            "profstack: note: that URL opens this page only; its links (index, timelines, other reports) need "
            "`profstack reports open` or `profstack reports index` on a machine with your browser",
            file=sys.stderr,
        )
        return 0
    site = reports_serve.ReportSite(where.s3, where.bucket, where.user)
    return reports_serve.run(site, relative, open_browser=not args.no_browser, port=args.port, idle_s=args.idle * 60)


def run_open(args: argparse.Namespace) -> int:
    _check_serve_args(args)
    where = place(args)
    key = where.job_prefix(args.job) + "report.html"
    if not _exists(where, key):
        raise _no_report(where, args.job)
    return _open_page(args, where, key, f"{args.job}/report.html")


def run_index(args: argparse.Namespace) -> int:
    _check_serve_args(args)
    where = place(args)
    key = where.prefix + idx.INDEX_HTML
    if not _exists(where, key):
        raise CliError(
            f"no report index at {where.uri(key)} yet (it is written with your first report after the upgrade); "
            "`profstack reports list` lists the job folders"
        )
    return _open_page(args, where, key, idx.INDEX_HTML)


def _local(base: Path, relative: str) -> Path:
    """`relative` (a key below the job's folder) as a path under `base`; never outside it."""
    parts = PurePosixPath(relative).parts
    if not parts or any(p in {"", ".", ".."} or "\\" in p for p in parts):
        raise CliError(f"refusing to write {relative!r} outside {base}")
    return base.joinpath(*parts)


def job_keys(where: Place, job: str) -> list[tuple[str, int]]:
    """(key, size) of what `get` downloads: the fixed files and the Perfetto timelines."""
    prefix = where.job_prefix(job)
    found: list[tuple[str, int]] = []
    paginator = where.s3.get_paginator("list_objects_v2")
    with aws_errors(f"listing {where.uri(prefix)}"):
        for page in paginator.paginate(Bucket=where.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                name = str(item["Key"])[len(prefix) :]
                if name in GET_FILES or (name.startswith(GET_FOLDERS) and name.endswith(".trace.json.gz")):
                    found.append((str(item["Key"]), int(item.get("Size", 0))))
    return found


def run_get(args: argparse.Namespace) -> int:
    where = place(args)
    prefix = where.job_prefix(args.job)
    keys = job_keys(where, args.job)
    if not any(k.endswith("/summary.json") for k, _ in keys):
        raise _no_report(where, args.job)
    target: Path = args.dir or Path(args.job)
    total = 0
    for key, size in keys:
        path = _local(target, key[len(prefix) :])
        path.parent.mkdir(parents=True, exist_ok=True)
        with aws_errors(f"downloading {where.uri(key)}"):
            where.s3.download_file(where.bucket, key, str(path))
        total += size
    timelines = sorted(k for k, _ in keys if "/perfetto/" in k)
    if args.json:
        files = [str(target / key[len(prefix) :]) for key, _ in keys]
        print(json.dumps({"job": args.job, "dir": str(target), "bytes": total, "files": files}, indent=2))
        return 0
    print(f"{len(keys)} file(s), {total:,} bytes -> {target}/")
    print(f"  report:  {target / 'report.html'}")
    print(f"  summary: {target / 'summary.json'}")
    for key in timelines:
        print(f"  timeline: {target / key[len(prefix) :]}  (drag into https://ui.perfetto.dev)")
    if not timelines:
        print("  no trimmed timelines for this job (its summary says why, if it has traces)")
    return 0


# ------------------------------------------------------------------------------------------ diff


def fetch_summary(where: Place, job: str) -> dict[str, Any]:
    key = where.job_prefix(job) + "summary.json"
    data = _read(where, key, MAX_SUMMARY_BYTES)
    if data is None:
        raise _no_report(where, job)
    try:
        summary = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{where.uri(key)}: not a readable summary ({exc})") from None
    if not isinstance(summary, Mapping) or "schema_version" not in summary or "ranks" not in summary:
        raise CliError(f"{where.uri(key)}: not a ProfStack summary")
    return dict(summary)


def run_diff(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1")
    from profstack.analysis.diff import diff_summaries

    where = place(args)
    a, b = fetch_summary(where, args.a), fetch_summary(where, args.b)
    diff = diff_summaries(a, b, a_label=args.a, b_label=args.b, limit=args.limit)
    print_diff(diff, html=args.html, as_json=args.json)
    return 0
