"""Log a job's summary metrics and its report to an MLflow tracking server through MLflow's REST API.

No ``mlflow`` package (it would more than double the Lambda bundle): the standard library speaks HTTP, and
botocore (already in the Lambda runtime) signs requests with SigV4 for a SageMaker managed MLflow tracking
server. A tracking target is either

* a SageMaker tracking-server ARN ``arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>``:
  requests go to ``https://<region>.experiments.sagemaker.aws`` signed for the service ``sagemaker-mlflow``
  with the ARN in the ``x-mlflow-sm-tracking-server-arn`` header (what AWS's sagemaker-mlflow plugin does);
* a plain ``http(s)://`` URI: no authentication.

One run per job: the run carries the tag ``profstack.job``; a re-delivered job finds its run and logs into
it again instead of adding a second run. Artifacts go through the server's artifact proxy
(``mlflow-artifacts:`` URIs) or, for an ``s3://`` artifact store, through the injected ``put_s3`` callable.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from profstack.analysis.loose import mapping as _mapping

ARN_RE = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"mlflow-tracking-server/(?P<name>[A-Za-z0-9-]{1,256})$"
)
JOB_TAG = "profstack.job"
SIGV4_SERVICE = "sagemaker-mlflow"
ARN_HEADER = "x-mlflow-sm-tracking-server-arn"
MAX_BODY_BYTES = 16 << 20
#: LogBatch limits of the MLflow REST API
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000

PutS3 = Callable[[str, str, bytes, str], None]


class MlflowError(RuntimeError):
    """The tracking server refused a request or could not be reached. ``transient`` says whether a retry
    may help (network errors, throttling, 5xx)."""

    def __init__(self, message: str, *, transient: bool, code: str = "") -> None:
        super().__init__(message)
        self.transient = transient
        self.code = code


class MlflowTargetError(ValueError):
    """A tracking target that is neither a tracking-server ARN nor an http(s) URI."""


@dataclass(frozen=True)
class MlflowTarget:
    base_url: str
    arn: str | None = None
    region: str | None = None

    @classmethod
    def parse(cls, tracking: str) -> MlflowTarget:
        match = ARN_RE.match(tracking)
        if match:
            if match["partition"] not in {"aws", "aws-us-gov"}:
                raise MlflowTargetError(f"partition {match['partition']} has no SageMaker managed MLflow")
            return cls(f"https://{match['region']}.experiments.sagemaker.aws", tracking, match["region"])
        parsed = urllib.parse.urlparse(tracking)
        if parsed.scheme in {"http", "https"} and parsed.netloc:
            return cls(tracking.rstrip("/"))
        raise MlflowTargetError(
            f"{tracking!r} is neither an MLflow tracking-server ARN "
            "(arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>) nor an http(s) URI"
        )


@dataclass(frozen=True)
class Run:
    run_id: str
    experiment_id: str
    artifact_uri: str


class MlflowClient:
    """The handful of REST calls ProfStack needs. ``credentials`` are botocore credentials (only used, and
    required, for an ARN target)."""

    def __init__(self, target: MlflowTarget, *, credentials: Any = None, timeout_s: float = 15.0) -> None:
        if target.arn and credentials is None:
            raise MlflowTargetError("a SageMaker tracking server needs AWS credentials to sign requests")
        self.target = target
        self._credentials = credentials
        self._timeout = timeout_s

    # ------------------------------------------------------------------ transport

    def _headers(self, method: str, url: str, body: bytes | None, content_type: str) -> dict[str, str]:
        headers = {"Content-Type": content_type}
        if self.target.arn is None:
            return headers
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers[ARN_HEADER] = self.target.arn
        request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
        SigV4Auth(self._credentials, SIGV4_SERVICE, self.target.region or "").add_auth(request)
        return {str(k): str(v) for k, v in request.headers.items()}

    def _send(self, method: str, url: str, body: bytes | None, content_type: str) -> bytes:
        if body is not None and len(body) > MAX_BODY_BYTES:
            raise MlflowError(f"{method} {url}: body of {len(body)} bytes is over the limit", transient=False)
        request = urllib.request.Request(  # noqa: S310 - the URL is the configured tracking server (http/https)
            url, data=body, method=method, headers=self._headers(method, url, body, content_type)
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310 - same
                data: bytes = response.read(MAX_BODY_BYTES)
                return data
        except urllib.error.HTTPError as exc:
            payload = exc.read(64 << 10).decode("utf-8", "replace")
            code = ""
            with contextlib.suppress(ValueError, AttributeError):
                code = str(json.loads(payload).get("error_code", ""))
            transient = exc.code in {408, 429} or exc.code >= 500
            raise MlflowError(
                f"{method} {urllib.parse.urlparse(url).path}: HTTP {exc.code} {code} {payload[:300]}".strip(),
                transient=transient,
                code=code,
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise MlflowError(f"{method} {url}: {exc}", transient=True) from None

    def _api(self, method: str, endpoint: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.target.base_url}/api/2.0/mlflow/{endpoint}"
        body = None
        if method == "GET" and payload:
            url += "?" + urllib.parse.urlencode(payload)
        elif payload is not None:
            body = json.dumps(payload).encode()
        raw = self._send(method, url, body, "application/json")
        value = json.loads(raw) if raw.strip() else {}
        return value if isinstance(value, dict) else {}

    # ------------------------------------------------------------------ REST calls

    def experiment_id(self, name: str) -> str:
        """The id of the named experiment, created when missing (a concurrent create is tolerated)."""
        try:
            return str(
                self._api("GET", "experiments/get-by-name", {"experiment_name": name})["experiment"]["experiment_id"]
            )
        except MlflowError as exc:
            if exc.code != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            return str(self._api("POST", "experiments/create", {"name": name})["experiment_id"])
        except MlflowError as exc:
            if exc.code != "RESOURCE_ALREADY_EXISTS":
                raise
        return str(
            self._api("GET", "experiments/get-by-name", {"experiment_name": name})["experiment"]["experiment_id"]
        )

    def find_run(self, experiment_id: str, job: str) -> Run | None:
        escaped = job.replace("'", "")
        found = self._api(
            "POST",
            "runs/search",
            {"experiment_ids": [experiment_id], "filter": f"tags.`{JOB_TAG}` = '{escaped}'", "max_results": 1},
        )
        runs = found.get("runs") or []
        if not runs:
            return None
        info = runs[0]["info"]
        return Run(str(info["run_id"]), experiment_id, str(info.get("artifact_uri") or ""))

    def create_run(self, experiment_id: str, *, job: str, start_ms: int, tags: Mapping[str, str]) -> Run:
        all_tags = {**tags, JOB_TAG: job, "mlflow.runName": job}
        created = self._api(
            "POST",
            "runs/create",
            {
                "experiment_id": experiment_id,
                "run_name": job,
                "start_time": start_ms,
                "tags": [{"key": k, "value": v} for k, v in sorted(all_tags.items())],
            },
        )
        info = created["run"]["info"]
        return Run(str(info["run_id"]), experiment_id, str(info.get("artifact_uri") or ""))

    def log_batch(
        self, run: Run, *, metrics: Mapping[str, float], params: Mapping[str, str], timestamp_ms: int
    ) -> None:
        items = [
            {"key": k, "value": float(v), "timestamp": timestamp_ms, "step": 0} for k, v in sorted(metrics.items())
        ]
        param_items = [{"key": k, "value": str(v)[:MAX_PARAM_VALUE]} for k, v in sorted(params.items())]
        for i in range(0, max(len(items), 1), MAX_METRICS_PER_BATCH):
            batch: dict[str, Any] = {"run_id": run.run_id, "metrics": items[i : i + MAX_METRICS_PER_BATCH]}
            if i == 0:
                batch["params"] = param_items[:MAX_PARAMS_PER_BATCH]
            self._api("POST", "runs/log-batch", batch)

    def upload_artifact(
        self, run: Run, path: str, data: bytes, *, content_type: str, put_s3: PutS3 | None = None
    ) -> str:
        """Store ``data`` as the run's artifact ``path``; returns where it went."""
        uri = run.artifact_uri.rstrip("/")
        if uri.startswith("mlflow-artifacts:"):
            rest = uri.split(":", 1)[1].lstrip("/")
            quoted = urllib.parse.quote(f"{rest}/{path}")
            self._send("PUT", f"{self.target.base_url}/api/2.0/mlflow-artifacts/artifacts/{quoted}", data, content_type)
            return f"{uri}/{path}"
        if uri.startswith("s3://") and put_s3 is not None:
            bucket, _, prefix = uri[5:].partition("/")
            key = f"{prefix}/{path}" if prefix else path
            put_s3(bucket, key, data, content_type)
            return f"s3://{bucket}/{key}"
        raise MlflowError(f"cannot upload to artifact store {uri!r} (no S3 writer given)", transient=False)

    def finish_run(self, run: Run, *, end_ms: int) -> None:
        self._api("POST", "runs/update", {"run_id": run.run_id, "status": "FINISHED", "end_time": end_ms})


