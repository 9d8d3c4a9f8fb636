"""Every link in a report and the index opens for its owner (issue 45 item 3): `profstack reports open|index` serve
reports/<user>/ on 127.0.0.1, read with the owner's credentials (moto S3 here), and headless Chromium follows each
link the way a user does, hop after hop: index -> report -> timeline, summary.json, back to the index -> another
report. Nothing outside the owner's reports is served."""

from __future__ import annotations

import gzip
import http.client
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from moto import mock_aws

from lambdas.trace_processor import report_index
from profstack import layout
from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.cli import main, reports_serve
from profstack.report import index as idx
from profstack.report import render_html
from tests.conftest import TRACES_DIR
from tests.unit.report.test_report_browser import BROWSER

BUCKET = "profstack-traces-links"
NOW = datetime.now(UTC).replace(microsecond=0)
TRACES = [TRACES_DIR / "hta" / "trace_filter" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]

pytestmark = pytest.mark.skipif(BROWSER is None, reason="headless Chromium not installed")


def _summary() -> dict[str, Any]:
    summary = dict(analyze(discover_sources(TRACES), AnalysisOptions(top_k=5)).summary)
    summary["timelines"] = [
        {"file": f"perfetto/rank-{r}.trace.json.gz", "source": TRACES[r].name, "rank": r, "window": "median",
         "steps": [551], "events": 10, "max_events": 1000, "dropped": {}, "moved_to_overlap_tracks": 0}
        for r in (0, 1)
    ]  # fmt: skip
    return summary


def _publish(s3: Any, summary: dict[str, Any], user: str, job: str, hours_ago: float) -> None:
    """What the processor leaves for a job: the page (with its index link), summary, timelines, row and index."""
    prefix = layout.job_reports_prefix(user, job)
    page = idx.with_index_link(render_html({**summary, "job_name": job}))
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}report.html", Body=page.encode(), ContentType="text/html")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}summary.json", Body=json.dumps(summary).encode())
    for r in (0, 1):
        body = gzip.compress(json.dumps({"traceEvents": [], "rank": r, "job": job}).encode())
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}perfetto/rank-{r}.trace.json.gz", Body=body)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}partials/00000/summary.json", Body=b"{}")
    row = idx.index_row(
        summary, job=job, status="Completed", ended_at=NOW - timedelta(hours=hours_ago), family=job.rsplit("-", 1)[0]
    )
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}{idx.ROW_FILE}", Body=idx.dumps(row))
    rows, etag = report_index.commit_row(s3, BUCKET, user, row)
    report_index.write_page(s3, BUCKET, user, rows, etag)


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return _summary()


@pytest.fixture
def s3(aws_credentials: None, monkeypatch: pytest.MonkeyPatch, summary: dict[str, Any]) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("PROFSTACK_TRACE_BUCKET", BUCKET)
    monkeypatch.delenv("PROFSTACK_BUCKET", raising=False)
    monkeypatch.setenv("PROFSTACK_USER", "alice")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        _publish(client, summary, "alice", "bert-1", hours_ago=20)
        _publish(client, summary, "alice", "bert-2", hours_ago=2)
        _publish(client, summary, "bob", "bob-secret-1", hours_ago=1)
        yield client


