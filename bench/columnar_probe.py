"""Would a well-kept columnar JSON reader beat msgspec's typed decode on one core? (issue #17, target 1)

    python -m bench.columnar_probe prepare bench/data/100MB-json/rank-0.pt.trace.json   # writes events.ndjson
    taskset -c 0 python -m bench.columnar_probe msgspec bench/data/probe/events.ndjson
    taskset -c 0 python -m bench.columnar_probe duckdb  bench/data/probe/events.ndjson
    taskset -c 0 .venv-mlflow/bin/python -m bench.columnar_probe pyarrow bench/data/probe/events.ndjson
    taskset -c 0 /tmp/plv/bin/python -m bench.columnar_probe polars bench/data/probe/events.ndjson  # scratch venv

Target 1 asks the whole analysis to run 1.25x faster than msgspec decoding the file into one typed struct per
event. Python code that touches each event cannot (bench/README.md). The way out would be a reader that hands
the analysis columns (ts, dur, name ids, args.correlation, ...) without a Python object per event. This probes
the two such readers the repository already pins (pyarrow, in the MLflow server's venv; duckdb, a dev tool)
on the same events, as newline-delimited JSON (pyarrow needs one object per line; the rewrite is not timed),
single-threaded, decoding only the fields ProfStack reads, and prints CPU ms per MB of NDJSON.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

FIELDS = ("ph", "cat", "name", "ts", "dur")


def prepare(trace: Path) -> Path:
    import msgspec

    out = Path(__file__).resolve().parent / "data" / "probe" / "events.ndjson"
    out.parent.mkdir(parents=True, exist_ok=True)
    events = msgspec.json.decode(trace.read_bytes())["traceEvents"]
    enc = msgspec.json.Encoder()
    with out.open("wb") as fh:
        for e in events:
            fh.write(enc.encode(e) + b"\n")
    return out


def probe(tool: str, path: Path) -> float:
    data = path.read_bytes()
    start = time.process_time()
    if tool == "msgspec":
        import msgspec

        args_t = msgspec.defstruct("Args", [("correlation", int | None, None), ("stream", int | str | None, None)])
        fields = [(f, float, 0.0) if f in ("ts", "dur") else (f, str, "") for f in FIELDS]
        event_t = msgspec.defstruct("Event", [*fields, ("args", args_t | None, None)], gc=False)
        dec = msgspec.json.Decoder(list[event_t])  # type: ignore[valid-type]  # one struct per event, as the floor; the join is timed too
        n = len(dec.decode(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]"))
    elif tool == "pyarrow":
        import pyarrow as pa
        import pyarrow.json as pj

        schema = pa.schema(
            [(f, pa.float64() if f in ("ts", "dur") else pa.string()) for f in FIELDS]
            + [("args", pa.struct([("correlation", pa.int64()), ("stream", pa.int64())]))]
        )
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=1 << 20),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
        n = table.num_rows
    elif tool == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute("SET threads = 1")
        cols = "{'ph': 'VARCHAR', 'cat': 'VARCHAR', 'name': 'VARCHAR', 'ts': 'DOUBLE', 'dur': 'DOUBLE', "
        cols += "'args': 'STRUCT(correlation BIGINT, stream BIGINT)'}"
        # every column is aggregated, so projection pushdown skips none (with count(*) and sum(dur) alone, DuckDB
        # need not build the strings)
        sql = (
            "SELECT count(*), sum(dur), sum(ts), count(ph), count(cat), count(name), sum(args.correlation), "
            f"sum(args.stream) FROM read_json('{path}', format = 'newline_delimited', columns = {cols})"
        )
        n = con.execute(sql).fetchall()[0][0]
    elif tool == "polars":  # not pinned here: a scratch venv with polars==1.35.2 (bench/README.md)
        import io
        import os

        os.environ["POLARS_MAX_THREADS"] = "1"  # read by polars at import: one core, like every other tool
        import polars as pl

        schema = {f: pl.Float64 if f in ("ts", "dur") else pl.String for f in FIELDS}
        schema["args"] = pl.Struct({"correlation": pl.Int64, "stream": pl.Int64})
        n = pl.read_ndjson(io.BytesIO(data), schema=schema, ignore_errors=True).height
    else:
        raise SystemExit(f"unknown tool {tool}")
    cpu = time.process_time() - start
    ms_per_mb = cpu * 1e9 / len(data)
    print(f"{tool}: {n} events, {cpu:.2f} CPU s, {ms_per_mb:.2f} CPU ms per MB of NDJSON")
    return ms_per_mb


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit(__doc__)
    if args[0] == "prepare":
        print(prepare(Path(args[1])))
    else:
        probe(args[0], Path(args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
