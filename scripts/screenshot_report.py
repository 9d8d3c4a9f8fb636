"""Screenshot a whole HTML report in headless Debian Chromium, driven by Playwright.

    python -m scripts.screenshot_report REPORT.html OUT.png [--width 1400] [--scheme light|dark]

The screenshot covers the full page, not the window. Playwright drives the system Chromium
(`/usr/bin/chromium`, Debian's package: `apt-get install chromium`); it never downloads a browser.
Console errors on the page (a script error, a Content-Security-Policy violation) are printed and
make the exit status 1, so a report that breaks in a browser does not pass unnoticed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

# The flags the workplace's probe uses: no sandbox as root, no network chatter from the browser.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Shot:
    path: Path
    width: int
    height: int  # CSS pixels of the whole page
    console_errors: tuple[str, ...]


def screenshot(report: Path, out: Path, *, width: int = 1400, scheme: str = "light") -> Shot:
    """Render `report` at `width` CSS pixels in the `scheme` colour scheme (light or dark, the page's
    prefers-color-scheme) and save a PNG of the full page to `out`."""
    from playwright.sync_api import sync_playwright

    browser_path = find_chromium()
    if browser_path is None:
        raise RuntimeError("headless Chromium not installed (apt-get install -y chromium)")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(report.resolve().as_uri(), wait_until="load")
            height = int(page.evaluate("document.documentElement.scrollHeight"))
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        finally:
            browser.close()
    return Shot(out, width, height, tuple(errors))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.screenshot_report", description=__doc__)
    parser.add_argument("report", type=Path, help="the HTML report")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1400, help="page width in CSS pixels (default 1400)")
    parser.add_argument("--scheme", choices=["light", "dark"], default="light", help="colour scheme (default light)")
    args = parser.parse_args(argv)
    shot = screenshot(args.report, args.out, width=args.width, scheme=args.scheme)
    print(f"{shot.path} ({shot.width}x{shot.height}, whole page)")
    for error in shot.console_errors:
        print(f"console error: {error}", file=sys.stderr)
    return 1 if shot.console_errors else 0


if __name__ == "__main__":
    sys.exit(main())
