"""Pure parts of the processor: where traces are looked for, routing, names, metrics, merging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lambdas.common.env import EnvError
from lambdas.trace_processor.aws import S3Location, S3Object, parse_s3_uri
from lambdas.trace_processor.discovery import trace_prefixes
from lambdas.trace_processor.engine import ProfStackEngine
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.errors import NotOwnedError
from lambdas.trace_processor.job import JobContext, resolve_user
from lambdas.trace_processor.legacy_rule_output import rule_output_prefixes
from lambdas.trace_processor.routing import execution_name, needs_fanout, route_for
from lambdas.trace_processor.scope import owned_tensorboard
from lambdas.trace_processor.summary_tools import job_metrics, merge_partials
from profstack.jobs import metric_names as m
from tests.conftest import REPO_ROOT

BUCKET = "traces-bucket"


def _env(**overrides: Any) -> ProcessorEnv:
    values = {
        "TRACE_BUCKET": BUCKET,
        "IDEMPOTENCY_TABLE": "t",
        "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:t",
        "EXTRA_TRACE_PREFIXES": '["s3://team-bucket/profiles/{user}/{job}/"]',
        "USERS": '["alice", "bob"]',
        "FANOUT_FILE_THRESHOLD": "3",
        "FANOUT_BYTES_THRESHOLD": "1000",
        "SINGLE_LAMBDA_MAX_FILE_BYTES": "600",
    }
    values.update(overrides)
    return ProcessorEnv.from_environ(values)


def _ctx(tensorboard: str | None) -> JobContext:
    return JobContext(
        job="j1",
        status="Completed",
        user="alice",
        trace_bucket=BUCKET,
        end_time_s=1.0,
        tensorboard=parse_s3_uri(tensorboard).child("j1") if tensorboard else None,
    )


def test_env_is_validated_with_a_readable_error() -> None:
    with pytest.raises(EnvError, match="TOPIC_ARN"):
        ProcessorEnv.from_environ({"TRACE_BUCKET": BUCKET, "IDEMPOTENCY_TABLE": "t", "TOPIC_ARN": "nope"})
    assert _env().extra_trace_prefixes == ["s3://team-bucket/profiles/{user}/{job}/"]
    # AND an extra prefix that is not a per-owner template is refused at cold start
    with pytest.raises(EnvError, match=r"\{user\}"):
        _env(EXTRA_TRACE_PREFIXES='["s3://team-bucket/profiles"]')


def test_trace_prefixes_cover_tensorboard_layout_and_extra_prefixes() -> None:
    # GIVEN a job whose TensorBoard output is in the trace bucket
    prefixes = [p.uri for p in trace_prefixes(_ctx(f"s3://{BUCKET}/tensorboard/alice/"), _env())]
    # THEN its TensorBoard folder, the layout's traces folder and the extra prefix's folder of this owner
    # and job are searched
    assert prefixes == [
        f"s3://{BUCKET}/tensorboard/alice/j1/",
        f"s3://{BUCKET}/traces/alice/j1/",
        "s3://team-bucket/profiles/alice/j1/",
    ]


def test_tensorboard_output_outside_the_owners_space_is_not_searched() -> None:
    # GIVEN a TensorBoard output in a bucket that is none of the owner's WHEN checked THEN it is left out
    folder, warnings = owned_tensorboard("s3://somewhere-else/tb/", "alice", "j1", _env())
    assert folder is None
    assert [w["error_type"] for w in warnings] == ["TensorBoardOutputOutsideOwner"]
    # AND under the owner's part of an extra prefix it is searched
    inside, warnings = owned_tensorboard("s3://team-bucket/profiles/alice/tb/", "alice", "j1", _env())
    assert inside is not None
    assert inside.uri == "s3://team-bucket/profiles/alice/tb/j1/"
    assert warnings == []
    # AND not under another owner's part
    assert owned_tensorboard("s3://team-bucket/profiles/bob/", "alice", "j1", _env())[0] is None


@pytest.mark.parametrize(
    ("sizes", "fanout"),
    [([100, 100], False), ([100] * 4, True), ([500, 501], True), ([700], True), ([300, 300, 300], False)],
)
def test_fanout_when_many_files_many_bytes_or_one_oversized_file(sizes: list[int], fanout: bool) -> None:
    objects = [S3Object(BUCKET, f"k{i}.pt.trace.json", size) for i, size in enumerate(sizes)]
    assert needs_fanout(objects, _env()) is fanout


def test_oversized_files_route_to_the_processing_job() -> None:
    assert route_for(S3Object(BUCKET, "a.pt.trace.json", 601), _env()) == "processing"
    assert route_for(S3Object(BUCKET, "a.pt.trace.json", 600), _env()) == "lambda"


def test_gzip_sizes_count_as_their_uncompressed_estimate() -> None:
    # GIVEN a 600-byte limit WHEN a 41-byte .gz arrives (~615 bytes of JSON) THEN it is too big for Lambda
    assert route_for(S3Object(BUCKET, "a.pt.trace.json.gz", 41), _env()) == "processing"
    assert route_for(S3Object(BUCKET, "a.pt.trace.json.gz", 40), _env()) == "lambda"
    assert needs_fanout([S3Object(BUCKET, "a.pt.trace.json.gz", 67)] * 2, _env(SINGLE_LAMBDA_MAX_FILE_BYTES="5000"))


def test_execution_name_is_deterministic_and_valid() -> None:
    name = execution_name("my.job/with spaces" + "x" * 90, "Completed")
    assert name == execution_name("my.job/with spaces" + "x" * 90, "Completed")
    assert len(name) <= 80
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@pytest.mark.parametrize(("tags", "user"), [({"profstack:user": "bob"}, "bob"), ({}, "_unowned")])
def test_owner_comes_from_the_tag_or_is_unowned(tags: dict[str, str], user: str) -> None:
    assert resolve_user(tags, "profstack:user", frozenset({"alice", "bob"})) == user


@pytest.mark.parametrize("value", ["../etc", "mallory", "bob\n", "Bob", "_unowned", "bob/x"])
def test_an_owner_tag_naming_no_configured_user_is_refused(value: str) -> None:
    # (was: an unusable value became _unowned; now anything but a configured user is refused)
    with pytest.raises(NotOwnedError):
        resolve_user({"profstack:user": value}, "profstack:user", frozenset({"alice", "bob"}))


def test_rule_output_prefixes_are_under_each_output_path() -> None:
    describe = {
        "OutputDataConfig": {"S3OutputPath": "s3://out/models"},
        "ProfilerConfig": {"S3OutputPath": "s3://out/models/"},
        "DebugHookConfig": {"S3OutputPath": "s3://dbg/hooks"},
    }
    assert [p.uri for p in rule_output_prefixes(describe, "j1")] == [
        "s3://out/models/j1/rule-output/",
        "s3://dbg/hooks/j1/rule-output/",
    ]


def test_s3_location_child_joins_segments() -> None:
    assert S3Location("b", "").child("a", "b/").key == "a/b"
    assert S3Location("b", "x/").child("y", "").key == "x/y/"


def _example() -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((REPO_ROOT / "tests" / "fixtures" / "summary_example.json").read_text())
    return summary


def test_job_metrics_read_the_documented_summary() -> None:
    # GIVEN the engine's example summary (two GPU ranks) WHEN reduced to job metrics
    summary = _example()
    metrics = job_metrics(summary, trace_bytes=1234)
    ranks = [r for r in summary["ranks"] if r["has_gpu"]]
    assert len(ranks) >= 2
    # THEN typical-rank numbers are means and alarm numbers are the worst rank, from documented fields
    assert metrics[m.GPU_IDLE_PERCENT] == pytest.approx(
        sum(r["temporal_breakdown"]["idle_pct"] for r in ranks) / len(ranks)
    )
    assert metrics[m.LAUNCH_DELAY_P95_US] == pytest.approx(max(r["launch_delay"]["p95_us"] for r in ranks))
    assert metrics[m.STEP_TIME_P95_MS] == pytest.approx(sum(r["steps"]["p95_us"] for r in ranks) / len(ranks) / 1000)
    assert metrics[m.DATALOADER_PERCENT] == pytest.approx(max(r["dataloader"]["share_pct"] for r in ranks))
    assert metrics[m.TRACE_BYTES] == 1234
    assert metrics[m.TRACE_FILES] == len(summary["inputs"])
    assert metrics[m.UNREADABLE_TRACE_FILES] == sum(1 for i in summary["inputs"] if i["status"] != "ok")
    severities = [f["severity"] for f in summary["findings"]]
    for severity in m.SEVERITIES:
        assert metrics[m.findings_metric(severity)] == severities.count(severity)


def _one_rank(summary: dict[str, Any], rank: int) -> dict[str, Any]:
    """A partial as the map step writes it: one file, one rank."""
    part = json.loads(json.dumps(summary))
    part["ranks"] = [r for r in part["ranks"] if r["rank"] == rank]
    part["inputs"] = [i for i in part["inputs"] if i["rank"] == rank and i["status"] == "ok"][:1]
    part["errors"] = []
    part["cross_rank"]["table"] = [t for t in part["cross_rank"]["table"] if t["rank"] == rank]
    part["findings"] = [f for f in part["findings"] if f["ranks"] == [rank]]
    # the engine's record of the file's run (the fixture predates runs[]): the merge groups ranks whose
    # runs overlap in time, so both partials cover the same second
    for r in part["ranks"]:
        r["run"] = "run-1"
    part["runs"] = [
        {
            "id": "run-1",
            "label": part["inputs"][0]["name"],
            "files": [part["inputs"][0]["name"]],
            "ranks": [str(rank)],
            "start_us": 1_000_000.0,
            "duration_us": 1_000_000.0,
            "cross_rank": {"rank_count": 1, "stragglers": [], "load_balance": {}},
        }
    ]
    return part


def test_merge_partials_rebuilds_the_cross_rank_view_with_the_engines_rules() -> None:
    # GIVEN two one-rank partials, rank 1 made much slower
    base = _example()
    fast, slow = _one_rank(base, 0), _one_rank(base, 1)
    # (in the rank's own section: the merge rebuilds each run's table from the ranks, as the engine does)
    slow["ranks"][0]["steps"]["mean_us"] = 2_000_000.0
    slow["ranks"][0]["temporal_breakdown"]["compute_time_us"] = 9_000_000.0
    # and, as in a real collective, rank 0 waits for it (60% of its step exposed communication) while it does not
    fast["ranks"][0]["communication"]["exposed_pct_of_step"] = 60.0
    slow["ranks"][0]["communication"]["exposed_pct_of_step"] = 0.0
    engine = ProfStackEngine()
    # WHEN merged
    merged = merge_partials([fast, slow], [], cross_rank=lambda table: engine.cross_rank(table, {}))
    # THEN both ranks are in, and the engine's cross-rank rules see the imbalance
    assert [r["rank"] for r in merged["ranks"]] == [0, 1]
    assert merged["cross_rank"]["rank_count"] == 2
    assert [s["rank"] for s in merged["cross_rank"]["stragglers"]] == [1]
    assert any(f["rule_id"] == "LoadBalancing" for f in merged["findings"])
    assert len(merged["inputs"]) == 2


def test_merge_partials_flags_missing_files() -> None:
    engine = ProfStackEngine()
    merged = merge_partials(
        [_one_rank(_example(), 0)],
        [{"name": "s3://b/k.pt.trace.json.gz", "size": 5, "reason": "timed out"}],
        cross_rank=lambda table: engine.cross_rank(table, {}),
    )
    assert merged["complete"] is False
    flagged = [i for i in merged["inputs"] if i["status"] == "failed"]
    assert flagged[0]["error"]["message"] == "s3://b/k.pt.trace.json.gz: timed out"


class _OldBotocoreS3:
    """put_object without IfNoneMatch support, as a botocore from before conditional writes."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = existing
        self.puts: list[str] = []

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import ParamValidationError

        if "IfNoneMatch" in kwargs:
            raise ParamValidationError(report="Unknown parameter in input: IfNoneMatch")
        self.puts.append(kwargs["Key"])
        self.existing.add(kwargs["Key"])
        return {}

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        if kwargs["Key"] in self.existing:
            return {}
        raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")


