"""Render one report in headless Chromium and check that a real, non-blank screenshot comes out."""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from profstack.report import render_html
from scripts.screenshot_report import find_chromium, screenshot

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