class _Served:
    """`profstack reports ... --no-browser` in a thread, serving until the test ends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.stop = threading.Event()
        self.servers: list[reports_serve.Server] = []
        served = self

        def serve_until_stopped(self: reports_serve.Server, idle_s: float, *, poll_s: float = 1.0) -> None:
            served.servers.append(self)
            thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            thread.start()
            served.stop.wait(60)
            self.close()

        monkeypatch.setattr(reports_serve.Server, "serve_until_idle", serve_until_stopped)
        self.capsys = capsys

    def start(self, argv: list[str]) -> str:
        thread = threading.Thread(target=main, args=(argv,), daemon=True)
        thread.start()
        for _ in range(200):
            if self.servers:
                break
            threading.Event().wait(0.02)
        assert self.servers, self.capsys.readouterr()
        return self.capsys.readouterr().out.strip().splitlines()[0]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[_Served]:
    server = _Served(monkeypatch, capsys)
    yield server
    server.stop.set()


def _crawl(start: str, max_pages: int = 12) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Follow every link from `start` in headless Chromium, as a user clicks them: pages are loaded and their links
    read back from the DOM (resolved by the browser); a download is started by clicking its link on the page that
    holds it. Returns what each URL gave, and the links that leave the server (checked apart)."""
    from playwright.sync_api import sync_playwright

    from scripts.screenshot_report import CHROMIUM_ARGS

    origin = "{0.scheme}://{0.netloc}".format(urlsplit(start))
    seen: dict[str, dict[str, Any]] = {}
    came_from: dict[str, tuple[str, str]] = {}  # url -> (the page linking it, the href as written there)
    outside: list[str] = []
    queue = [start]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=BROWSER, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_context(accept_downloads=True).new_page()
            while queue and sum(r["kind"] == "page" for r in seen.values()) < max_pages:
                url = queue.pop(0)
                if url.endswith(".gz"):
                    holder, written = came_from[url]
                    page.goto(holder)
                    with page.expect_download() as download:
                        page.click(f'a[href="{written}"]')
                    seen[url] = {
                        "kind": "download",
                        "name": download.value.suggested_filename,
                        "bytes": Path(download.value.path()).read_bytes(),
                    }
                    continue
                response = page.goto(url)
                assert response is not None
                kind = "page" if "text/html" in response.headers.get("content-type", "") else "file"
                seen[url] = {"kind": kind, "status": response.status, "title": page.title(), "body": response.body()}
                if kind != "page":
                    continue
                links = page.eval_on_selector_all(
                    "a[href]",
                    "a => a.map(x => [new URL(x.getAttribute('href'), document.baseURI).href, x.getAttribute('href')])",
                )
                for href, written in links:
                    target = href.split("#", 1)[0]
                    if not target.startswith(origin):
                        outside.append(href)
                    elif target not in seen and target not in queue and target != url:
                        queue.append(target)
                        came_from[target] = (url, written)
        finally:
            browser.close()
    return seen, outside


def test_from_the_index_every_link_opens_hop_after_hop(s3: Any, served: _Served) -> None:
    # GIVEN alice's reports as the processor writes them (pages with relative links, SSE-KMS in a real bucket)
    # WHEN she runs `profstack reports index` and her browser follows every link, page after page
    start = served.start(["reports", "index", "--no-browser"])
    assert start.startswith("http://127.0.0.1:")
    assert start.endswith("/index.html")
    visited, outside = _crawl(start)

    # THEN every page and file answered, read from her reports/alice/ with her credentials
    pages = {urlsplit(u).path.split("/", 2)[2]: r for u, r in visited.items() if r["kind"] == "page"}
    assert {"index.html", "bert-1/report.html", "bert-2/report.html"} <= set(pages)
    assert all(r["status"] == 200 for r in visited.values() if r["kind"] != "download")
    assert pages["bert-2/report.html"]["title"] == "Profile report: bert-2"
    # AND the index opened each job's summary.json, and each report its two timelines, downloaded as files
    files = {urlsplit(u).path.split("/", 2)[2]: r for u, r in visited.items() if r["kind"] != "page"}
    assert json.loads(files["bert-1/summary.json"]["body"])["schema_version"]
    downloads = {k: r for k, r in files.items() if r["kind"] == "download"}
    assert set(downloads) == {f"bert-{j}/perfetto/rank-{r}.trace.json.gz" for j in (1, 2) for r in (0, 1)}
    for key, r in downloads.items():
        assert json.loads(gzip.decompress(r["bytes"]))["job"] == key.split("/")[0]
        assert r["name"] == key.replace("/perfetto/", "-")
    # AND nothing of bob's, and the only links that leave the server are https console links
    assert not any("bob" in u for u in visited)
    assert all(h.startswith("https://") and ".console.aws.amazon.com/" in h for h in outside), outside


