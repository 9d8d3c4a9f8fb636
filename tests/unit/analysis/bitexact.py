"""Canonical, bit-exact flattening of analysis state, shared by the C-versus-Python differential tests.

``flatten(x)`` lists every leaf under ``x`` as (path, leaf) pairs in a deterministic order: ints and floats
apart, a float by its bits (-0.0 != 0.0, NaN == NaN of the same bits), dicts in insertion order, sets sorted,
arrays by typecode, objects by ``__dict__``, slots and msgspec fields, and an object reached twice as an alias.
``first_difference`` says readably where two flattenings part.
"""

from __future__ import annotations

import hashlib
import struct
from array import array
from types import BuiltinFunctionType, FunctionType, MethodType

Flat = list[tuple[str, str]]


def _leaf(x: object) -> str | None:
    t = type(x)
    if t is int:
        return f"int {x}"
    if t is float:
        return f"float {x!r} {struct.pack('<d', x).hex()}"  # the bits: -0.0 != 0.0, NaN == NaN (same bits)
    if t is bool:
        return f"bool {x}"
    if x is None:
        return "None"
    if x is NotImplemented:
        return "NotImplemented"
    if t is str:
        return f"str {x!r}"
    if t is bytes:  # a source's data (FileData.source): its length and digest
        return f"bytes {len(x)} {hashlib.sha256(x).hexdigest()}"  # type: ignore[arg-type]
    if t is bytearray:  # op_types.Collector.follow: a flag per name id
        return f"bytearray {bytes(x).hex()}"  # type: ignore[arg-type]
    if t is complex:
        return f"complex {_leaf(x.real)} {_leaf(x.imag)}"  # type: ignore[attr-defined]
    if t is range:
        return f"range {x!r}"
    if t in (FunctionType, MethodType, BuiltinFunctionType, type):
        return f"callable {getattr(x, '__qualname__', '?')}"  # the parser's selection_now closure
    return None


def _slots(t: type) -> list[str]:
    return [s for k in t.__mro__ for s in getattr(k, "__slots__", ())]


def flatten(x: object, path: str = "", out: Flat | None = None, memo: dict[int, str] | None = None) -> Flat:
    """Every leaf under ``x`` with its path; containers by type, length, key order, and which are one object."""
    out = [] if out is None else out
    memo = {} if memo is None else memo
    leaf = _leaf(x)
    if leaf is not None:
        out.append((path, leaf))
        return out
    t = type(x)
    if t is not tuple and t is not frozenset:
        if id(x) in memo:  # the same object reached twice (fd.gpu_feed is parser.feed; acc.names is symbols.names)
            out.append((path, f"alias of {memo[id(x)]}"))
            return out
        memo[id(x)] = path
    if t is list or t is tuple:
        out.append((path, f"{t.__name__} len {len(x)}"))  # type: ignore[arg-type]
        for i, v in enumerate(x):  # type: ignore[call-overload]
            flatten(v, f"{path}[{i}]", out, memo)
    elif t is dict:
        out.append((path, f"dict keys {[_leaf(k) for k in x]}"))  # type: ignore[attr-defined]
        for k, v in x.items():  # type: ignore[attr-defined]
            flatten(v, f"{path}[{k!r}]", out, memo)
    elif t is set or t is frozenset:
        out.append((path, f"{t.__name__} {sorted(str(_leaf(v)) for v in x)}"))  # type: ignore[attr-defined]
    elif t is array:
        out.append((path, f"array {x.typecode} len {len(x)}"))  # type: ignore[attr-defined]
        for i, v in enumerate(x):  # type: ignore[call-overload]
            out.append((f"{path}[{i}]", str(_leaf(v))))
    else:
        _flatten_object(x, path, out, memo)
    return out


def _flatten_object(x: object, path: str, out: Flat, memo: dict[int, str]) -> None:
    """An exception by type and message; any other object by its attributes (``__dict__``, slots, struct fields)."""
    t = type(x)
    if isinstance(x, BaseException):
        out.append((path, f"raised {type(x).__name__}: {x}"))
        return
    names = set(getattr(x, "__dict__", {})) | set(_slots(t)) | set(getattr(t, "__struct_fields__", ()))
    if not names and not hasattr(x, "__dict__"):
        raise TypeError(f"{path}: no canonical form for {t.__qualname__}")
    out.append((path, f"object {t.__qualname__}"))
    for n in sorted(names):
        if hasattr(x, n):
            flatten(getattr(x, n), f"{path}.{n}", out, memo)
        else:
            out.append((f"{path}.{n}", "unset"))


def first_difference(a: Flat, b: Flat, what: str = "python vs C") -> str | None:
    """None when equal; else the first differing entries (and a few after), readable."""
    if a == b:
        return None
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    lines = [f"{what}: {len(a)} vs {len(b)} entries, first difference at entry {i}:"]
    for k in range(i, min(i + 4, max(len(a), len(b)))):
        pa = a[k] if k < len(a) else ("<end>", "")
        pb = b[k] if k < len(b) else ("<end>", "")
        lines.append(f"  {pa[0]} = {pa[1]}" + ("" if pa == pb else f"\n  {pb[0]} = {pb[1]}  <- C"))
    return "\n".join(lines)
