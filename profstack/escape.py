"""Untrusted text (file, kernel and host names from a trace; messages built from them) for channels where a line
break or a control character means something: e-mail and SNS bodies, log lines, one-line CLI output.

`one_line` keeps printable characters and writes everything else as a visible escape (`\\n`, `\\x1b`, `\\u2028`),
so a trace file named "a\\nReport: https://evil" stays one line that says exactly that, and cannot add a line of
its own to the message.
"""

from __future__ import annotations

from typing import Any

#: str.isprintable() is True for these, yet mail readers break lines at them
_LINE_BREAKS = frozenset("\u2028\u2029\x85")


def _escape(ch: str) -> str:
    if ch.isprintable() and ch not in _LINE_BREAKS:
        return ch
    text = ch.encode("unicode_escape").decode("ascii")
    return text if text.startswith("\\") else f"\\u{ord(ch):04x}"


def one_line(value: Any, limit: int | None = None) -> str:
    """`value` as one line of visible characters, cut to `limit` characters (with '…') when given."""
    text = "".join(_escape(ch) for ch in str(value))
    if limit is not None and len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text
