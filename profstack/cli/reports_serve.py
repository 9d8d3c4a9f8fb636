"""`profstack reports open JOB` and `profstack reports index`: your reports in your browser, every link working.

A report's links are relative (``../index.html``, ``perfetto/rank-0.trace.json.gz``, ``summary.json``, and from the
index every job's ``<job>/report.html``), and every object is SSE-KMS encrypted and readable only with its owner's
credentials. A presigned URL opens one page, but each link in it resolves to an unsigned URL that S3 refuses, and a
page rewritten with presigned links breaks one hop later (the next report's own links) or when the URLs expire. So
the command serves ``reports/<user>/`` on this machine: a small HTTP server on 127.0.0.1 reads each object with your
credentials when the browser asks for it. Every link works, any number of hops (index → report → timeline → back →
another report), for as long as the command runs.

What it lets through: GET and HEAD only; the first path segment is a random 128-bit token (a page of another origin
cannot guess the URL); the Host header must be this server's (DNS rebinding); keys only under ``reports/<user>/`` and
only the files a report is made of (the index, each job's report, summary, system metrics, row file and Perfetto
timelines); the pages go out with their own Content-Security-Policy as a header too, ``no-store``, ``nosniff`` and no
referrer. A timeline downloads as a file (drag it onto ui.perfetto.dev). It stops after ``idle_s`` without a request,
or on Ctrl-C.
"""

from __future__ import annotations

import html
import io
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

from profstack import layout
from profstack.report.html import CSP

#: the files of a job folder the server hands out (the pipeline's own files, partials/ and markers, stay out)
JOB_FILES = {
    "report.html": "text/html; charset=utf-8",
    "summary.json": "application/json",
    "system.json": "application/json",
    "index-row.json": "application/json",
}
TOP_FILES = {"index.html": "text/html; charset=utf-8", "index.json": "application/json"}
TIMELINE_SUFFIX = ".trace.json.gz"
#: `perfetto/<timeline>.open.html`: the page that opens that timeline in the Perfetto UI (perfetto_helper)
HELPER_SUFFIX = ".open.html"
PERFETTO_ORIGIN = "https://ui.perfetto.dev"
#: a report page larger than this is served as it is, without the "open in Perfetto" links
MAX_REWRITTEN_PAGE_BYTES = 64 << 20
CHUNK = 1 << 20
#: stop after this long without a request
IDLE_SECONDS = 30 * 60


class NotServed(Exception):
    """A path that is not one of the user's report files."""


@dataclass(frozen=True)
class Target:
    key: str
    content_type: str
    download_as: str | None = None  # a file name: sent as an attachment
    perfetto_helper: bool = False  # the page that hands the timeline `key` to the Perfetto UI


def resolve(user: str, relative: str) -> Target:
    """The object a request path (after the token) names, or NotServed. `relative` is percent-decoded here."""
    prefix = layout.user_reports_prefix(user)
    path = unquote(relative)
    parts = path.split("/")
    if any(p in ("", ".", "..") or "\\" in p for p in parts[:-1]) or "\\" in parts[-1] or parts[-1] in (".", ".."):
        raise NotServed(path)
    if len(parts) == 1:
        name = parts[0] or "index.html"
        if name in TOP_FILES:
            return Target(prefix + name, TOP_FILES[name])
        raise NotServed(path)
    job = parts[0]
    if not layout.is_segment(job):
        raise NotServed(path)
    if len(parts) == 2:
        name = parts[1] or "report.html"
        if name in JOB_FILES:
            return Target(f"{prefix}{job}/{name}", JOB_FILES[name])
        raise NotServed(path)
    name = parts[-1].removesuffix(HELPER_SUFFIX)
    timeline = name.endswith(TIMELINE_SUFFIX) and layout.is_segment(name)
    if len(parts) == 3 and parts[1] == "perfetto" and timeline:
        if parts[2].endswith(HELPER_SUFFIX):
            return Target(f"{prefix}{job}/perfetto/{name}", "text/html; charset=utf-8", perfetto_helper=True)
        return Target(f"{prefix}{job}/perfetto/{name}", "application/gzip", f"{job}-{name}")
    raise NotServed(path)


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


@dataclass
class ReportSite:
    """reports/<user>/ of `bucket`, read with `s3` (the user's credentials, or the reader role's)."""

    s3: Any
    bucket: str
    user: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    last_request: float = field(default_factory=time.monotonic)
    perfetto_origin: str = field(default_factory=lambda: PERFETTO_ORIGIN)

    def open(self, target: Target) -> tuple[Any, int | None]:
        """The object's body (a stream: read and close it) and length. Raises the client's error (NoSuchKey,
        AccessDenied, ExpiredToken...)."""
        response = self.s3.get_object(Bucket=self.bucket, Key=target.key)
        length = response.get("ContentLength")
        return response["Body"], int(length) if isinstance(length, int) else None


# ------------------------------------------------------------------------------------------ open in Perfetto