def export_job(
    client: MlflowClient,
    *,
    experiment: str,
    job: str,
    metrics: Mapping[str, float],
    params: Mapping[str, str],
    tags: Mapping[str, str],
    artifacts: Mapping[str, tuple[bytes, str]],
    put_s3: PutS3 | None = None,
    now_ms: int | None = None,
) -> Run:
    """One run per job in ``experiment``: metrics, params, tags and artifacts (name -> (bytes, type))."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    experiment_id = client.experiment_id(experiment)
    run = client.find_run(experiment_id, job) or client.create_run(experiment_id, job=job, start_ms=now, tags=tags)
    client.log_batch(run, metrics=metrics, params=params, timestamp_ms=now)
    for name, (data, content_type) in artifacts.items():
        client.upload_artifact(run, name, data, content_type=content_type, put_s3=put_s3)
    client.finish_run(run, end_ms=now)
    return run


_METRIC_KEY_RE = re.compile(r"[^A-Za-z0-9_\-. /]")


def summary_metrics(summary: Mapping[str, Any], numbers: Mapping[str, float | None]) -> dict[str, float]:
    """The job's numbers as MLflow metrics (only finite values; names MLflow accepts)."""
    out: dict[str, float] = {}
    for key, value in numbers.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[_METRIC_KEY_RE.sub("_", key)] = float(value)
    cost = _mapping(summary.get("cost"))
    for key in ("gpu_hours", "total_usd", "lost_usd"):
        value = cost.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"cost_{key}"] = float(value)
    findings = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    out["findings"] = float(len(findings))
    out["regressions"] = float(sum(1 for f in findings if f.get("rule_id") == "Regression"))
    return out
