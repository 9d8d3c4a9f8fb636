"""Reading JSON loosely: the few accessors for JSON whose shape is not guaranteed.

Summaries read back from S3 or history may come from an older schema version or be damaged; these
accessors never raise on a wrong shape and never turn a non-finite or boolean value into a number.
``diff``, ``history.rows`` and ``history.cost`` share them. ``loose_int`` is the one rule for integers that
profilers write as text or as floats in trace args (the parser, the op types' External ids and, in C, the reader).
"""

from __future__ import annotations

import math
import re
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


DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")


def loose_int(value: object, bits: int = 64) -> int | None:
    """An integer arg as profilers write it: a JSON integer; a string of decimal digits (ROCm's roctracer writes
    `"bytes": "32768"`, and HTA reads such a column as numbers); an integral float. None for anything else
    (booleans, fractions, other strings, out of range): that field is unknown. The C reader reads strings of
    digits by this same rule in C (``csrc/reader.c``'s ``loose_digits``: the differential tests hold the two
    equal) and declines a batch with anything else, so both engines read these values alike."""
    if isinstance(value, bool):
        return None
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and DECIMAL.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None or not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        return None
    return number
