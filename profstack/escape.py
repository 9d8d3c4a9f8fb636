"""The one escaping rule for text a person reads outside a browser: terminal output (`profstack analyze`'s printout,
`reports list`, `reports diff`, `diff`, every one-line error) and e-mail and SNS bodies and subjects.

Untrusted text (file, kernel, host and job names from a trace; findings built from them; a FailureReason; rows of an
index.json) must not drive the device that shows it. `escape_char` is the rule, applied character by character:

* printable characters are kept as they are (letters of every script, digits, punctuation, symbols, the space);
* everything else is written as a visible escape (`\\x1b`, `\\x07`, `\\t`, `\\u202e`, `\\U000e0001`): the C0 and C1
  controls (ESC and CSI start terminal sequences: colours, cursor moves, erased lines, OSC 52 clipboard writes,
  hyperlinks; BEL, backspace, carriage return and tab move the cursor), DEL, the bidirectional overrides, embeddings
  and isolates (U+202A..U+202E, U+2066..U+2069) and marks (U+200E, U+200F, U+061C), zero-width and other format
  characters, line and paragraph separators (U+2028, U+2029, U+0085: mail readers break lines there), spaces other
  than U+0020, lone surrogates, private-use and unassigned code points.

So a trace file named "a\\nReport: https://evil" stays one line that says exactly that, and a kernel called
"\\x1b]52;c;...\\x07" prints as those characters instead of writing the user's clipboard.

    one_line(value)     one line: every line break escaped too (table cells, e-mail lines, log lines, errors)
    lines(text)         several lines: "\\n" kept, everything else as one_line (a whole printout)
    ascii_line(value)   one line of printable ASCII only (SNS subjects), non-ASCII escaped as well
    json_text(value)    JSON for a terminal: the same characters escaped as JSON \\u escapes (still valid JSON)
"""

from __future__ import annotations

import json
from typing import Any

#: str.isprintable() is True for these, yet mail readers break lines at them
_LINE_BREAKS = frozenset("\u2028\u2029\x85")


def is_safe(ch: str) -> bool:
    """Whether `ch` may reach a terminal or an e-mail as it is."""
    return ch.isprintable() and ch not in _LINE_BREAKS


def escape_char(ch: str) -> str:
    """`ch` itself when safe, else its visible escape (the only rule this module has)."""
    if is_safe(ch):
        return ch
    code = ord(ch)
    if code == 0x09:
        return "\\t"
    if code == 0x0A:
        return "\\n"
    if code == 0x0D:
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def one_line(value: Any, limit: int | None = None) -> str:
    """`value` as one line of visible characters, cut to `limit` characters (with '…') when given."""
    text = "".join(escape_char(ch) for ch in str(value))
    if limit is not None and len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


def lines(value: Any) -> str:
    """`value` with its "\\n" line breaks kept and every other unsafe character escaped (a printout of many lines).
    A "\\r" is always escaped, also before "\\n": it would return the cursor and let the rest overwrite the line."""
    return "\n".join(one_line(line) for line in str(value).split("\n"))


def ascii_line(value: Any, limit: int | None = None) -> str:
    """One line of printable ASCII (0x20-0x7e) only, runs of blanks collapsed: what an SNS Subject takes."""
    text = "".join(ch if " " <= ch <= "~" else escape_char_ascii(ch) for ch in one_line(value))
    text = " ".join(text.split())
    return text if limit is None else text[:limit]


def escape_char_ascii(ch: str) -> str:
    """A safe non-ASCII character as an ASCII escape (é -> \\xe9)."""
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """`value` as JSON that is safe to print: readable non-ASCII text stays, every unsafe character (they can only be
    inside strings) becomes its JSON escape, so the output parses to the same value."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return "".join(ch if is_safe(ch) or ch == "\n" else _json_escape(ch) for ch in text)
