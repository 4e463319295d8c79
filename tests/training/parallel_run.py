"""Trains the tiny config for a few steps and saves losses and params (before, after the first step and at the end).

Run as a subprocess (the device count must be fixed before JAX starts):
  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/training/parallel_run.py N[,N...] OUT_DIR
      (on the first N devices of one process, for each N in turn: OUT_DIR/N.npz; one process
      for several runs starts JAX once)
  python tests/training/parallel_run.py --process I --processes P --port PORT OUT.npz
      (process I of P, one CPU device each, jax.distributed over localhost)
CONTEXTUALIZER=gated_cnn or transformer in the environment trains that contextualizer (default: lstm).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax
import numpy as np

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel
from elmo_jax.training.trainer import build_trainer
from tests.training.helpers import random_batch, tiny_config

VOCAB, STEPS = 50, 20
INITIAL = "initial"  # Prefix of the saved parameters before the first step.
FIRST = "first"  # Prefix of the saved parameters after the first step.


def run(n_devices: int | None) -> dict[str, np.ndarray]:
    """n_devices: use the first N devices; None: all devices of all processes."""
    contextualizer = os.environ.get("CONTEXTUALIZER", "lstm")
    config = tiny_config(**{"model.dropout": 0.0, "train.batch_size": 8, "model.contextualizer": contextualizer})
    model = bilm_from_config(config.model, VOCAB)
    mesh = data_parallel.make_mesh(jax.devices()[:n_devices] if n_devices else None)
    rows = 8 // jax.process_count()
    local = slice(jax.process_index() * rows, (jax.process_index() + 1) * rows)
    state, step, _ = build_trainer(model, config, mesh, STEPS)
    initial = _flat_params(state.params)
    rng = np.random.default_rng(0)
    losses, first = [], {}
    for i in range(STEPS):
        batch = random_batch(rng, VOCAB, 8, config.train.unroll_steps, config.data.max_chars_per_token, mask_tail=i % 3)
        batch = jax.tree.map(lambda x: x[:, local], batch)  # This process's rows of the global batch [2, B, ...].
        state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
        losses.append(float(metrics["train_loss"]))
        first = first or _flat_params(state.params)
    trained = _flat_params(state.params)
    prefixed = {prefix + key: value for prefix, params in ((INITIAL, initial), (FIRST, first)) for key, value in params.items()}
    return {"losses": np.array(losses), **trained, **prefixed}


def _flat_params(params) -> dict[str, np.ndarray]:
    """`{"['module']['param']": array}`, fetched from the devices."""
    return {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(jax.device_get(params))}


if __name__ == "__main__":
    if sys.argv[1] == "--process":
        process, processes, port, out = int(sys.argv[2]), int(sys.argv[4]), sys.argv[6], sys.argv[7]
        distributed = tiny_config().distributed
        distributed.update(enabled=True, coordinator_address=f"localhost:{port}", num_processes=processes, process_id=process)
        data_parallel.initialize_distributed(distributed)
        result = run(None)
        if process == 0:
            np.savez(out, **result)
    else:
        counts, out = [int(n) for n in sys.argv[1].split(",")], sys.argv[2]
        assert len(jax.devices()) >= max(counts), jax.devices()
        for n in counts:
            np.savez(os.path.join(out, f"{n}.npz"), **run(n))
