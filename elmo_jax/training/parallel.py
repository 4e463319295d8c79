"""The training step over the 'data' mesh: per-device steps mapped with shard_map. Parameters and
optimizer state are replicated; the carried state (`[2, B, ...]` leaves) is split as the batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import jax
from jax.sharding import PartitionSpec as P

from elmo_jax.runtime.data_parallel import carried_state_spec, sharded_step, shardings

if TYPE_CHECKING:  # Annotations only: the train state imports optax.
    from elmo_jax.training.state import TrainState


def train_state_spec(state: TrainState) -> TrainState:
    replicated = lambda tree: jax.tree.map(lambda _: P(), tree)
    return state.replace(
        step=P(),
        params=replicated(state.params),
        opt_state=replicated(state.opt_state),
        carried_state=carried_state_spec(state.carried_state),
        rng=P(),
    )


def place_state(state: TrainState, mesh: jax.sharding.Mesh) -> TrainState:
    """Puts a host-built state onto the mesh with the train-state shardings."""
    return jax.device_put(state, shardings(mesh, train_state_spec(state)))


def parallel_train_step(
    per_device_step: Callable, mesh: jax.sharding.Mesh, state: TrainState
) -> Callable[[TrainState, Any], tuple[TrainState, dict]]:
    """The sharded step (`data_parallel.sharded_step`) with the train state donated."""
    return sharded_step(per_device_step, mesh, (train_state_spec(state),))