def test_open_serves_the_report_and_its_link_back_to_the_index(s3: Any, served: _Served) -> None:
    # WHEN alice opens one report
    start = served.start(["reports", "open", "bert-1", "--no-browser"])
    visited, _ = _crawl(start, max_pages=2)
    # THEN the report, then the index it links (one folder up), both served
    paths = [urlsplit(u).path.split("/", 2)[2] for u, r in visited.items() if r["kind"] == "page"]
    assert paths[:2] == ["bert-1/report.html", "index.html"]


def _raw(url: str, path: str, host: str | None = None) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host or parts.netloc)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()


def test_only_the_owners_report_files_are_served(s3: Any, served: _Served) -> None:
    start = served.start(["reports", "index", "--no-browser"])
    token = urlsplit(start).path.split("/")[1]
    # WHEN requests are crafted by hand: another user's files, the pipeline's own files, a wrong token or host
    asked = {
        "bob": _raw(start, f"/{token}/../bob/bob-secret-1/report.html"),
        "bob-encoded": _raw(start, f"/{token}/..%2Fbob/bob-secret-1/report.html"),
        "partial": _raw(start, f"/{token}/bert-1/partials/00000/summary.json"),
        "token": _raw(start, "/not-the-token/index.html"),
        "host": _raw(start, f"/{token}/index.html", host="evil.example:80"),
        "missing": _raw(start, f"/{token}/bert-9/report.html"),
        "ok": _raw(start, f"/{token}/bert-1/report.html"),
    }
    # THEN only alice's report files answer, and nothing of bob's is in any answer
    assert asked["ok"][0] == 200
    assert {k: s for k, (s, _) in asked.items() if k != "ok"} == {
        "bob": 404, "bob-encoded": 404, "partial": 404, "token": 404, "host": 421, "missing": 404,
    }  # fmt: skip
    assert "does not exist" in asked["missing"][1]
    assert not any("bob-secret" in body for k, (_, body) in asked.items() if k not in {"bob", "bob-encoded"})


