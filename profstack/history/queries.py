"""The named queries shipped with the Athena workgroup, written once for Athena (Trino SQL) and DuckDB.

Each query names its tables as ``{jobs}``, ``{ranks}``, ``{kernels}``: the stack fills in
``"<database>"."jobs"``, the local DuckDB stand-in the name of a view over the JSON Lines files. Only SQL
that both engines read the same way is used (``CAST(dt AS DATE)``, ``date_trunc('week', ...)``, ``round``,
quoted ``"user"``: the partition key named like a SQL keyword).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from profstack.history.rows import TABLES


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    sql: str

    def render(self, tables: Mapping[str, str]) -> str:
        missing = set(TABLES) - set(tables)
        if missing:
            raise KeyError(f"no table name for {sorted(missing)}")
        return self.sql.format(**{t: tables[t] for t in TABLES})


IDLE_GPU_HOURS_BY_USER_AND_WEEK = NamedQuery(
    name="idle-gpu-hours-by-user-and-week",
    description="GPU-hours spent idle (job GPU-hours x mean GPU idle share) and what they cost, per user and week",
    sql="""SELECT "user",
       CAST(date_trunc('week', CAST(dt AS DATE)) AS DATE) AS week,
       count(*) AS jobs,
       round(sum(gpu_hours), 3) AS gpu_hours,
       round(sum(gpu_hours * gpu_idle_pct / 100.0), 3) AS idle_gpu_hours,
       round(sum(lost_usd), 2) AS lost_usd
FROM {jobs}
WHERE gpu_hours IS NOT NULL AND gpu_idle_pct IS NOT NULL
GROUP BY 1, 2
ORDER BY week DESC, idle_gpu_hours DESC, "user"
""",
)

TOP_REGRESSIONS = NamedQuery(
    name="top-regressions",
    description="Jobs that regressed against their family's recent jobs, worst first",
    sql="""SELECT "user", family, job, ended_at, regressions, regression_worst_pct, baseline_jobs, regression_summary
FROM {jobs}
WHERE regressions > 0
ORDER BY regression_worst_pct DESC, ended_at DESC
LIMIT 50
""",
)

SLOWEST_KERNELS_ACROSS_JOBS = NamedQuery(
    name="slowest-kernels-across-jobs",
    description="Kernels with the most GPU time over all jobs (top kernels of each job), with their mean duration",
    sql="""SELECT name,
       kernel_type,
       count(DISTINCT job) AS jobs,
       sum("count") AS launches,
       round(sum(total_us) / 1e6, 3) AS total_s,
       round(sum(total_us) / sum("count"), 3) AS mean_us,
       round(max(max_us), 3) AS max_us
FROM {kernels}
WHERE "count" > 0
GROUP BY name, kernel_type
ORDER BY total_s DESC, name
LIMIT 50
""",
)

NAMED_QUERIES = (IDLE_GPU_HOURS_BY_USER_AND_WEEK, TOP_REGRESSIONS, SLOWEST_KERNELS_ACROSS_JOBS)
