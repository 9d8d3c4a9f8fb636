"""Memory operations: memcpy by direction (count, bytes, time, achieved bandwidth) and memset."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import r2
from profstack.analysis.summary import MemoryOps


def memory_ops(v: RankView) -> MemoryOps:
    mem_dir, memset = v.acc.mem_dir, v.acc.memset
    return {
        "memcpy": [
            {
                "direction": k,
                "count": int(rec[0]),
                "bytes": int(rec[1]),
                "time_us": r2(rec[2]),
                "bandwidth_gbps": r2(rec[1] / rec[2] / 1000.0) if rec[2] > 0 else None,
            }
            for k, rec in sorted(mem_dir.items())
        ],
        "memset": {
            "count": int(memset[0]),
            "bytes": int(memset[1]),
            "time_us": r2(memset[2]),
            "bandwidth_gbps": r2(memset[1] / memset[2] / 1000.0) if memset[2] > 0 else None,
        },
    }