def test_an_s3_refusal_is_a_page_saying_why(s3: Any, served: _Served, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    start = served.start(["reports", "index", "--no-browser"])
    token = urlsplit(start).path.split("/")[1]
    # GIVEN S3 refuses (her role lost access) and then her session expires
    for code, status, said in (("AccessDenied", 403, "may not read it"), ("ExpiredToken", 401, "run it again")):

        def refuse(self: reports_serve.ReportSite, target: reports_serve.Target, code: str = code) -> Any:
            raise ClientError({"Error": {"Code": code, "Message": "no"}}, "GetObject")

        monkeypatch.setattr(reports_serve.ReportSite, "open", refuse)
        # WHEN the browser asks for a page THEN a page that says what happened and what to do
        got, body = _raw(start, f"/{token}/bert-1/report.html")
        assert (got, said in body) == (status, True)


def test_the_email_gives_links_that_open_and_the_exact_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex
    from urllib.parse import parse_qs

    from lambdas.trace_processor.job import JobContext
    from lambdas.trace_processor.notification import notification_text
    from profstack.cli import reports as reports_cli

    # GIVEN alice's job ended and its report was written
    ctx = JobContext(
        job="bert-2", status="Completed", user="alice", trace_bucket=BUCKET, end_time_s=0.0, tensorboard=None,
        region="eu-west-1",
    )  # fmt: skip
    # WHEN the e-mail is written
    _, body = notification_text(ctx, {"findings": []}, f"s3://{BUCKET}/reports/alice/bert-2/report.html")
    lines = body.splitlines()
    # THEN it says how to open the report and the index with every link working: commands the CLI accepts as is
    opened = [line.split(": ", 1)[1] for line in lines if line.startswith(("Open the report", "All your reports"))]
    assert opened == ["profstack reports open bert-2 --user alice", "profstack reports index --user alice"]
    seen: list[Any] = []
    monkeypatch.setattr(reports_cli, "place", lambda args: seen.append(args) or (_ for _ in ()).throw(SystemExit(0)))
    for command in opened:
        with pytest.raises(SystemExit):
            main(shlex.split(command)[1:])
    assert [(a.reports_command, a.user) for a in seen] == [("open", "alice"), ("index", "alice")]
    # AND S3 console pages that open for her signed in (https links, the right region and keys), never an s3://
    # URI alone as the way in
    console = [
        w for line in lines for w in line.split() if w.startswith("https://eu-west-1.console.aws.amazon.com/s3/")
    ]
    prefixes = [parse_qs(urlsplit(u).query)["prefix"][0] for u in console]
    assert prefixes == ["reports/alice/bert-2/report.html", "reports/alice/bert-2/", "reports/alice/index.html"]
    assert all(parse_qs(urlsplit(u).query)["region"] == ["eu-west-1"] for u in console)
    assert not any(line.startswith("All your reports: s3://") for line in lines)


#: a stand-in for ui.perfetto.dev speaking its postMessage protocol (PING -> PONG, then {perfetto: {...}})
STUB_PERFETTO = b"""<!DOCTYPE html><html><head><title>stub perfetto</title></head><body><script>
window.addEventListener('message', (e) => {
  if (e.data === 'PING') { e.source.postMessage('PONG', e.origin); return; }
  if (e.data && e.data.perfetto) {
    const p = e.data.perfetto, head = new Uint8Array(p.buffer.slice(0, 2));
    document.title = ['got', p.buffer.byteLength, head[0], head[1], p.fileName, e.origin].join(' ');
  }
});
</script></body></html>"""


@pytest.fixture
def stub_perfetto(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Stub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(STUB_PERFETTO)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setattr(reports_serve, "PERFETTO_ORIGIN", origin)
    yield origin
    httpd.shutdown()
    httpd.server_close()


def test_a_timeline_opens_in_perfetto_from_the_served_report(s3: Any, served: _Served, stub_perfetto: str) -> None:
    from playwright.sync_api import sync_playwright

    from scripts.screenshot_report import CHROMIUM_ARGS

    # GIVEN alice's report served by `profstack reports open` (the stored page has no such link: it cannot run
    # the helper, which needs the server)
    start = served.start(["reports", "open", "bert-1", "--no-browser"])
    stored = s3.get_object(Bucket=BUCKET, Key="reports/alice/bert-1/report.html")["Body"].read().decode()
    assert "open in Perfetto" not in stored
    size = s3.head_object(Bucket=BUCKET, Key="reports/alice/bert-1/perfetto/rank-0.trace.json.gz")["ContentLength"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=BROWSER, args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            page = context.new_page()
            errors: list[str] = []
            context.on("weberror", lambda e: errors.append(str(e.error)))
            page.goto(start)
            assert page.locator("a.perfetto-open").count() == 2
            # WHEN she clicks "open in Perfetto" beside rank 0's timeline, then the button on the page it opens
            with context.expect_page() as helper_page:
                page.click('a.perfetto-open[href="perfetto/rank-0.trace.json.gz.open.html"]')
            helper = helper_page.value
            helper.wait_for_load_state()
            with context.expect_page() as perfetto_page:
                helper.click("#go")
            perfetto = perfetto_page.value
            perfetto.wait_for_function("document.title.startsWith('got')", timeout=15_000)
            got = perfetto.title().split(" ")
            status = helper.locator("#status").text_content()
        finally:
            browser.close()
    # THEN the Perfetto tab received the timeline's bytes (gzip, read with her credentials through the server) and
    # its name, posted by the page at 127.0.0.1, whose one script ran under its hash-only policy
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(start))
    assert got == ["got", str(size), "31", "139", "rank-0.trace.json.gz", origin]
    assert status == f"Sent {size} bytes to the Perfetto tab."
    assert errors == []
