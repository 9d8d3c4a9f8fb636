"""Record ProfStack's ground-truth corpus: real profiler traces of known workloads, each with its truth (#43 item 7).

Every workload runs under ``torch.profiler`` (or JAX's / Lightning's / Accelerate's profiler) AND is measured
independently of the profiler: CUDA events around the GPU work, ``time.perf_counter`` wall clocks around host waits,
``torch.cuda.max_memory_allocated`` for allocator peaks. The truth goes to ``truth.yaml`` beside the trace files, in
``<out>/<workload>/``: JSON text (JSON is YAML), named so that nothing that looks for ``*.json`` traces takes it for
one; ``tests/unit/analysis/test_ground_truth.py`` compares the engine with it and skips, saying
why, each workload not recorded yet.

Run it in one go where the workloads can run::

    python scripts/record_ground_truth.py                 # every workload this machine can run
    python scripts/record_ground_truth.py --only gloo_late_rank dataloader_bound
    python scripts/record_ground_truth.py --list

CPU workloads (torch CPU is enough; recorded in this repository with torch 2.13.0+cpu):

* ``gloo_late_rank``: 4 processes, gloo, one rank (3) sleeps a known 50 ms before every all-reduce;
* ``dataloader_bound``: a DataLoader whose dataset sleeps a known time per batch beside a fixed computation;
* ``lightning_cpu``: Lightning's ``PyTorchProfiler`` (its files carry ``[Strategy]...`` brackets in their names);
* ``accelerate_cpu``: Hugging Face Accelerate's ``ProfileKwargs`` (``profile_<process>.json``), as the Trainer uses.

GPU workloads (need CUDA; written for one run on a lent GPU machine, about 5 minutes on an H100/H200):

* ``sub_us_kernels``: 6,400 sub-microsecond elementwise kernels a step (HTA's whole-µs rounding loses them);
* ``decode_loop``: an eager GPT-2-sized decode loop (random weights; no download);
* ``graph_replays``: the same step captured in a CUDA graph and replayed;
* ``gemm_<dtype>``: bf16, fp16, fp8 (``torch._scaled_mm``, sm89+), int8 (``torch._int_mm``), tf32 GEMMs, alone, so
  each trace's precision mix is known;
* ``copies``: every copy kind (HtoD pageable and pinned, DtoH, DtoD, memset; PtoP with two GPUs), bytes known;
* ``gloo_late_rank_gpu``: the late-rank job with CUDA tensors on one GPU;
* ``memory_peak``: allocations of known size with ``profile_memory``;
* ``jax_gpu``: a jitted JAX loop under ``jax.profiler.trace`` (needs ``jax[cuda]``);
* ``lightning_gpu``, ``accelerate_gpu``: the CPU workloads' framework profilers on the GPU.

Nothing here downloads a model or a data set. The traces are gzipped; keep the corpus small (tens of KB a
workload): the step counts below are chosen for that. Provenance: samples/traces/README.md, SHA256SUMS.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRUTH_FILE = "truth.yaml"  # JSON text (JSON is YAML): not a *.json a trace search would take for a trace
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "samples" / "traces" / "own" / "ground_truth"
WORKLOADS: dict[str, tuple[str, Callable[[Path], dict[str, Any]]]] = {}


def workload(name: str, needs: str) -> Callable[[Callable[[Path], dict[str, Any]]], Callable[[Path], dict[str, Any]]]:
    def register(fn: Callable[[Path], dict[str, Any]]) -> Callable[[Path], dict[str, Any]]:
        WORKLOADS[name] = (needs, fn)
        return fn

    return register


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    if "tensorflow" in sys.modules:  # a TensorFlow workload ran (its virtualenv need not hold torch)
        out["tensorflow"] = str(sys.modules["tensorflow"].__version__)
    try:
        import torch
    except ImportError:
        return out
    out["torch"] = torch.__version__
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def _gzip_traces(folder: Path) -> list[str]:
    """Gzip every ``*.json`` trace in ``folder`` (recursively) in place; the names written, relative to it (an
    XSpace, ``*.xplane.pb``, is kept as its profiler wrote it)."""
    names = [str(p.relative_to(folder)) for p in folder.rglob("*.xplane.pb")]
    for path in sorted(folder.rglob("*.json")):
        with (
            path.open("rb") as src,
            open(str(path) + ".gz", "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as dst,
        ):
            shutil.copyfileobj(src, dst)
        path.unlink()
        names.append(str(path.relative_to(folder)) + ".gz")
    return sorted(names)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------------------------
# CPU workloads
# ---------------------------------------------------------------------------------------------------------------

GLOO_WORLD = 4
GLOO_LATE_RANK = 3
GLOO_DELAY_S = 0.050
GLOO_STEPS = 6  # schedule wait=1 warmup=1 active=4


def _gloo_rank(rank: int, world: int, port: int, out: str, device: str, result: Any) -> None:  # noqa: PLR0917 - mp.spawn passes them positionally
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dev = torch.device(device)
    a = torch.randn(256, 256, device=dev)
    grad = torch.ones(4096, device=dev)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    allreduce_us: list[float] = []
    step_us: list[float] = []
    with profile(
        activities=acts,
        schedule=schedule(wait=1, warmup=1, active=GLOO_STEPS - 2),
        on_trace_ready=tensorboard_trace_handler(out, worker_name=f"rank{rank}"),
    ) as prof:
        for _ in range(GLOO_STEPS):
            t0 = time.perf_counter()
            with record_function("## forward_backward ##"):
                for _ in range(4):
                    a = torch.tanh(a @ a) * 0.5
            if rank == GLOO_LATE_RANK:
                time.sleep(GLOO_DELAY_S)  # the known lateness: every peer waits this long in the all-reduce
            if device == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            dist.all_reduce(grad)
            if device == "cuda":
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            allreduce_us.append((t2 - t1) * 1e6)
            step_us.append((t2 - t0) * 1e6)  # before prof.step(), which writes the trace after the last step
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    # the profiled steps are the active ones: steps 2..GLOO_STEPS-1 (ProfilerStep#2.. in the trace)
    result[rank] = {"allreduce_wall_us": allreduce_us[2:], "step_wall_us": step_us[2:]}


def _gloo_job(folder: Path, device: str) -> dict[str, Any]:
    import torch.multiprocessing as mp

    manager = mp.Manager()
    result = manager.dict()
    port = _free_port()
    mp.spawn(_gloo_rank, args=(GLOO_WORLD, port, str(folder), device, result), nprocs=GLOO_WORLD, join=True)
    per_rank = {str(r): dict(result[r]) for r in sorted(result.keys())}
    return {
        "world_size": GLOO_WORLD,
        "backend": "gloo",
        "late_rank": GLOO_LATE_RANK,
        "delay_us": GLOO_DELAY_S * 1e6,
        "profiled_steps": GLOO_STEPS - 2,
        "per_rank": per_rank,
        "what": "rank 3 sleeps delay_us before every all_reduce; allreduce_wall_us is perf_counter around "
        "dist.all_reduce (the host's wait in the collective), step_wall_us around the whole step",
    }


@workload("gloo_late_rank", "cpu")
def gloo_late_rank(folder: Path) -> dict[str, Any]:
    return _gloo_job(folder, "cpu")


DL_BATCH_SLEEP_S = 0.020
DL_STEPS = 7  # wait=1 warmup=1 active=5


class _SlowDataset:
    """A map-style dataset whose batches take a known time to produce (a sleep standing for decoding/augmenting)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> Any:
        import torch

        if i % 8 == 0:  # one sleep per batch of 8
            time.sleep(DL_BATCH_SLEEP_S)
        return torch.full((64,), float(i))


