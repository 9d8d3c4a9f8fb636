"""Generate big Kineto traces from a real one by replicating its steps.

The source trace is kept byte-for-byte in libkineto's layout (one event per item, separated by
``"\\n  },\\n  {"``) so that the generated file exercises the same code paths as a real trace. Each
replica shifts every timestamp by a whole number of microseconds (textually, so the float precision
and formatting of the original survive), gives correlation / flow / External ids a fresh range and
renumbers ``ProfilerStep#N``. Output is streamed: the generator holds one copy of the source's
events, never the output.

    python -m bench.generate --size-mb 100 --out bench/data/trace-100MB.json [--gzip]
    python -m bench.generate --size-mb 100 --out shapes.json --source SHAPES_SOURCE [--no-shapes --events N]

``--no-shapes`` writes the same trace as if ``record_shapes`` had been off: each operator's ``Input Dims``,
``Input type``, ``Input Strides`` and ``Concrete Inputs`` removed and the header's ``"record_shapes": 1`` made 0;
with ``--events`` (the count a shapes run printed) it holds the same events, fewer bytes: what ``bench.run``'s
record_shapes rows compare.
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = (
    REPO_ROOT / "samples" / "traces" / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
)
#: a real trace recorded with record_shapes=True in libkineto's layout (ROCm 6, MI300X, ResNet with activation
#: checkpointing, bf16: TraceLens's sample, samples/traces/README.md): its operators carry the four shape args
SHAPES_SOURCE = REPO_ROOT / "samples" / "traces" / "tracelens" / "mi300" / "resnet_act_checkpoint.json.gz"
#: the args record_shapes adds to an operator (torch/csrc/profiler/kineto_shim / collection.cpp)
SHAPE_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
MB = 1_000_000  # sizes and throughputs in this package are decimal megabytes

EVENT_SEP = "\n  },\n  {"
_EVENTS_START = '"traceEvents": ['
_EVENTS_END = "\n  }\n  ]"

_TS_RE = re.compile(r'"ts": (-?\d+)((?:\.\d+)?)')
_DUR_RE = re.compile(r'"dur": (-?\d+(?:\.\d+)?)')
_ID_RE = re.compile(r'("(?:correlation|External id|id)": )(\d+)')
_STEP_RE = re.compile(r"ProfilerStep#(\d+)")
_PH_M = '"ph": "M"'


@dataclass(frozen=True)
class SourceTrace:
    header: str  # everything up to and including the first event's opening "{"
    footer: str  # everything from the last event's closing "}" on
    metadata: list[str]  # ph=M event bodies: emitted once
    events: list[str]  # bodies replicated per copy
    period_us: int  # timestamp shift between copies
    id_span: int  # id offset between copies
    step_span: int  # ProfilerStep#N offset between copies


def _value_end(text: str, i: int) -> int:
    """The end of the JSON value (an array, a string or a scalar) that starts at ``text[i]``."""
    depth, in_str, j = 0, False, i
    while j < len(text):
        c = text[j]
        if in_str:
            if c == "\\":
                j += 1
            elif c == '"':
                in_str = False
                if depth == 0:
                    return j + 1
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return j + 1
        elif depth == 0 and c in ",}\n":
            return j
        j += 1
    return j


def strip_shapes(body: str) -> str:
    """An event body without the args record_shapes adds (``SHAPE_KEYS``), the rest kept byte for byte."""
    for key in SHAPE_KEYS:
        tag = f'"{key}": '
        while (at := body.find(tag)) >= 0:
            end = _value_end(body, at + len(tag))
            if body.startswith(", ", end):  # "key": v, next  ->  next
                body = body[:at] + body[end + 2 :]
            elif body[:at].endswith(", "):  # prev, "key": v  ->  prev
                body = body[: at - 2] + body[end:]
            else:
                body = body[:at] + body[end:]
    return body


def load_source(path: Path, *, shapes: bool = True) -> SourceTrace:
    """Split a libkineto-formatted trace into header, event bodies and footer (``shapes=False``: as if
    record_shapes had been off, ``strip_shapes``)."""
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    start = text.find(_EVENTS_START)
    if start < 0:
        raise ValueError(f"{path}: no traceEvents array")
    body_start = text.index("{", start + len(_EVENTS_START)) + 1
    end = text.find(_EVENTS_END, body_start)
    if end < 0:
        raise ValueError(f"{path}: not in libkineto's one-event-per-item layout")
    bodies = text[body_start:end].split(EVENT_SEP)
    if not shapes:
        bodies = [strip_shapes(b) for b in bodies]
        text = text[:body_start].replace('"record_shapes": 1', '"record_shapes": 0') + text[body_start:]
    metadata = [b for b in bodies if _PH_M in b]
    events = [b for b in bodies if _PH_M not in b]
    lo, hi = float("inf"), float("-inf")
    max_id, steps = 0, []
    for body in events:
        ts_m = _TS_RE.search(body)
        if ts_m:
            ts = float(ts_m.group(1) + ts_m.group(2))
            dur_m = _DUR_RE.search(body)
            lo = min(lo, ts)
            hi = max(hi, ts + (float(dur_m.group(1)) if dur_m else 0.0))
        for m in _ID_RE.finditer(body):
            max_id = max(max_id, int(m.group(2)))
        steps.extend(int(s) for s in _STEP_RE.findall(body))
    if not events or lo == float("inf"):
        raise ValueError(f"{path}: no timed events to replicate")
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    return SourceTrace(
        header=text[: body_start - 1] + "{",
        footer="\n  }" + text[end + len("\n  }") :],
        metadata=metadata,
        events=events,
        period_us=int(hi - lo) + 1000,  # a 1 ms gap between copies
        id_span=max_id + 1,
        step_span=step_span,
    )


def _shifted(body: str, copy: int, src: SourceTrace) -> str:
    if copy == 0:
        return body
    shift, id_off, step_off = copy * src.period_us, copy * src.id_span, copy * src.step_span
    body = _TS_RE.sub(lambda m: f'"ts": {int(m.group(1)) + shift}{m.group(2)}', body)
    body = _ID_RE.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + id_off}", body)
    if step_off and "ProfilerStep#" in body:
        body = _STEP_RE.sub(lambda m: f"ProfilerStep#{int(m.group(1)) + step_off}", body)
    return body


def iter_chunks(src: SourceTrace, target_bytes: int, max_events: int | None = None) -> Iterator[str]:
    """Yield the output text; stops after the first event that reaches `target_bytes` (or the `max_events`-th)."""
    written = len(src.header.encode()) + len(src.footer.encode())
    yield src.header
    first = True
    for body in src.metadata:
        piece = body if first else EVENT_SEP + body
        first = False
        written += len(piece.encode())
        yield piece
    copy = 0
    events = 0
    while True:
        for body in src.events:
            piece = _shifted(body, copy, src)
            piece = piece if first else EVENT_SEP + piece
            first = False
            written += len(piece.encode())
            events += 1
            yield piece
            if written >= target_bytes or (max_events is not None and events >= max_events):
                yield src.footer
                return
        copy += 1


def generate(
    out: Path,
    size_mb: float,
    source: Path = DEFAULT_SOURCE,
    *,
    gzip_copy: bool = False,
    shapes: bool = True,
    max_events: int | None = None,
) -> int:
    """Write a trace of about `size_mb` MB (or `max_events` events) to `out` (and `out`.gz); returns its size in
    bytes. `shapes=False`: as if record_shapes had been off (``strip_shapes``)."""
    src = load_source(source, shapes=shapes)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        batch: list[str] = []
        for piece in iter_chunks(src, int(size_mb * MB) if max_events is None else 1 << 62, max_events):
            batch.append(piece)
            if len(batch) >= 4096:
                fh.write("".join(batch))
                batch.clear()
        fh.write("".join(batch))
    tmp.replace(out)
    if gzip_copy:
        gz = out.with_name(out.name + ".gz")
        gz_tmp = gz.with_name(gz.name + ".tmp")
        with out.open("rb") as fin, gzip.open(gz_tmp, "wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        gz_tmp.replace(gz)
    return out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--gzip", action="store_true", help="also write OUT.gz")
    parser.add_argument("--no-shapes", action="store_true", help="as if record_shapes had been off")
    parser.add_argument("--events", type=int, default=None, help="stop after this many events (not --size-mb)")
    args = parser.parse_args(argv)
    size = generate(
        args.out, args.size_mb, args.source, gzip_copy=args.gzip, shapes=not args.no_shapes, max_events=args.events
    )
    print(f"{args.out}: {size / MB:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
