"""Generate HTA reference values for every sample trace (samples/traces/reference_values/hta_<version>.json).

Run it with the Python of a virtualenv that holds exactly one HTA release (both releases import as ``hta``):

    python3.11 -m venv /tmp/hta05  && /tmp/hta05/bin/pip install -r requirements/bench.txt
    python3.11 -m venv /tmp/hta061 && /tmp/hta061/bin/pip install -r requirements/hta061.txt
    /tmp/hta05/bin/python  scripts/hta_reference.py            # -> reference_values/hta_0.5.0.json
    /tmp/hta061/bin/python scripts/hta_reference.py            # -> reference_values/hta_0.6.1.json

Nothing here is typed by hand: every number comes from HTA's own API (TraceAnalysis) on the sample files,
with HTA's defaults (``include_last_profiler_step=False``) and with ``include_last_profiler_step=True``.
A trace HTA cannot analyse is recorded with the error HTA raised, so the agreement tests can say why.
This script imports HTA and pandas; it is not part of the ProfStack package and ProfStack never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import logging
import math
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "samples" / "traces"

#: every sample trace, keyed like the reference files; a list is one job's ranks (rank -> file)
CASES: dict[str, dict[int, str]] = {
    "ns_resolution": {0: "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"},
    "nccl_data": {0: "hta/nccl_parser_config/nccl_data.json.gz"},
    "negative_queue": {0: "hta/negative_queue_length_values_check/rank0.json.gz"},
    "df_index_resolver": {1: "hta/df_index_resolver/df_index_resolver.json.gz"},
    "trace_diff_test": {1: "hta/trace_diff/test/test.json.gz"},
    "trace_filter_2ranks": {0: "hta/trace_filter/sampled_rank-0.json.gz", 1: "hta/trace_filter/sampled_rank-1.json.gz"},
    "alexnet": {0: "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"},
    "amd_mi250": {0: "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"},
    "triton_example": {0: "hta/triton_example/triton_example.json.gz"},
    "cpu_only": {34: "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"},
    "inference_rank_1": {1: "hta/trace_file_list/inference_rank_1.json.gz"},
    "kineto_resnet50_nw0": {0: "kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"},
    "kineto_resnet50_nw4": {0: "kineto_tb_plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"},
    "own_cpu_train_loop": {0: "own/cpu_train_loop_rank0.pt.trace.json"},
    "own_cpu_train_loop_mem_stack": {0: "own/cpu_train_loop_mem_stack_rank0.pt.trace.json.gz"},
    # added in wave 3 (HTA's other test traces at the same commit): traces nobody tuned ProfStack for
    "cupti_profiler": {0: "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"},
    "cuda_event_sync": {0: "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"},
    "cuda_event_sync_multi_stream": {0: "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"},
    "simple_add": {0: "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"},
    "simple_add_et_trace": {0: "hta/execution_trace/benchmark_simple_add_trace.json.gz"},
    "distributed_info_unavailable": {0: "hta/distributed_info_unavailable/distributed_info_not_found.json.gz"},
    "rank_non_gpu": {0: "hta/rank_non_gpu/rank_non_gpu.json.gz"},
    "rank_unavailable": {0: "hta/rank_unavailable/rank_not_found.json.gz"},
    "mtia_inference": {0: "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz"},
    "mtia_single_rank": {0: "hta/mtia_trace_single_rank/mtia_rank_0.json.gz"},
    "trace_compare_base": {1: "hta/trace_compare/base/base.json.gz"},
    "trace_compare_test": {1: "hta/trace_compare/test/test.json.gz"},
    "trace_diff_control": {3: "hta/trace_diff/control/control.json.gz"},
    # AMD's TraceLens test traces: MI300X / MI210 on ROCm (numbers as strings), vLLM and SGLang serving with HIP
    # graphs, H100 and B200 eager runs, a GPU-only trace
    "tl_mi300_qwen": {0: "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"},
    "tl_mi300_bert": {0: "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"},
    "tl_mi300_nsfw": {0: "tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz"},
    "tl_mi300_resnet": {0: "tracelens/mi300/resnet_act_checkpoint.json.gz"},
    "tl_h100_bert": {0: "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"},
    "tl_b200_eager": {0: "tracelens/b200/eager_trace.json.gz"},
    "tl_vllm_decode_graph": {0: "tracelens/inference/vllm_decode_full/graph_execution.json.gz"},
    "tl_vllm_piecewise_graph": {0: "tracelens/inference/vllm_prefilldecode_piecewise/graph_execution.json.gz"},
    "tl_sglang_decode": {0: "tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"},
    "tl_sglang_prefilldecode": {0: "tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"},
    "tl_mi210_gpu_only": {0: "tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz"},
    "tl_torch_compile_triton": {0: "tracelens/torch_compile_triton/trace.json.gz"},
    # the recorded ground-truth corpus (#43 item 7): CPU-only, so HTA's answer is its error
    "own_gt_gloo_late_rank": {
        0: "own/ground_truth/gloo_late_rank/rank0.1796418090206031005.pt.trace.json.gz",
        1: "own/ground_truth/gloo_late_rank/rank1.1796418090204612160.pt.trace.json.gz",
        2: "own/ground_truth/gloo_late_rank/rank2.1796418090208938527.pt.trace.json.gz",
        3: "own/ground_truth/gloo_late_rank/rank3.1796418090210766728.pt.trace.json.gz",
    },
    "own_gt_dataloader_bound": {0: "own/ground_truth/dataloader_bound/loader.1796418111080613562.pt.trace.json.gz"},
    "own_gt_lightning_cpu": {
        0: "own/ground_truth/lightning_cpu/"
        "fit-profile-[Strategy]SingleDeviceStrategy.training_step.1796418117272428219.pt.trace.json.gz"
    },
    "own_gt_accelerate_cpu": {0: "own/ground_truth/accelerate_cpu/profile_0.json.gz"},
}

NOTES_COMMON = [
    "default = TraceAnalysis(include_last_profiler_step=False): HTA drops CPU ops that start at/after the last "
    "ProfilerStep and the GPU kernels launched by them",
    "include_last_step = include_last_profiler_step=True",
    "float (ns-resolution) ts are rounded by HTA: ts -> ceil, ts+dur -> floor (integer us) before any analysis",
    "temporal_breakdown: kernel_time(us) = end of last GPU row - start of first (every row with stream != -1, "
    "cuda_sync rows included), idle = kernel_time - union of those rows; compute = union of COMPUTATION rows; "
    "non_compute = rest",
    "idle_time_breakdown: per stream, rows of category kernel/gpu_memcpy/gpu_memset (and mtia_ccp_events in 0.6) "
    "only, consecutive_kernel_delay=30",
    "top_kernels: sum/max/min/mean/stddev are across ranks of the per-rank sum; kernels beyond duration_ratio=0.8 / "
    'num_kernels=10 are folded into "others"',
    "cuda_launch_stats: one row per (launch, GPU op) pair joined by correlation; launch calls = cudaLaunchKernel, "
    "cudaLaunchKernelExC, MTIA runFunction, cudaMemcpyAsync, cudaMemsetAsync; cpu_duration = runtime call dur, "
    "gpu_duration = op dur, launch_delay = op start - runtime call end (us) clipped at 0 by HTA; summary quantiles "
    "(p50/p90/p99) computed from HTA's per-row output with pandas Series.quantile (linear interpolation); "
    "negative_raw = rows HTA clipped (raw delay < 0)",
    "error: HTA raised while loading or analysing the trace; the message is HTA's",
]

NOTES_BY_VERSION = {
    "0.5.0": [
        "kernel type: ^nccl.*Kernel -> COMMUNICATION; ^Memcpy|^Memset|^dma -> MEMORY; names matching "
        "(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync) -> OTHER; else COMPUTATION (so Stream Wait Event is "
        "COMPUTATION, Stream Sync / Context Sync are OTHER)",
    ],
    "0.6.1": [
        "kernel type: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*) -> COMMUNICATION; (^(hip)?Memcpy)|(^(hip)?Memset)|"
        "(^dma) -> MEMORY; names matching the non-compute pattern (^nccl, Memcpy, Memset, dma, ^.*Sync, "
        "^Stream Wait Event, launch calls, ^hip, ^hccl, MTIA job names) -> OTHER; else COMPUTATION (so Stream Wait "
        "Event, Stream Sync and Context Sync are all OTHER)",
    ],
}


def _records(df: Any) -> list[dict[str, Any]]:
    return [{str(k): _num(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _num(value: Any) -> Any:
    """A plain JSON value: numpy scalars unwrapped, NaN as None."""
    v = value.item() if hasattr(value, "item") else value
    return None if isinstance(v, float) and math.isnan(v) else v


def _stats(series: Any) -> dict[str, Any]:
    return {
        "mean": round(float(series.mean()), 3),
        "p50": _num(series.quantile(0.5)),
        "p90": _num(series.quantile(0.9)),
        "p99": _num(series.quantile(0.99)),
        "max": _num(series.max()),
        "sum": _num(series.sum()),
    }


def _raw_negative(analyzer: Any, rank: int, correlations: Any) -> int:
    """Rows whose raw launch delay HTA clipped (recomputed from the same joined rows, before the clip)."""
    import pandas as pd

    df = analyzer.t.get_trace(rank)
    cpu = df[df["stream"].eq(-1) & df["correlation"].isin(correlations)][["correlation", "ts", "dur"]]
    gpu = df[df["stream"].ne(-1) & df["correlation"].isin(correlations)][["correlation", "ts"]]
    joined = pd.merge(cpu, gpu, on="correlation", how="inner")
    return int(((joined["ts_y"] - joined["ts_x"] - joined["dur"]) < 0).sum())


def analyse(files: dict[int, str], include_last: bool) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    trace_files = {rank: str(TRACES / rel) for rank, rel in files.items()}
    analyzer = TraceAnalysis(trace_files=trace_files, trace_dir=str(TRACES), include_last_profiler_step=include_last)
    ranks = sorted(analyzer.t.traces)
    out: dict[str, Any] = {}
    out["profiler_steps"] = [int(i) for i in analyzer.t.get_iterations(ranks[0])]
    out["temporal_breakdown"] = _records(analyzer.get_temporal_breakdown(visualize=False))
    idle, _ = analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False)
    out["idle_time_breakdown"] = _records(idle)
    ktype, kmetrics = analyzer.get_gpu_kernel_breakdown(visualize=False)
    out["kernel_type_breakdown"] = _records(ktype)
    out["top_kernels"] = _records(kmetrics)
    launch = analyzer.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    stats: dict[str, Any] = {}
    for rank in ranks:
        df = launch.get(rank)
        if df is None or len(df) == 0:
            stats[str(rank)] = {"n": 0}
            continue
        stats[str(rank)] = {
            "n": len(df),
            "negative_raw": _raw_negative(analyzer, rank, df["correlation"].unique()),
            "cpu_duration": _stats(df["cpu_duration"]),
            "gpu_duration": _stats(df["gpu_duration"]),
            "launch_delay": _stats(df["launch_delay"]),
        }
    out["cuda_launch_stats"] = stats
    out["n_rows_after_filter"] = {str(rank): len(analyzer.t.get_trace(rank)) for rank in ranks}
    return out


def run_case(files: dict[int, str], include_last: bool) -> dict[str, Any]:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink):
            return analyse(files, include_last)
    except Exception as exc:  # HTA's own failure is a reference fact, recorded as such
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]} (at {where})"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="output file (default reference_values/hta_<version>.json)")
    parser.add_argument("--only", nargs="*", default=None, help="case keys to compute (default: all)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    try:
        version = importlib.metadata.version("traceinsight")
        dist = "traceinsight"
    except importlib.metadata.PackageNotFoundError:
        version = importlib.metadata.version("HolisticTraceAnalysis")
        dist = "HolisticTraceAnalysis"
    pandas_version = importlib.metadata.version("pandas")
    out_path = args.out or TRACES / "reference_values" / f"hta_{version}.json"
    doc: dict[str, Any] = {
        "tool": f"{dist} {version} (pip, imports as hta), pandas {pandas_version}, "
        f"Python {platform.python_version()}, parser backend json",
        "generator": "scripts/hta_reference.py",
        "notes": NOTES_COMMON + NOTES_BY_VERSION.get(version, []),
        "traces": {},
    }
    if args.only and out_path.exists():  # recompute the named cases, keep the others as they are
        doc["traces"] = json.loads(out_path.read_text(encoding="utf-8")).get("traces", {})
    for key, files in CASES.items():
        if args.only and key not in args.only:
            continue
        entry: dict[str, Any] = {
            "files": [files[r] for r in sorted(files)] if len(files) > 1 else next(iter(files.values()))
        }
        entry["ranks"] = sorted(files)
        entry["default"] = run_case(files, include_last=False)
        entry["include_last_step"] = run_case(files, include_last=True)
        doc["traces"][key] = entry
        print(key, entry["default"].get("error", "ok"), file=sys.stderr)
    out_path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(f"wrote {out_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