@workload("dataloader_bound", "cpu")
def dataloader_bound(folder: Path) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(_SlowDataset(), batch_size=8, num_workers=0)
    w = torch.randn(64, 64)
    data_us: list[float] = []
    step_us: list[float] = []
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=DL_STEPS - 2),
        on_trace_ready=tensorboard_trace_handler(str(folder), worker_name="loader"),
    ) as prof:
        it = iter(loader)
        for _ in range(DL_STEPS):
            t0 = time.perf_counter()
            batch = next(it)
            t1 = time.perf_counter()
            for _ in range(200):
                batch = torch.tanh(batch @ w)
            data_us.append((t1 - t0) * 1e6)
            step_us.append((time.perf_counter() - t0) * 1e6)  # before prof.step(): it writes the trace at the end
            prof.step()
    return {
        "batch_sleep_us": DL_BATCH_SLEEP_S * 1e6,
        "profiled_steps": DL_STEPS - 2,
        "data_wall_us": data_us[2:],
        "step_wall_us": step_us[2:],
        "what": "data_wall_us is perf_counter around next(DataLoader iterator), step_wall_us around the step",
    }


TF_BATCH_SLEEP_S = 0.020
TF_STEPS = 8


@workload("tf_input_bound", "tensorflow")
def tf_input_bound(folder: Path) -> dict[str, Any]:
    """TensorFlow's own profiler (an XSpace, as TensorBoard's profile plugin reads it) on a step whose input comes from
    a tf.data pipeline that takes a known 20 ms per batch (a sleep standing for decoding); the step's consumer side,
    ``IteratorGetNext``, waits for it. Truth: perf_counter around ``next(iterator)`` and around the step."""
    import numpy as np
    import tensorflow as tf

    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64 * 12, 256)).astype("float32")
    y = rng.integers(0, 10, 64 * 12)

    def slow(a: Any, b: Any) -> tuple[Any, Any]:
        time.sleep(TF_BATCH_SLEEP_S)
        return a, b

    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(64)
        .map(lambda a, b: tf.py_function(slow, [a, b], [tf.float32, tf.int64]))
        .repeat()
    )
    model = tf.keras.Sequential(
        [tf.keras.Input((256,)), tf.keras.layers.Dense(512, activation="tanh"), tf.keras.layers.Dense(10)]
    )
    opt = tf.keras.optimizers.SGD(0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function  # type: ignore[untyped-decorator]
    def train_step(a: Any, b: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(b, model(a, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True))
        return loss

    it = iter(ds)
    train_step(*next(it))  # traced and compiled outside the profile
    data_us: list[float] = []
    step_us: list[float] = []
    tf.profiler.experimental.start(str(folder))
    for step in range(TF_STEPS):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            t0 = time.perf_counter()
            a, b = next(it)
            t1 = time.perf_counter()
            train_step(a, b).numpy()
            data_us.append((t1 - t0) * 1e6)
            step_us.append((time.perf_counter() - t0) * 1e6)
    tf.profiler.experimental.stop()
    return {
        "batch_sleep_us": TF_BATCH_SLEEP_S * 1e6,
        "steps": TF_STEPS,
        "data_wall_us": data_us,
        "step_wall_us": step_us,
        "what": "data_wall_us is perf_counter around next(tf.data iterator), step_wall_us around the step",
    }


def _tiny_module() -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


@workload("lightning_cpu", "lightning")
def lightning_cpu(folder: Path) -> dict[str, Any]:
    return _lightning(folder, "cpu")


def _lightning(folder: Path, accelerator: str) -> dict[str, Any]:
    import lightning as L
    import torch
    from lightning.pytorch.profilers import PyTorchProfiler

    torch.manual_seed(0)

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _tiny_module()

        def training_step(self, batch: Any, _: int) -> Any:
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(256, 32), torch.randn(256, 1))
    steps = 8
    profiler = PyTorchProfiler(dirpath=str(folder), filename="profile", export_to_chrome=True)
    trainer = L.Trainer(
        accelerator=accelerator,
        devices=1,
        max_steps=steps,
        profiler=profiler,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    t0 = time.perf_counter()
    trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=32))
    return {
        "max_steps": steps,
        "fit_wall_us": (time.perf_counter() - t0) * 1e6,
        "what": "Lightning's PyTorchProfiler: tensorboard_trace_handler with a worker name holding "
        "'[Strategy]...' brackets; the files must be found and read as one rank",
    }


