"""Trains the tiny config for a few steps on the first N devices and saves losses and params.

Run as a subprocess (the device count must be fixed before JAX starts):
  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/training/parallel_run.py N OUT.npz
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax
import numpy as np

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import optim, parallel
from elmo_jax.training.state import create_train_state
from elmo_jax.training.step import make_train_step
from tests.training.helpers import random_batch, tiny_config

VOCAB, STEPS = 50, 20


def run(n_devices: int) -> dict[str, np.ndarray]:
    config = tiny_config(**{"model.dropout": 0.0, "train.batch_size": 8})
    model = bilm_from_config(config.model, VOCAB)
    tx, _ = optim.make_optimizer(config.train, STEPS)
    mesh = parallel.make_mesh(jax.devices()[:n_devices])
    state = parallel.place_state(create_train_state(model, tx, 0, 8, config.data.max_chars_per_token), mesh)
    step = parallel.parallel_train_step(make_train_step(model, config), mesh, state)
    rng = np.random.default_rng(0)
    losses = []
    for i in range(STEPS):
        batch = random_batch(rng, VOCAB, 8, config.train.unroll_steps, config.data.max_chars_per_token, mask_tail=i % 3)
        state, metrics = step(state, parallel.shard_batch(batch, mesh))
        losses.append(float(metrics["train_loss"]))
    flat = {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(jax.device_get(state.params))}
    return {"losses": np.array(losses), **flat}


if __name__ == "__main__":
    n, out = int(sys.argv[1]), sys.argv[2]
    assert len(jax.devices()) >= n, jax.devices()
    np.savez(out, **run(n))
