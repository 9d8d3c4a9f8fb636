"""Across jobs: flat history rows, job families and baselines, regressions against them, the cost of idle
GPUs, and MLflow export. Pure Python like the rest of ``profstack`` (no AWS imports at module level; the
MLflow client signs with botocore only when given a SageMaker tracking-server ARN)."""