@workload("accelerate_cpu", "accelerate")
def accelerate_cpu(folder: Path) -> dict[str, Any]:
    return _accelerate(folder, cpu=True)


def _accelerate(folder: Path, *, cpu: bool) -> dict[str, Any]:
    import torch
    from accelerate import Accelerator
    from accelerate.utils import ProfileKwargs

    torch.manual_seed(0)
    kwargs = ProfileKwargs(activities=["cpu"] if cpu else ["cpu", "cuda"], output_trace_dir=str(folder))
    accelerator = Accelerator(cpu=cpu, kwargs_handlers=[kwargs])
    model = _tiny_module()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt = accelerator.prepare(model, opt)
    steps = 5
    t0 = time.perf_counter()
    with accelerator.profile():
        for _ in range(steps):
            x = torch.randn(32, 32, device=accelerator.device)
            loss = model(x).pow(2).mean()
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
    return {
        "steps": steps,
        "wall_us": (time.perf_counter() - t0) * 1e6,
        "what": "Hugging Face Accelerate's ProfileKwargs (what the Trainer's accelerator uses): one "
        "profile_<process_index>.json per process, no ProfilerStep",
    }


# ---------------------------------------------------------------------------------------------------------------
# GPU workloads (prepared; run where CUDA is available)
# ---------------------------------------------------------------------------------------------------------------


def _cuda_events_us(fn: Callable[[], None], repeat: int) -> list[float]:
    """GPU time of each call of ``fn``, by CUDA events around it (the profiler's independent truth)."""
    import torch

    out = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000.0)
    return out


def _profiled_gpu(folder: Path, name: str, step: Callable[[], None], steps: int = 6, **kw: Any) -> dict[str, Any]:
    """Run ``step`` under the profiler (one ProfilerStep each, wait=1 warmup=1 active=steps-2), measuring each
    profiled step's GPU time with CUDA events and its wall time."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    event_us: list[float] = []
    wall_us: list[float] = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=steps - 2),
        on_trace_ready=tensorboard_trace_handler(str(folder), worker_name=name),
        **kw,
    ) as prof:
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            event_us += _cuda_events_us(step, 1)
            wall_us.append((time.perf_counter() - t0) * 1e6)
            prof.step()  # after the measurement: the last one writes the trace
    return {"step_gpu_event_us": event_us[2:], "step_wall_us": wall_us[2:], "profiled_steps": steps - 2}


@workload("sub_us_kernels", "cuda")
def sub_us_kernels(folder: Path) -> dict[str, Any]:
    import torch

    x = torch.ones(32, device="cuda")

    def step() -> None:
        for _ in range(6400):
            x.add_(1.0)

    truth = _profiled_gpu(folder, "subus", step)
    one = _cuda_events_us(lambda: x.add_(1.0), 200)
    truth |= {"kernels_per_step": 6400, "single_kernel_event_us_median": sorted(one)[100]}
    return truth


@workload("decode_loop", "cuda")
def decode_loop(folder: Path) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(768, 12, 3072, batch_first=True, device="cuda")
    model = torch.nn.TransformerDecoder(layer, 12).eval()
    memory = torch.randn(1, 32, 768, device="cuda")

    @torch.no_grad()
    def step() -> None:
        tgt = torch.randn(1, 1, 768, device="cuda")
        for _ in range(16):  # 16 tokens, eager
            out = model(tgt, memory)
            tgt = torch.cat([tgt, out[:, -1:]], dim=1)

    return _profiled_gpu(folder, "decode", step)


@workload("graph_replays", "cuda")
def graph_replays(folder: Path) -> dict[str, Any]:
    import torch

    x = torch.randn(1024, 1024, device="cuda")
    static = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            static.copy_(torch.relu(x @ x))
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x
        for _ in range(40):
            y = torch.relu(y @ x) * 0.01
        static.copy_(y)
    return _profiled_gpu(folder, "graphs", graph.replay) | {"kernels_per_replay": 121}


def _gemm(dtype_name: str) -> Callable[[Path], dict[str, Any]]:
    def run(folder: Path) -> dict[str, Any]:
        import torch

        n = 4096
        if dtype_name == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = True
            a = torch.randn(n, n, device="cuda")
            b = torch.randn(n, n, device="cuda")

            def step() -> None:
                torch.mm(a, b)
        elif dtype_name == "fp8":
            a8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
            b8 = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
            one = torch.ones((), device="cuda")

            def step() -> None:
                torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        elif dtype_name == "int8":
            ai = torch.randint(-8, 8, (n, n), device="cuda", dtype=torch.int8)
            bi = torch.randint(-8, 8, (n, n), device="cuda", dtype=torch.int8)

            def step() -> None:
                torch._int_mm(ai, bi)
        else:
            dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)

            def step() -> None:
                torch.mm(a, b)

        truth = _profiled_gpu(folder, f"gemm_{dtype_name}", step, record_shapes=True)
        return truth | {"precision": dtype_name, "gemm": [n, n, n]}

    return run


for _dt in ("bf16", "fp16", "fp8", "int8", "tf32"):
    workload(f"gemm_{_dt}", "cuda")(_gemm(_dt))


@workload("copies", "cuda")
def copies(folder: Path) -> dict[str, Any]:
    import torch

    nbytes = 64 << 20
    host = torch.empty(nbytes, dtype=torch.uint8)
    pinned = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dev2 = torch.empty_like(dev)
    peer = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1") if torch.cuda.device_count() > 1 else None
    kinds: dict[str, Callable[[], None]] = {
        "HtoD_pageable": lambda: dev.copy_(host),
        "HtoD_pinned": lambda: dev.copy_(pinned, non_blocking=True),
        "DtoH_pinned": lambda: pinned.copy_(dev, non_blocking=True),
        "DtoD": lambda: dev2.copy_(dev),
        "memset": dev.zero_,
    }
    if peer is not None:
        kinds["PtoP"] = lambda: peer.copy_(dev)
    truth: dict[str, Any] = {"bytes": nbytes, "per_kind_event_us": {}}
    for kind, fn in kinds.items():
        truth["per_kind_event_us"][kind] = _cuda_events_us(fn, 5)

    def step() -> None:
        for fn in kinds.values():
            fn()

    return truth | _profiled_gpu(folder, "copies", step)


@workload("gloo_late_rank_gpu", "cuda")
def gloo_late_rank_gpu(folder: Path) -> dict[str, Any]:
    return _gloo_job(folder, "cuda")


@workload("memory_peak", "cuda")
def memory_peak(folder: Path) -> dict[str, Any]:
    import torch

    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()

    def step() -> None:
        bufs = [torch.empty(16 << 20, dtype=torch.uint8, device="cuda") for _ in range(8)]  # 128 MiB at once
        del bufs

    truth = _profiled_gpu(folder, "memory", step, profile_memory=True)
    return truth | {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "baseline_allocated_bytes": base,
        "step_peak_bytes": 8 * (16 << 20),
    }


@workload("jax_gpu", "jax")
def jax_gpu(folder: Path) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda a: jnp.tanh(a @ a))
    a = jnp.ones((2048, 2048), dtype=jnp.bfloat16)
    f(a).block_until_ready()
    wall = []
    with jax.profiler.trace(str(folder)):
        for i in range(5):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                t0 = time.perf_counter()
                a = f(a)
                a.block_until_ready()
                wall.append((time.perf_counter() - t0) * 1e6)
    return {"step_wall_us": wall, "devices": [str(d) for d in jax.devices()]}


@workload("lightning_gpu", "lightning+cuda")
def lightning_gpu(folder: Path) -> dict[str, Any]:
    return _lightning(folder, "gpu")


@workload("accelerate_gpu", "accelerate+cuda")
def accelerate_gpu(folder: Path) -> dict[str, Any]:
    return _accelerate(folder, cpu=False)


# ---------------------------------------------------------------------------------------------------------------


def _available(needs: str) -> str | None:
    """None where the workload can run here, else why not."""
    for need in needs.split("+"):
        if need == "cpu":
            continue
        if need == "cuda":
            import torch

            if not torch.cuda.is_available():
                return "needs a CUDA GPU"
        else:
            try:
                __import__(need)
            except ImportError:
                return f"needs the {need} package"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", default=None, help="workload names (default: every one that can run)")
    ap.add_argument("--list", action="store_true", help="list the workloads and whether each can run here")
    args = ap.parse_args(argv)
    if args.list:
        for name, (needs, _) in WORKLOADS.items():
            print(f"{name:22} {needs:18} {_available(needs) or 'runs here'}")
        return 0
    names = args.only or list(WORKLOADS)
    failed = 0
    for name in names:
        needs, fn = WORKLOADS[name]
        why = _available(needs)
        if why is not None:
            print(f"skip {name}: {why}")
            continue
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        t0 = time.perf_counter()
        try:
            truth = fn(folder)
        except Exception as exc:  # one workload's failure leaves the others' results
            print(f"FAILED {name}: {type(exc).__name__}: {exc}")
            failed += 1
            continue
        files = _gzip_traces(folder)
        truth = {"workload": name, "recorded_with": _versions(), "files": files, **truth}
        (folder / TRUTH_FILE).write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
        print(f"recorded {name}: {len(files)} file(s) in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
