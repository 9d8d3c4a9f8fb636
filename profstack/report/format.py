"""Escaping and number formatting for the HTML report. Every trace-supplied string goes through `esc`."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any


def esc(value: object) -> str:
    """HTML-escape anything (quotes included, so the result is safe inside attributes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def get(obj: object, *path: str | int) -> Any:
    """Walk nested mappings/lists; None when any step is missing or of the wrong type."""
    cur: Any = obj
    for key in path:
        if isinstance(key, int):
            if not isinstance(cur, list) or not -len(cur) <= key < len(cur):
                return None
            cur = cur[key]
        else:
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(key)
        if cur is None:
            return None
    return cur


def num(value: object) -> float | None:
    """A finite float, or None for missing / non-numeric / NaN values."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def dur(us: object) -> str:
    """Microseconds as a human duration: 950 µs, 12.3 ms, 4.56 s."""
    v = num(us)
    if v is None:
        return "—"
    a = abs(v)
    if a == 0:
        return "0 µs"
    if a < 1:
        return f"{v:.2f} µs"
    if a < 1000:
        return f"{v:.1f} µs" if a < 100 else f"{v:.0f} µs"
    if a < 1_000_000:
        return f"{v / 1000:.2f} ms" if a < 10_000 else f"{v / 1000:.1f} ms"
    return f"{v / 1_000_000:.2f} s"


def pct(value: object, digits: int = 1) -> str:
    v = num(value)
    return "—" if v is None else f"{v:.{digits}f}%"


def count(value: object) -> str:
    v = num(value)
    return "—" if v is None else f"{round(v):,}"


def nbytes(value: object) -> str:
    v = num(value)
    if v is None:
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.2f} {unit}"
    return f"{v:.0f} B"


def gbps(value: object) -> str:
    v = num(value)
    return "—" if v is None else f"{v:.1f} GB/s" if v >= 10 else f"{v:.2f} GB/s"


def dur_tick(us: object) -> str:
    """Compact axis tick: 0, 5 µs, 10 ms, 1.5 s (no trailing zeros)."""
    v = num(us)
    if v is None:
        return ""
    if v == 0:
        return "0"
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("µs", 1.0)):
        if abs(v) >= scale or unit == "µs":
            return f"{v / scale:.3g} {unit}"
    return f"{v:g} µs"


def plain(value: object) -> str:
    """Evidence values: numbers compactly, everything else escaped text."""
    v = num(value)
    if v is not None:
        if float(v).is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.3g}" if abs(v) >= 1000 else f"{v:.3g}"
    if isinstance(value, list):
        return esc(", ".join(str(x) for x in value[:12]) + (" …" if len(value) > 12 else ""))
    return esc(value)


def short_kernel_name(name: str, limit: int = 120) -> str:
    """Readable form of a C++ kernel name: drop `void `, fold nested template and argument lists.

    `void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, ...>(int, ...)`
    becomes `at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor…, …>(…)`.
    The caller keeps the full name in a title attribute.
    """
    text = name.removeprefix("void ").strip()
    if len(text) <= 60 and "<" not in text:  # `Memcpy DtoD (Device -> Device)`, `volta_sgemm_64x64_tn`
        return text
    text = text.replace("(anonymous namespace)", "{anon}").replace("->", "→")
    out: list[str] = []
    angle = paren = 0
    for ch in text:
        if ch == "(":
            paren += 1
            if paren == 1:
                out.append("(…")
            continue
        if ch == ")":
            paren = max(0, paren - 1)
            if paren == 0:
                out.append(")")
            continue
        if paren:
            continue
        if ch == "<":
            angle += 1
            if angle <= 1:
                out.append(ch)
            elif angle == 2:
                out.append("…")
            continue
        if ch == ">":
            if angle <= 1:
                out.append(ch)
            angle = max(0, angle - 1)
            continue
        if angle <= 1:
            out.append(ch)
    short = "".join(out)
    if len(short) > limit:
        short = short[: limit - 1].rstrip() + "…"
    return short


def duration_text(seconds: object) -> str:
    v = num(seconds)
    if v is None:
        return "—"
    total = round(v)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {total % 3600 // 60:02d} min"


def cost_text(usd: object) -> str:
    v = num(usd)
    return "—" if v is None else f"${v:,.2f}"
