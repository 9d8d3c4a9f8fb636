"""Reading a summary loosely: the few accessors for JSON whose shape is not guaranteed.

Summaries read back from S3 or history may come from an older schema version or be damaged; these
accessors never raise on a wrong shape and never turn a non-finite or boolean value into a number.
``diff``, ``history.rows`` and ``history.cost`` share them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def number(value: object) -> float | None:
    """A finite int or float as float; None for anything else (bools, NaN, inf, strings)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    return None


def at(obj: object, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None as soon as a step is not a mapping."""
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj
