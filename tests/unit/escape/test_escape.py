"""One escaping rule for every terminal and e-mail output (profstack/escape.py, #42 item 13): whatever text a trace,
an index row or a FailureReason carries, no control character, bidi override or other character that drives a
terminal or breaks an e-mail line reaches the output; what is printable stays as it was."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack import escape

#: every code point, lone surrogates included (hypothesis leaves category Cs out by default)
ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=80)
#: what must never reach a terminal or an e-mail as it is
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

#: attacks a terminal honours: OSC 52 clipboard write, erase line + carriage return, cursor moves, window title,
#: a C1 CSI (one byte in 8-bit terminals), a bidi override that reorders what follows, a hyperlink, a bell
ATTACKS = [
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "ok\x1b[2K\rFAKE LINE",
    "\x1b[1A\x1b[2J\x1b[H",
    "\x1b]0;owned\x07",
    "\x9b31mred",
    "evil\u202etxt.exe",
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "\x07\x08\x0b\x0c\x7f\x85\u2028\u2029\ufeff\u200b",
]


def unsafe(text: str, *, allow: str = "") -> list[str]:
    return [
        ch
        for ch in text
        if ch not in allow
        and (unicodedata.category(ch) in UNSAFE_CATEGORIES or ch in BIDI or (ch.isspace() and ch != " "))
    ]


@settings(max_examples=300)
@given(ANY_TEXT)
def test_no_unsafe_character_survives_any_of_the_escaping_functions(text: str) -> None:
    # GIVEN any text at all WHEN escaped THEN nothing that can drive a terminal or break a mail line is left
    one = escape.one_line(text)
    assert unsafe(one) == []
    assert "\n" not in one
    many = escape.lines(text)
    assert unsafe(many, allow="\n") == []
    assert many.count("\n") == text.count("\n")  # the text's own line breaks, and no other
    subject = escape.ascii_line(text, 99)
    assert all(" " <= ch <= "~" for ch in subject)
    assert len(subject) <= 99
    # AND JSON for the terminal is safe too, and reads back as the same value
    doc = escape.json_text({"name": text, "rows": [text]})
    assert unsafe(doc, allow="\n") == []
    if not any(unicodedata.category(ch) == "Cs" for ch in text):  # a lone surrogate has no UTF-8 form
        assert json.loads(doc) == {"name": text, "rows": [text]}


@given(st.text(alphabet=st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))))
def test_printable_text_is_left_exactly_as_it_was(text: str) -> None:
    assert escape.one_line(text) == text
    assert escape.lines(text) == text
    assert escape.json_text(text) == json.dumps(text, ensure_ascii=False)


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_known_terminal_attack_prints_as_visible_characters(attack: str) -> None:
    out = escape.one_line(attack)
    # THEN no escape, control or override character is left, and what it was is still readable
    assert unsafe(out) == []
    assert "\x1b" not in out
    assert "\\x1b" in out or "\\x" in out or "\\u" in out


def test_the_escapes_name_the_character_they_replace() -> None:
    assert escape.one_line("a\tb\nc\rd\x1be\x9bf\u202eg\U000e0001") == "a\\tb\\nc\\rd\\x1be\\x9bf\\u202eg\\U000e0001"
    assert escape.lines("one\r\ntwo\x07") == "one\\r\ntwo\\x07"
    assert escape.ascii_line("Résumé  \x1b[2J done\n", 99) == "R\\xe9sum\\xe9 \\x1b[2J done\\n"
    assert escape.one_line("x" * 10, 5) == "xxxx…"
