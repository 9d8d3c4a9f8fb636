"""Record the XSpace samples of samples/traces/xplane/ with JAX's own profiler, on the CPU.

    python3.11 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install -r requirements/xplane-samples.txt
    /tmp/jaxenv/bin/python scripts/make_xplane_samples.py samples/traces/xplane

A small MLP trained for 8 steps with plain SGD under ``jax.profiler.trace``, each step inside
``jax.profiler.StepTraceAnnotation("train", step_num=i)`` (what XProf's step view and ProfStack's steps read),
with the input moved host -> device each step (``jax.device_put``). JAX writes
``<logdir>/plugins/profile/<run>/<host>.xplane.pb``; the file is copied here as ``jax_cpu_mlp/...`` so that the
layout a TensorBoard folder has is kept. Recorded on a CPU: there is a host plane and no device plane with
streams, so GPU busy/idle, kernels and transfers are exercised by the synthetic GPU XSpaces the tests build.

``jax_cpu_2proc/`` (#43 item 5): a job of two JAX processes (``jax.distributed``, CPU collectives over gloo, two CPU
devices each), a sharded step whose global sum is a cross-process all-reduce, process 1 sleeping a known 20 ms
before each step. Each process writes ``<host>.xplane.pb`` into its own log folder; both are copied into one run
folder as ``host0`` / ``host1`` (the layout a two-host job's TensorBoard folder has), byte for byte.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp


def main(out: Path) -> None:
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (256, 512)) * 0.05, "w2": jax.random.normal(k2, (512, 10)) * 0.05}

    def loss(p: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
        h = jnp.tanh(x @ p["w1"])
        logits = h @ p["w2"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    @jax.jit
    def step(p: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> dict[str, jax.Array]:
        grads = jax.grad(loss)(p, x, y)
        return {k: p[k] - 0.1 * grads[k] for k in p}

    import numpy as np

    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((128, 256), dtype=np.float32)
    y_host = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    params = step(params, x_host, y_host)  # compile outside the profile
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for i in range(8):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    x, y = jax.device_put(x_host), jax.device_put(y_host)
                    params = step(params, x, y)
                    jax.block_until_ready(params)
        (pb,) = Path(logdir).rglob("*.xplane.pb")
        target = out / "jax_cpu_mlp" / "plugins" / "profile" / "run" / "host.xplane.pb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(pb, target)
        print(f"{target}: {target.stat().st_size} bytes, jax {jax.__version__}")
    del k3


TWO_PROC_LATE_S = 0.020


def two_process_worker(pid: int, port: int, logdir: str) -> None:
    """One process of the two-process job (run by ``two_process``)."""
    import time

    import numpy as np

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.make_array_from_callback(
        (8, 512), NamedSharding(mesh, P("d")), lambda _: np.ones((2, 512), np.float32) * (pid + 1)
    )

    @jax.jit
    def step(x: jax.Array) -> jax.Array:
        y = jnp.tanh(x @ jnp.ones((512, 512)))
        return y / jnp.sum(y)  # a global sum: an all-reduce across the processes

    step(x).block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                if pid == 1:
                    time.sleep(TWO_PROC_LATE_S)
                x = step(x)
                x.block_until_ready()


def two_process(out: Path) -> None:
    """Record ``jax_cpu_2proc``: two processes of this script, each with two CPU devices."""
    import os
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    with tempfile.TemporaryDirectory() as tmp:
        procs = [
            subprocess.Popen([sys.executable, __file__, "--worker", str(pid), str(port), f"{tmp}/p{pid}"], env=env)  # noqa: S603 - this script, its own arguments
            for pid in (0, 1)
        ]
        if any(p.wait(timeout=300) for p in procs):
            raise SystemExit("a JAX process failed")
        run = out / "jax_cpu_2proc" / "plugins" / "profile" / "run"
        run.mkdir(parents=True, exist_ok=True)
        for pid in (0, 1):
            (pb,) = Path(f"{tmp}/p{pid}").rglob("*.xplane.pb")
            shutil.copy(pb, run / f"host{pid}.xplane.pb")
            print(f"{run}/host{pid}.xplane.pb: {pb.stat().st_size} bytes, jax {jax.__version__}")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        two_process_worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        main(Path(sys.argv[1]))
        two_process(Path(sys.argv[1]))
