"""Record the XSpace samples of samples/traces/xplane/ with JAX's own profiler, on the CPU.

    python3.11 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install -r requirements/xplane-samples.txt
    /tmp/jaxenv/bin/python scripts/make_xplane_samples.py samples/traces/xplane

A small MLP trained for 8 steps with plain SGD under ``jax.profiler.trace``, each step inside
``jax.profiler.StepTraceAnnotation("train", step_num=i)`` (what XProf's step view and ProfStack's steps read),
with the input moved host -> device each step (``jax.device_put``). JAX writes
``<logdir>/plugins/profile/<run>/<host>.xplane.pb``; the file is copied here as ``jax_cpu_mlp/...`` so that the
layout a TensorBoard folder has is kept. Recorded on a CPU: there is a host plane and no device plane with
streams, so GPU busy/idle, kernels and transfers are exercised by the synthetic GPU XSpaces the tests build.
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


if __name__ == "__main__":
    main(Path(sys.argv[1]))
