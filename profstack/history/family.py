"""Which family a job belongs to: its ``profstack:family`` tag, else the first configured job-name rule
that matches (a regular expression; the family is its ``family`` group, else its first group, else the
whole match). Jobs of one family are compared with each other (``regression.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

DEFAULT_TAG_KEY = "profstack:family"
#: SageMaker's default job names: <base_job_name>-YYYY-MM-DD-HH-MM-SS-mmm (the SDK's name_from_base)
DEFAULT_NAME_PATTERNS = (r"^(?P<family>.+?)-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}(?:-\d{3})?$",)
_FAMILY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")

FamilySource = Literal["tag", "name_rule"]


class FamilyRuleError(ValueError):
    """A job-name rule that is not a usable regular expression."""


def check_pattern(pattern: str) -> str:
    """The pattern, if it compiles and has at most one group unless it names one ``family``."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise FamilyRuleError(f"{pattern!r} is not a regular expression: {exc}") from None
    if compiled.groups > 1 and "family" not in compiled.groupindex:
        raise FamilyRuleError(f"{pattern!r} has {compiled.groups} groups: name the family one (?P<family>...)")
    return pattern


@dataclass(frozen=True)
class FamilyRules:
    tag_key: str = DEFAULT_TAG_KEY
    name_patterns: Sequence[str] = DEFAULT_NAME_PATTERNS

    def __post_init__(self) -> None:
        for pattern in self.name_patterns:
            check_pattern(pattern)


def _usable(value: str | None) -> str | None:
    """A family name that can be a key and a partition value; anything else counts as no family."""
    if value and _FAMILY_RE.match(value):
        return value
    return None


def resolve_family(job: str, tags: Mapping[str, str], rules: FamilyRules) -> tuple[str, FamilySource] | None:
    """(family, where it came from), or None when the job belongs to no family."""
    tagged = _usable(tags.get(rules.tag_key))
    if tagged:
        return tagged, "tag"
    for pattern in rules.name_patterns:
        match = re.fullmatch(pattern, job)
        if match is None:
            continue
        if "family" in match.re.groupindex:
            found = match.group("family")
        elif match.re.groups:
            found = match.group(1)
        else:
            found = match.group(0)
        family = _usable(found)
        if family:
            return family, "name_rule"
    return None
