"""The history rows in a local folder laid out like the bucket (``<root>/history/<table>/dt=.../user=.../``):
what the demo copies out of S3, what tests and DuckDB read. Also a ``HistoryReader`` over it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from profstack.history.rows import JobInfo, from_jsonl, partition_prefix, row_key, to_jsonl


class DirectoryHistory:
    """History rows under ``root`` (the folder that holds ``history/``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def write(self, rows: Mapping[str, Sequence[Mapping[str, Any]]], info: JobInfo) -> list[Path]:
        written = []
        for table, table_rows in rows.items():
            path = self.root / row_key(table, info)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(to_jsonl(table_rows))
            written.append(path)
        return written

    def _days(self, before: datetime, lookback_days: int) -> list[str]:
        end = before.astimezone(UTC).date()
        return [(end - timedelta(days=i)).isoformat() for i in range(lookback_days + 1)]

    def recent_jobs(
        self, *, user: str, family: str, before: datetime, lookback_days: int, limit: int
    ) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cutoff = before.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        for day in self._days(before, lookback_days):
            folder = self.root / partition_prefix("jobs", day, user)
            for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
                for row in from_jsonl(path.read_bytes()):
                    if row.get("family") == family and str(row.get("ended_at") or "") < cutoff:
                        found.append(row)
        found.sort(key=lambda r: str(r.get("ended_at") or ""), reverse=True)
        return found[:limit]

    def kernels(self, *, user: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
        ended = str(row.get("ended_at") or "")
        path = self.root / partition_prefix("kernels", ended[:10], user) / f"{row.get('job')}.jsonl"
        return from_jsonl(path.read_bytes()) if path.is_file() else []