#: Perfetto's documented way to open a trace that needs credentials (perfetto.dev/docs/visualization/
#: deep-linking-to-perfetto-ui): open the UI in a new tab, PING until it answers PONG, post the bytes. The page reads
#: the timeline from this server (same origin, the owner's credentials), so no URL of the trace leaves the machine
#: and the bucket needs no CORS rule. A click starts it: browsers open a tab only on a user's gesture.
_HELPER_SCRIPT = """
const ORIGIN = %s;
const name = decodeURIComponent(location.pathname.split('/').pop()).replace(/\\.open\\.html$/, '');
const status = document.getElementById('status');
document.getElementById('go').addEventListener('click', async () => {
  const win = window.open(ORIGIN + '/#!/', '_blank');
  if (!win) {
    status.textContent = 'The browser blocked the new tab: allow pop-ups for this page and click again.';
    return;
  }
  status.textContent = 'Reading ' + name + ' ...';
  const response = await fetch(name);
  if (!response.ok) { status.textContent = 'Could not read the timeline (HTTP ' + response.status + ').'; return; }
  const buffer = await response.arrayBuffer();
  status.textContent = 'Waiting for the Perfetto UI to start ...';
  let answered = false;
  const timer = setInterval(() => win.postMessage('PING', ORIGIN), 50);
  window.addEventListener('message', (event) => {
    if (answered || event.source !== win || event.data !== 'PONG') return;
    answered = true;
    clearInterval(timer);
    win.postMessage({perfetto: {buffer: buffer, title: name, fileName: name}}, ORIGIN);
    status.textContent = 'Sent ' + buffer.byteLength + ' bytes to the Perfetto tab.';
  });
  setTimeout(() => { if (!answered) { clearInterval(timer);
    status.textContent = 'The Perfetto UI did not answer in 60 s: download the file and drag it onto it.'; } }, 60000);
});
"""


