"""TensorFlow / JAX profiles (``*.xplane.pb``): found where their profilers write them, read as Kineto events.

The real sample (samples/traces/xplane/jax_cpu_mlp) was recorded by JAX 0.10.2's profiler on a CPU
(scripts/make_xplane_samples.py): a host plane only. The GPU and TPU layouts are XSpaces built here with the same
message classes, following what XLA's CUPTI collector and XProf write (stream lines ``Stream #<id>``, a
``correlation_id`` stat on launches and kernels, derived ``XLA Ops`` lines).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack import layout
from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.analysis import xplane as xp
from profstack.analysis.errors import TraceSourceError
from profstack.analysis.sources import BytesTraceSource
from tests.conftest import TRACES_DIR

JAX_SAMPLE = TRACES_DIR / "xplane" / "jax_cpu_mlp"


def _summary(sources: list[Any]) -> dict[str, Any]:
    return dict(analyze(sources, AnalysisOptions()).summary)


def _xspace(planes: list[dict[str, Any]]) -> bytes:
    """An XSpace: planes of {name, lines: [{name, id, ts_ns, events: [(name, offset_ps, dur_ps, {stat: value})]}]}."""
    space = xp._classes()["XSpace"]()
    for spec in planes:
        plane = space.planes.add(name=spec["name"])
        names: dict[str, int] = {}
        stats: dict[str, int] = {}
        for line_spec in spec["lines"]:
            line = plane.lines.add(name=line_spec["name"], id=line_spec.get("id", 1), timestamp_ns=line_spec["ts_ns"])
            for name, offset_ps, dur_ps, ev_stats in line_spec["events"]:
                mid = names.setdefault(name, len(names) + 1)
                plane.event_metadata[mid].id = mid
                plane.event_metadata[mid].name = name
                event = line.events.add(metadata_id=mid, offset_ps=offset_ps, duration_ps=dur_ps)
                for stat_name, value in ev_stats.items():
                    sid = stats.setdefault(stat_name, len(stats) + 1)
                    plane.stat_metadata[sid].id = sid
                    plane.stat_metadata[sid].name = stat_name
                    stat = event.stats.add(metadata_id=sid)
                    if isinstance(value, int):
                        stat.int64_value = value
                    else:
                        stat.str_value = str(value)
    return bytes(space.SerializeToString())


US = 1_000_000  # ps per µs


def _gpu_space(*, with_xla_ops_line: bool = True) -> bytes:
    """3 steps of 1 ms; per step a host launch, a 400 µs kernel on stream 7, then a 100 µs D2H copy."""
    host_events: list[tuple[str, int, int, dict[str, Any]]] = []
    stream_events: list[tuple[str, int, int, dict[str, Any]]] = []
    xla_ops: list[tuple[str, int, int, dict[str, Any]]] = []
    for step in range(3):
        t0 = step * 1000 * US
        host_events.append(("train", t0, 1000 * US, {"step_num": step, "_r": 1}))
        host_events.append(("cuLaunchKernel", t0 + 10 * US, 5 * US, {"correlation_id": 100 + step}))
        host_events.append(("cuMemcpyDtoHAsync", t0 + 20 * US, 5 * US, {"correlation_id": 200 + step}))
        stream_events.append(("MemcpyD2H", t0 + 650 * US, 100 * US, {"correlation_id": 200 + step}))
        stream_events.append(("fusion_gemm", t0 + 200 * US, 400 * US, {"correlation_id": 100 + step}))
        xla_ops.append(("fusion", t0 + 200 * US, 400 * US, {}))
    device_lines = [{"name": "Stream #7(Compute)", "id": 7, "ts_ns": 0, "events": stream_events}]
    if with_xla_ops_line:
        device_lines.append({"name": "XLA Ops", "id": 10_001, "ts_ns": 0, "events": xla_ops})
    return _xspace(
        [
            {"name": "/host:CPU", "lines": [{"name": "python", "id": 42, "ts_ns": 0, "events": host_events}]},
            {"name": "/device:GPU:0", "lines": device_lines},
            {"name": "/host:metadata", "lines": []},
        ]
    )


def test_a_jax_profile_in_its_tensorboard_layout_gives_steps_and_top_ops() -> None:
    # GIVEN JAX's profile where JAX writes it: <logdir>/plugins/profile/<run>/<host>.xplane.pb
    sources = discover_sources([JAX_SAMPLE])
    assert [s.name for s in sources] == ["plugins/profile/run/host.xplane.pb"]
    # WHEN analysed
    summary = _summary(sources)
    (rank,) = summary["ranks"]
    # THEN the 8 StepTraceAnnotation steps are the steps (the last dropped, as for Kineto), with their times
    assert summary["complete"] is True
    assert summary["inputs"][0]["status"] == "ok"
    assert rank["steps"]["count"] == 7
    assert rank["window"]["steps"] == list(range(7))
    assert all(d["duration_us"] > 0 for d in rank["steps"]["durations"])
    # AND the XLA CPU ops (hlo_op names) are among the top host ops, and no GPU is claimed
    top = {op["name"] for op in rank["top_cpu_ops"]}
    assert "dot.1" in top
    assert "ThunkExecutor::Execute" in top
    assert rank["has_gpu"] is False


def test_a_gpu_xspace_gives_kernels_copies_launch_delays_and_busy_time_from_its_stream_lines() -> None:
    source = xp.as_kineto(BytesTraceSource(_gpu_space(), name="host.xplane.pb"))
    # (XLA launches with the driver API, cuLaunchKernel, outside HTA's runtime-call set: --launch-calls all)
    summary: dict[str, Any] = dict(analyze([source], AnalysisOptions(launch_calls="all")).summary)
    (rank,) = summary["ranks"]
    # THEN the stream line's work is the GPU's: 3 kernels and 3 copies (the XLA Ops line, which repeats the
    # kernels' time, is not counted again)
    assert rank["has_gpu"] is True
    assert rank["counts"]["gpu_kernels"] == 3
    assert rank["counts"]["gpu_memcpy"] == 3
    assert [k["name"] for k in rank["top_kernels_by_time"]] == ["fusion_gemm", "Memcpy DtoH"]
    # AND XLA's MemcpyD2H is a device-to-host copy (Kineto's name, so the direction split reads it)
    assert [m["direction"] for m in rank["memory_ops"]["memcpy"]] == ["DtoH"]
    # AND the host calls joined their GPU ops by correlation id: launch delays of 185 µs (kernel at 200, launch
    # ended at 15) and 625 µs (copy at 650, its call ended at 25), in each of the two steps
    assert rank["launch_delay"]["count"] == 4
    assert rank["launch_delay"]["max_us"] == pytest.approx(625.0)
    assert rank["launch_delay"]["mean_us"] == pytest.approx((185.0 + 625.0) / 2)
    # AND the two measured steps hold 400 µs of kernel and 100 µs of copy each
    assert rank["steps"]["count"] == 2
    assert rank["gpu_activity"]["kernel_time_us"] == pytest.approx(800.0)
    assert rank["gpu_activity"]["memcpy_time_us"] == pytest.approx(200.0)
    assert 0 < rank["temporal_breakdown"]["idle_pct"] < 100


def test_without_stream_lines_a_device_planes_xla_ops_are_its_activity() -> None:
    # GIVEN a TPU-like plane: no stream lines, only XProf's XLA Ops line
    space = _xspace(
        [
            {
                "name": "/host:CPU",
                "lines": [{"name": "main", "ts_ns": 0, "events": [("s", 0, 900 * US, {"step_num": 1})]}],
            },
            {
                "name": "/device:TPU:0",
                "lines": [{"name": "XLA Ops", "ts_ns": 0, "events": [("fusion.3", 100 * US, 300 * US, {})]}],
            },
        ]
    )
    events = json.loads(b"".join(xp.xspace_to_kineto(space)))["traceEvents"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert [(k["name"], k["ts"], k["dur"], k["args"]["device"]) for k in kernels] == [("fusion.3", 100.0, 300.0, 0)]


def test_a_file_that_is_not_an_xspace_is_one_failed_input_with_a_clear_error() -> None:
    bad = xp.as_kineto(BytesTraceSource(b"\xff\xfe not a protobuf \x00" * 10, name="x.xplane.pb"))
    good = BytesTraceSource(json.dumps({"traceEvents": []}).encode(), name="empty.pt.trace.json")
    result = analyze([bad, good], AnalysisOptions())
    failed = [i for i in result.summary["inputs"] if i["name"] == "x.xplane.pb"]
    assert failed
    assert failed[0]["status"] == "failed"
    assert "XSpace" in str(failed[0]["error"])


def test_an_xspace_beyond_the_size_the_reader_parses_whole_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xp, "MAX_XPLANE_BYTES", 100)
    src = xp.as_kineto(BytesTraceSource(_gpu_space(), name="big.xplane.pb"))
    with pytest.raises(TraceSourceError, match="XProf"):
        src.open()


def test_aggregated_events_are_skipped_and_the_event_cap_is_stated() -> None:
    space = xp.parse_xspace(_gpu_space())
    event = space.planes[0].lines[0].events.add(metadata_id=1)
    event.num_occurrences = 5
    doc = json.loads(b"".join(xp.xspace_to_kineto(space.SerializeToString())))
    assert doc["xplaneSkippedAggregated"] == 1
    assert "xplaneCutAtEvents" not in doc
    cut = json.loads(b"".join(xp.xspace_to_kineto(space.SerializeToString(), max_events=4)))
    assert cut["xplaneCutAtEvents"] == 4
    assert len(cut["traceEvents"]) == 4


def test_the_pipeline_takes_xplane_files_under_a_jobs_tensorboard_folder() -> None:
    assert layout.is_trace_key("tensorboard/alice/job-1/plugins/profile/2026_12_04/algo-1.xplane.pb")
    assert not layout.is_trace_key("tensorboard/alice/job-1/plugins/profile/2026_12_04/algo-1.xplane.pb.tmp")


_stat_value = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8))
_event = st.tuples(
    st.sampled_from(["cuLaunchKernel", "k", "MemcpyD2H", "Memset", "train", ""]),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.dictionaries(st.sampled_from(["correlation_id", "step_num", "bytes_transferred", "x"]), _stat_value, max_size=3),
)
_line = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["Stream #1", "Stream #x", "XLA Ops", "python", ""]),
        "id": st.integers(-5, 2**31),
        "ts_ns": st.integers(0, 2**40),
        "events": st.lists(_event, max_size=6),
    }
)
_plane = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["/host:CPU", "/device:GPU:0", "/device:GPU:3", "/device:TPU:1", "/host:metadata", ""]),
        "lines": st.lists(_line, max_size=3),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_plane, max_size=4))
def test_any_xspace_converts_to_json_the_engine_reads_without_an_internal_error(planes: list[dict[str, Any]]) -> None:
    data = _xspace(planes)
    doc = json.loads(b"".join(xp.xspace_to_kineto(data)))
    assert isinstance(doc["traceEvents"], list)
    result = analyze([xp.as_kineto(BytesTraceSource(data, name="fuzz.xplane.pb"))], AnalysisOptions())
    (item,) = result.summary["inputs"]
    assert item["status"] in {"ok", "partial", "failed"}
    if item["status"] == "failed":  # a trace with no events is named, not crashed on
        assert item["error"]


def test_the_sample_is_the_one_the_recording_script_describes() -> None:
    (pb,) = Path(JAX_SAMPLE).rglob("*.xplane.pb")
    names = {p.name for p in xp.parse_xspace(pb.read_bytes()).planes}
    assert {"/host:CPU", "/host:metadata"} <= names


# ------------------------------------------------------------------------ XSpace as XProf reads it (#43 item 5)


def _tf_host_gpu_space(n_gpus: int, *, steps: int = 3) -> bytes:
    """A TensorFlow-style host XSpace: the CUPTI launches merged into /host:CPU and named after their kernels (linked
    by correlation_id only), one GPU plane per device; per step and device a 300 µs kernel launched 50 µs before."""
    host: list[tuple[str, int, int, dict[str, Any]]] = []
    devices: list[list[tuple[str, int, int, dict[str, Any]]]] = [[] for _ in range(n_gpus)]
    for step in range(steps):
        t0 = step * 1000 * US
        host.append(("train", t0, 1000 * US, {"step_num": step}))
        for d in range(n_gpus):
            corr = 1000 * d + step
            kernel = f"volta_sgemm_128x64_nn_dev{d}"
            host.append((kernel, t0 + (10 + d) * US, 5 * US, {"correlation_id": corr}))  # named after the kernel
            devices[d].append((kernel, t0 + (60 + d) * US, 300 * US, {"correlation_id": corr}))
    planes: list[dict[str, Any]] = [
        {"name": "/host:CPU", "lines": [{"name": "tf_Compute", "id": 42, "ts_ns": 0, "events": host}]}
    ]
    planes += [
        {"name": f"/device:GPU:{d}", "lines": [{"name": "Stream #14(Compute)", "id": 14, "ts_ns": 0, "events": ev}]}
        for d, ev in enumerate(devices)
    ]
    return _xspace(planes)


def test_launches_are_recognised_by_correlation_id_whatever_their_name(tmp_path: Path) -> None:
    # GIVEN a TensorFlow host XSpace whose launches carry their kernel's name, not cuLaunchKernel
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(_tf_host_gpu_space(1))
    summary: dict[str, Any] = dict(analyze(discover_sources([path]), AnalysisOptions(launch_calls="all")).summary)
    (rank,) = summary["ranks"]
    # THEN they are launches (before: CPU ops, the launches "missing"): delays of 45 µs, none left as a CPU op
    assert rank["launch_delay"]["count"] == 2
    assert rank["launch_delay"]["mean_us"] == pytest.approx(45.0)
    assert not [op for op in rank["top_cpu_ops"] if op["name"].startswith("volta_sgemm")]
    # AND the idle time is split with the launches known, and no BatchSize "without a host bottleneck" guess
    assert rank["idle_breakdown"]["causes"]["gpu_side_us"] is not None
    assert summary["complete"], summary["warnings"]


def test_a_host_with_several_gpus_is_one_rank_per_device(tmp_path: Path) -> None:
    # GIVEN one host's XSpace with 3 GPU planes (TensorFlow, MirroredStrategy-like)
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "host.xplane.pb").write_bytes(_tf_host_gpu_space(3))
    sources = discover_sources([tmp_path])
    # THEN three sources, one per device plane, ranks 0-2 of a world of 3
    assert [s.name for s in sources] == [f"plugins/profile/run/host.xplane.pb#/device:GPU:{d}" for d in range(3)]
    summary = _summary(sources)
    assert [r["rank"] for r in summary["ranks"]] == [0, 1, 2]
    # AND each rank holds its own device's kernels and launches only (before: one rank over 3 GPUs, partial with
    # MultipleDevicesError)
    assert summary["complete"], summary["warnings"]
    assert not [w for w in summary["warnings"] if w["error_type"] == "MultipleDevicesError"]
    for r in summary["ranks"]:
        (k,) = r["top_kernels_by_time"]
        assert k["name"].endswith(f"dev{r['rank']}")
        assert r["counts"]["gpu_kernels"] == 3
        assert r["distributed"]["world_size"] == 3
    # AND they are one run
    assert len(summary["runs"]) == 1


def test_several_hosts_xspaces_are_one_job(tmp_path: Path) -> None:
    # GIVEN a profile run folder with two hosts' XSpaces, 2 GPUs each
    run = tmp_path / "plugins" / "profile" / "2026_12_04_10_00_00"
    run.mkdir(parents=True)
    for host in ("worker-0", "worker-1"):
        (run / f"{host}.xplane.pb").write_bytes(_tf_host_gpu_space(2))
    summary = _summary(discover_sources([tmp_path]))
    # THEN four ranks of one job: worker-0's devices 0-1, worker-1's 2-3, one run, world size 4
    assert [r["rank"] for r in summary["ranks"]] == [0, 1, 2, 3]
    assert {r["distributed"]["world_size"] for r in summary["ranks"]} == {4}
    assert [r["sources"][0].split("2026_12_04_10_00_00/")[-1] for r in summary["ranks"]] == [
        "worker-0.xplane.pb#/device:GPU:0",
        "worker-0.xplane.pb#/device:GPU:1",
        "worker-1.xplane.pb#/device:GPU:0",
        "worker-1.xplane.pb#/device:GPU:1",
    ]
    assert len(summary["runs"]) == 1
    assert summary["cross_rank"]["rank_count"] == 4


def test_tpu_cores_are_ranks_read_from_their_xla_ops() -> None:
    # GIVEN a TPU host with two core planes (no stream lines: XProf's XLA Ops line is their activity)
    ops = [("fusion.1", 100 * US, 400 * US, {}), ("convolution.2", 600 * US, 200 * US, {})]
    host = [("train", 0, 1000 * US, {"step_num": 0}), ("train", 1000 * US, 1000 * US, {"step_num": 1})]
    data = _xspace(
        [{"name": "/host:CPU", "lines": [{"name": "python", "id": 1, "ts_ns": 0, "events": host}]}]
        + [
            {"name": f"/device:TPU:{d}", "lines": [{"name": "XLA Ops", "id": 2, "ts_ns": 0, "events": ops}]}
            for d in range(2)
        ]
    )
    sources = xp.expand([xp.as_kineto(BytesTraceSource(data, name="tpu-host.xplane.pb"))])
    summary = _summary(sources)
    # THEN two ranks, each busy 600 µs of its step
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    for r in summary["ranks"]:
        assert r["gpu_activity"]["kernel_time_us"] == pytest.approx(600.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_plane, max_size=5))
def test_plane_names_are_read_without_parsing(planes: list[dict[str, Any]]) -> None:
    import io

    # GIVEN any XSpace WHEN its plane names are scanned THEN they are the parsed names, in order
    data = _xspace(planes)
    assert xp.plane_names(io.BytesIO(data)) == [p.name for p in xp.parse_xspace(data).planes]
    # AND a cut file is an error, or (where its first bytes still read as planes) the names the parser reads
    cut = data[: len(data) // 2] + b"\x0a\xff"
    try:
        parsed = [p.name for p in xp.parse_xspace(cut).planes]
    except TraceSourceError:
        parsed = None
    try:
        scanned = xp.plane_names(io.BytesIO(cut))
    except TraceSourceError:
        scanned = None
    assert scanned is None or parsed is None or scanned == parsed


def test_a_recorded_two_process_jax_job_is_one_job_with_its_late_process_found() -> None:
    # GIVEN two JAX processes' XSpaces (CPU collectives over gloo; process 1 sleeps 20 ms before every step),
    # recorded by scripts/make_xplane_samples.py
    summary = _summary(discover_sources([TRACES_DIR / "xplane" / "jax_cpu_2proc"]))
    # THEN they are one job of two ranks (before: two rank-0 entries of two runs)
    assert summary["complete"], summary["warnings"]
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert len(summary["runs"]) == 1
    # AND XLA's all-reduce on the CPU is the ranks' communication, and the late process is the straggler
    for r in summary["ranks"]:
        assert r["communication"]["host_collectives"]["by_name"][0]["name"].startswith("all-reduce")
    (straggler,) = [f for f in summary["findings"] if f["rule_id"] == "Straggler"]
    assert straggler["ranks"] == [1]


def test_a_hostile_xspace_cannot_multiply_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an XSpace with more device planes holding work than a host has devices (bound lowered to 2 here)
    monkeypatch.setattr(xp, "MAX_DEVICE_RANKS", 2)
    sources = xp.expand([xp.as_kineto(BytesTraceSource(_tf_host_gpu_space(3), name="h.xplane.pb"))])
    # THEN it is read whole, one source, as before (its result then says MultipleDevicesError)
    assert [s.name for s in sources] == ["h.xplane.pb"]
    # AND a plane scan stops at its bound with an error (no expansion), never reads on without end
    monkeypatch.setattr(xp, "MAX_PLANES_SCANNED", 2)
    import io

    with pytest.raises(TraceSourceError):
        xp.plane_heads(io.BytesIO(_tf_host_gpu_space(3)))
