"""The msgspec floor's types (bench.workers imports them only for the msgspec run, so an HTA venv needs no msgspec)."""

from __future__ import annotations

from typing import Any

import msgspec


class Event(msgspec.Struct, gc=False):
    name: str = ""
    cat: str = ""
    ph: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: dict[str, Any] = {}


class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event]  # the Kineto key
