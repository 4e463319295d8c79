"""One recipe for training a biLM: the optimizer, the initial state placed on the mesh and the
compiled parallel step. The training loop, the benchmarks and the tests all build it here, so a
change to any of these parts reaches every one of them."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import ml_collections
import optax

from elmo_jax.data.batching import Batch
from elmo_jax.model.bilm import BiLM
from elmo_jax.training import optim, parallel
from elmo_jax.training.state import TrainState, create_train_state
from elmo_jax.training.step import make_train_step


class Trainer(NamedTuple):
    """`state` (placed on the mesh), `step(state, batch) -> (state, metrics)` (jit of shard_map,
    the state donated) and the learning-rate `schedule` (for logging)."""

    state: TrainState
    step: Callable[[TrainState, Batch], tuple[TrainState, dict]]
    schedule: optax.Schedule


def build_trainer(
    model: BiLM, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh, num_steps: int, params: Any = None
) -> Trainer:
    """The training of `model` as `config.train` says over `num_steps` steps (the schedule's length);
    `params`: start from these instead of a fresh initialisation (the optimizer state starts fresh)."""
    tx, schedule = optim.make_optimizer(config.train, num_steps)
    state = create_train_state(model, tx, config.seed, config.train.batch_size, config.data.max_chars_per_token, params)
    state = parallel.place_state(state, mesh)
    return Trainer(state, parallel.parallel_train_step(make_train_step(model, config), mesh, state), schedule)