def test_conditional_create_falls_back_on_an_old_botocore() -> None:
    from lambdas.trace_processor.aws import put_bytes

    s3 = _OldBotocoreS3(existing=set())
    loc = S3Location(BUCKET, "reports/alice/j1/.notified-Completed")
    # WHEN the marker is created twice THEN the first call writes it and the second finds it
    assert put_bytes(s3, loc, b"", content_type="text/plain", only_if_absent=True) is True  # type: ignore[arg-type]
    assert put_bytes(s3, loc, b"", content_type="text/plain", only_if_absent=True) is False  # type: ignore[arg-type]
    assert s3.puts == [loc.key]


def test_the_merge_holds_a_bounded_slice_of_each_partial_and_keeps_every_rank_in_the_table() -> None:
    from profstack.analysis.merge import MAX_FULL_RANK_SECTIONS, PartialMerger

    # GIVEN 3 x MAX_FULL_RANK_SECTIONS one-rank partials, arriving highest rank first, each with a bulky section
    base = _example()
    engine = ProfStackEngine()
    n = 3 * MAX_FULL_RANK_SECTIONS
    template = _one_rank(base, 0)
    merger = PartialMerger(lambda table: engine.cross_rank(table, {}))
    for rank in reversed(range(n)):
        part = json.loads(json.dumps(template))
        part["ranks"][0]["rank"] = rank
        part["ranks"][0]["padding"] = "x" * 20_000  # what makes a real rank section large (kernel tables)
        part["inputs"][0]["rank"] = rank
        part["runs"][0]["ranks"] = [str(rank)]
        assert merger.add(part) is None
    merged = merger.finish([])
    # THEN every rank is in the cross-rank table and its run (stragglers and balance judge all of them)
    assert merged["cross_rank"]["rank_count"] == n
    assert len(merged["cross_rank"]["table"]) == n
    assert len(merged["inputs"]) == n
    # AND only the lowest MAX_FULL_RANK_SECTIONS sections are kept whole, said in a warning (before: every section,
    # so 10,000 ranks made a 784 MB summary.json and a 6.9 GB merge)
    assert [r["rank"] for r in merged["ranks"]] == list(range(MAX_FULL_RANK_SECTIONS))
    (cut,) = [w for w in merged["warnings"] if w["error_type"] == "RankSectionsOmitted"]
    assert f"{n - MAX_FULL_RANK_SECTIONS:,} of {n:,}" in cut["message"]
    section = len(json.dumps(template["ranks"][0])) + 20_000
    size = len(json.dumps(merged))
    assert size < MAX_FULL_RANK_SECTIONS * section * 1.05 + n * 2_500, size  # rows, inputs, findings: ~2 KB a rank
    # AND a partial whose rank section lacks what the cross-rank row reads is refused, not folded in
    broken = json.loads(json.dumps(template))
    del broken["ranks"][0]["temporal_breakdown"]
    assert "temporal_breakdown" in (merger.add(broken) or "")


