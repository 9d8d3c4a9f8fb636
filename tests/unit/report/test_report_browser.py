"""Render one report in headless Chromium and check that a real, non-blank screenshot comes out."""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from profstack.report import render_html
from scripts.screenshot_report import CHROMIUM_ARGS, find_chromium, screenshot

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"
BROWSER = find_chromium()

# CI installs Chromium (.ci/run), so there a missing browser is a failure, not a skip.
_MISSING = "headless Chromium not installed (apt-get install -y chromium; see scripts/screenshot_report.py)"
if BROWSER is None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true but {_MISSING}")

pytestmark = [pytest.mark.browser, pytest.mark.skipif(BROWSER is None, reason=_MISSING)]


def _png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG into raw scanlines (all five filter types undone)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8
            channels = {2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        filt, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if filt == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif filt == 2:  # Up
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif filt == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + (left + prev[i]) // 2) & 0xFF
        elif filt == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b, c = prev[i], prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = bytes(line)
        rows.append(prev)
    return width, height, rows


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    # GIVEN a report rendered from the example summary
    report = tmp_path / "report.html"
    report.write_text(render_html(json.loads(FIXTURE.read_text())), encoding="utf-8")

    # WHEN headless Chromium, driven by Playwright, screenshots the whole page (no network)
    shot = screenshot(report, tmp_path / "report.png", width=1280)

    # THEN the page raised no console error (scripts, Content-Security-Policy) and the PNG is the whole
    # page, not the window: as wide as asked and as tall as the document
    assert shot.console_errors == ()
    width, height, rows = _png_rows(shot.path.read_bytes())
    assert (width, height) == (1280, shot.height)
    assert height > 2000
    # AND it is not blank: many distinct colours, dark text pixels
    colours: set[bytes] = set()
    dark = 0
    for row in rows[::7]:
        for x in range(0, len(row) - 3, 4 * 3):
            px = row[x : x + 3]
            colours.add(px)
            dark += sum(px) < 200
    assert len(colours) > 50
    assert dark > 100


#: the panels of summary schema 1.2 (class on the card -> what must be drawn in it)
NEW_PANELS = {
    "p-util-ranks": "svg.heat rect",
    "p-timelines": "a[href$='.trace.json.gz']",
    "p-gpu-time": "svg.timechart polygon",
    "p-cpu-time": "svg.timechart polygon",
    "p-steps": ".strip .strip-track i",
    "p-memory": "svg.timechart polygon",
    "p-graphs": "table tbody tr",
    "p-annotations": ".minihist svg rect",
    "p-cpu-ops": "table tbody tr",
}


@pytest.mark.slow
def test_every_new_panel_is_drawn_in_the_browser(tmp_path: Path) -> None:
    # GIVEN one report over real traces that exercise every new panel: NCCL ranks, a CUDA-graph trace, a
    # GPU profile_memory trace and a CPU trace with few steps (summary.timelines as the CLI writes it)
    from playwright.sync_api import sync_playwright

    from profstack.analysis import AnalysisOptions, FileTraceSource, analyze
    from tests.conftest import TRACES_DIR

    files = [
        "hta/trace_filter/sampled_rank-0.json.gz",
        "hta/trace_diff/test/test.json.gz",
        "hta/df_index_resolver/df_index_resolver.json.gz",
    ]
    summary = dict(
        analyze([FileTraceSource(TRACES_DIR / f) for f in files], AnalysisOptions(merge_rank_files=False)).summary
    )
    summary["timelines"] = [
        {"file": "perfetto/rank-0.trace.json.gz", "source": files[0], "rank": 0, "window": "median", "steps": [551],
         "events": 10, "max_events": 1000, "dropped": {"cpu": 5}, "moved_to_overlap_tracks": 0}
    ]  # fmt: skip
    report = tmp_path / "report.html"
    report.write_text(render_html(summary), encoding="utf-8")
    errors: list[str] = []
    # WHEN Chromium loads it
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=BROWSER, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(report.resolve().as_uri(), wait_until="load")
            found = {
                cls: page.evaluate(
                    """([cls, sel]) => [...document.querySelectorAll('.' + cls)].map(card => {
                        const head = card.querySelector('h3, h2') || card.previousElementSibling;
                        const drawn = [...card.querySelectorAll(sel)].filter(e => {
                            const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; });
                        return {title: head ? head.textContent.trim() : '', drawn: drawn.length};
                    })""",
                    [cls, sel],
                )
                for cls, sel in NEW_PANELS.items()
            }
        finally:
            browser.close()
    # THEN no console error, and every new panel has a heading and something visibly drawn in it
    assert errors == []
    for cls, cards in found.items():
        assert cards, f"no {cls} panel"
        assert any(c["title"] and c["drawn"] > 0 for c in cards), (cls, cards)