def perfetto_helper(name: str, origin: str) -> tuple[bytes, str]:
    """(the page, its Content-Security-Policy): one inline script, allowed by its hash and nothing else."""
    import base64
    import hashlib
    import json

    script = _HELPER_SCRIPT % json.dumps(origin)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; script-src 'sha256-{digest}'; connect-src 'self'; style-src 'unsafe-inline'; "
        "base-uri 'none'; form-action 'none'"
    )
    page = (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>Open in Perfetto: {html.escape(name)}</title><style>body{{font:15px/1.5 system-ui,sans-serif;"
        "margin:40px auto;max-width:680px;padding:0 16px}button{font:inherit;padding:8px 18px;border-radius:8px}"
        "</style></head><body>"
        f'<h1 style="font-size:20px">Open {html.escape(name)} in Perfetto</h1>'
        f"<p>ProfStack reads the timeline with your credentials and hands it to the Perfetto UI "
        f"({html.escape(origin)}) in a new tab: the bytes go from this page to that tab, to no server. Perfetto "
        "may ask whether to trust this page's address: it is this machine's.</p>"
        '<p><button id="go" type="button">Open in Perfetto</button> '
        f'or <a href="{html.escape(name)}" download>download it</a> and drag it onto the Perfetto UI.</p>'
        f'<p id="status" role="status"></p><script>{script}</script></body></html>\n'
    )
    return page.encode(), csp


_TIMELINE_LINK = re.compile(r'(<a href="(perfetto/[A-Za-z0-9._-]+\.trace\.json\.gz)" download>[^<]*</a>)')


def with_perfetto_links(page: bytes) -> bytes:
    """A report page with "open in Perfetto" beside each timeline link (served pages only: the stored report
    cannot run the helper, which needs this server)."""
    text = page.decode("utf-8", errors="replace")
    return _TIMELINE_LINK.sub(
        lambda m: (
            f'{m.group(1)} · <a class="perfetto-open" href="{m.group(2)}{HELPER_SUFFIX}" target="_blank">'
            "open in Perfetto</a>"
        ),
        text,
    ).encode()


def _stream(body: Any) -> Iterator[bytes]:
    try:
        while True:
            data = body.read(CHUNK)
            if not data:
                return
            yield data
    finally:
        body.close()


def _page(title: str, message: str) -> bytes:
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<title>{html.escape(title)}</title></head><body style="font:15px system-ui,sans-serif;margin:40px">'
        f'<h1 style="font-size:20px">{html.escape(title)}</h1><p>{html.escape(message)}</p></body></html>\n'
    ).encode()


_EXPIRED = ("ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired", "InvalidToken")


def failure(exc: BaseException, uri: str, user: str) -> tuple[HTTPStatus, str, str]:
    """(status, title, one line) for the S3 client's error on `uri`."""
    code = _code(exc)
    if code in ("NoSuchKey", "404", "NotFound"):
        return HTTPStatus.NOT_FOUND, "Not there", f"{uri} does not exist (not written for this job)."
    if code in ("AccessDenied", "403", "AllAccessDisabled"):
        why = f"{uri}: your credentials may not read it (only {user}'s ProfStack roles may; see docs/reports.md)."
        return HTTPStatus.FORBIDDEN, "Access denied", why
    if code in _EXPIRED:
        why = "Your AWS session ended: stop this command (Ctrl-C) and run it again."
        return HTTPStatus.UNAUTHORIZED, "Session expired", why
    return HTTPStatus.BAD_GATEWAY, "Could not read it", f"{uri}: {type(exc).__name__}: {exc}"


class ReportHandler(BaseHTTPRequestHandler):
    """GET/HEAD of the user's report files; `site` and `hosts` are set on a subclass per server (`start`)."""

    site: ReportSite
    hosts: frozenset[str] = frozenset()
    server_version = "profstack-reports"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        return  # no access log on the user's terminal

    def _headers(
        self, content_type: str, length: int | None, download_as: str | None = None, *, csp: str = CSP
    ) -> None:
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if content_type.startswith("text/html"):
            self.send_header("Content-Security-Policy", csp)
        if download_as:
            self.send_header("Content-Disposition", f'attachment; filename="{download_as}"')

    def _send(self, status: HTTPStatus, title: str, message: str) -> None:
        body = _page(title, message)
        self.send_response(status)
        self._headers("text/html; charset=utf-8", len(body))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _target(self) -> Target | None:
        """The object this request names, or None (an error page was sent)."""
        if (self.headers.get("Host") or "").lower() not in self.hosts:
            self._send(HTTPStatus.MISDIRECTED_REQUEST, "Wrong host", "This server answers 127.0.0.1 only.")
            return None
        token, _, relative = urlsplit(self.path).path.lstrip("/").partition("/")
        if not secrets.compare_digest(token.encode(), self.site.token.encode()):
            self._send(HTTPStatus.NOT_FOUND, "Not found", "Use the address profstack printed.")
            return None
        try:
            return resolve(self.site.user, relative)
        except (NotServed, layout.LayoutError):
            self._send(HTTPStatus.NOT_FOUND, "Not a report file", f"{unquote(relative)!r} is not one of your reports.")
            return None

    def do_HEAD(self) -> None:
        self.do_GET()

    def _helper(self, target: Target) -> None:
        page, csp = perfetto_helper(target.key.rsplit("/", 1)[-1], self.site.perfetto_origin)
        self.send_response(HTTPStatus.OK)
        self._headers("text/html; charset=utf-8", len(page), csp=csp)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(page)

    def do_GET(self) -> None:
        self.site.last_request = time.monotonic()
        target = self._target()
        if target is None:
            return
        if target.perfetto_helper:
            self._helper(target)
            return
        try:
            body, length = self.site.open(target)
        except Exception as exc:  # the S3 client's errors, shown on the page in one line
            self._send(*failure(exc, f"s3://{self.site.bucket}/{target.key}", self.site.user))
            return
        if target.key.endswith("/report.html") and (length or 0) <= MAX_REWRITTEN_PAGE_BYTES:
            try:
                data = with_perfetto_links(b"".join(_stream(body)))
            except Exception as exc:  # the stream broke: the S3 client's error, as a page
                self._send(*failure(exc, f"s3://{self.site.bucket}/{target.key}", self.site.user))
                return
            body, length = io.BytesIO(data), len(data)
        self.send_response(HTTPStatus.OK)
        self._headers(target.content_type, length, target.download_as)
        self.end_headers()
        if self.command == "HEAD":
            body.close()
            return
        try:
            for data in _stream(body):
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return


@dataclass
class Server:
    site: ReportSite
    httpd: ThreadingHTTPServer

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, relative: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{self.site.token}/{relative}"

    def serve_until_idle(self, idle_s: float, *, poll_s: float = 1.0) -> None:
        """Serve (in this thread) until `idle_s` pass without a request, or KeyboardInterrupt."""
        thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        thread.start()
        try:
            while time.monotonic() - self.site.last_request < idle_s:
                time.sleep(poll_s)
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def start(site: ReportSite, *, port: int = 0) -> Server:
    """A server for `site` on 127.0.0.1:`port` (0: any free port), not yet serving (Server.serve_until_idle)."""
    handler: type[ReportHandler] = type("SiteHandler", (ReportHandler,), {"site": site})
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    bound = int(httpd.server_address[1])
    handler.hosts = frozenset({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    return Server(site, httpd)


def run(
    site: ReportSite,
    relative: str,
    *,
    open_browser: bool,
    port: int = 0,
    idle_s: float = IDLE_SECONDS,
    out: TextIO | None = None,
    opener: Callable[[str], bool] | None = None,
) -> int:
    """Serve `site`, print the page's address (and open it in the browser), until idle or Ctrl-C."""
    out = out or sys.stdout
    server = start(site, port=port)
    url = server.url(relative)
    minutes = max(round(idle_s / 60), 1)
    print(url, file=out)
    print(
        f"profstack: serving your reports (s3://{site.bucket}/{layout.user_reports_prefix(site.user)}) to this "
        f"machine only; every link in them works while this runs. Ctrl-C stops it (it stops by itself after "
        f"{minutes} min without a request).",
        file=sys.stderr,
    )
    if open_browser:
        import webbrowser

        if not (opener or webbrowser.open)(url):
            print("profstack: no browser could be opened; open the address above", file=sys.stderr)
    try:
        server.serve_until_idle(idle_s)
    except KeyboardInterrupt:
        print("profstack: stopped", file=sys.stderr)
    return 0