class _HeadOnlyS3:
    """get_object with a Range, as S3 answers it: the first bytes of the stored object."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ranges: list[str] = []

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        import io

        self.ranges.append(kwargs["Range"])
        end = int(kwargs["Range"].split("-")[1])
        return {"Body": io.BytesIO(self.data[: end + 1])}


def test_a_crafted_gzip_is_routed_by_its_events_not_its_compressed_size() -> None:
    import gzip

    from lambdas.trace_processor.routing import SAMPLE_BYTES, sample_estimate

    # GIVEN a .json.gz of 2 M tiny events (what compresses ~200:1; the reported one held 31.6 M in 7.3 MB)
    event = b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1},'
    data = gzip.compress(b'{"traceEvents":[' + event * 2_000_000 + b'{"ph":"M"}]}', compresslevel=6)
    obj = S3Object(BUCKET, "crafted.pt.trace.json.gz", len(data))
    s3 = _HeadOnlyS3(data)
    # WHEN its head is sampled
    sampled = sample_estimate(s3, obj)
    # THEN only the head was read, and the estimate is the file's work within a factor of two (the fixed 15:1
    # would have said ~0.05 M events and sent it to one Lambda whatever its event count)
    assert s3.ranges == [f"bytes=0-{SAMPLE_BYTES - 1}"]
    assert sampled.events is not None
    assert 1_000_000 <= sampled.events <= 4_000_000
    assert sampled.json_bytes is not None
    assert sampled.json_bytes > 15 * len(data)
    # AND with the event bound below it, the file goes to the Processing job
    bounds = {"SINGLE_LAMBDA_MAX_EVENTS": "1000000", "SINGLE_LAMBDA_MAX_FILE_BYTES": str(2**40)}
    assert route_for(sampled, _env(**bounds)) == "processing"
    assert route_for(obj, _env(**bounds)) == "lambda"
    # AND a head that does not inflate, or a small file, keeps the default estimate
    assert sample_estimate(_HeadOnlyS3(b"\x1f\x8b" + b"x" * 200_000), replace_size(obj, 200_000)).events is None
    assert sample_estimate(s3, replace_size(obj, 1_000)) == replace_size(obj, 1_000)


def replace_size(obj: S3Object, size: int) -> S3Object:
    from dataclasses import replace

    return replace(obj, size=size)
