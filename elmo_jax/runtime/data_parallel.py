"""Data parallelism over every device: a 1-D 'data' mesh, batches and the contextualizer's carried
state (`[2, B, ...]` leaves) split along the batch axis, decisions agreed by all processes."""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

AXIS = "data"  # The mesh axis that batches and carried states are split along.
BATCH_SPEC = P(None, AXIS)  # Batch arrays `[2 directions, B, ...]` are split along B.


def initialize_distributed(distributed: Any) -> None:
    """`jax.distributed.initialize()` from `config.distributed` (no-op unless enabled); unset
    fields are auto-detected by JAX."""
    if not distributed.enabled:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # Affects the CPU backend only.
    jax.distributed.initialize(
        coordinator_address=distributed.coordinator_address or None,
        num_processes=distributed.num_processes or None,
        process_id=distributed.process_id if distributed.process_id >= 0 else None,
    )


def all_processes(ok: bool) -> bool:
    """True when `ok` holds on every process (a decision some processes cannot make alone)."""
    if jax.process_count() == 1:
        return ok
    from jax.experimental import multihost_utils

    return bool(np.all(multihost_utils.process_allgather(np.array(ok))))


def make_mesh(devices: list[Any] | None = None) -> jax.sharding.Mesh:
    """A 1-D mesh named 'data' over `devices` (default: all devices of all processes)."""
    devices = devices if devices is not None else jax.devices()
    return jax.sharding.Mesh(np.asarray(devices), (AXIS,))


def check_batch_size(batch_size: int, mesh: jax.sharding.Mesh, key: str) -> None:
    n = mesh.size
    if batch_size % n:
        raise ValueError(f"{key}={batch_size} must be divisible by the number of devices ({n})")


def carried_state_spec(state: Any) -> Any:
    """A carried state pytree (`BiLM.initial_state`: LSTM states, gated-CNN buffers), every leaf
    `[2, B, ...]`, is split along B."""
    return jax.tree.map(lambda _: BATCH_SPEC, state)


def shardings(mesh: jax.sharding.Mesh, specs: Any) -> Any:
    return jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda x: isinstance(x, P))


def shard_batch(batch: Any, mesh: jax.sharding.Mesh) -> Any:
    """This process's rows of the global batch (`[2, B, ...]` arrays) -> global arrays split over 'data'."""
    sharding = NamedSharding(mesh, BATCH_SPEC)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), batch)


def sharded_step(per_device_step: Callable, mesh: jax.sharding.Mesh, specs: tuple[Any, ...]) -> Callable:
    """jit(shard_map(per_device_step)) of a step `(*args, batch) -> (new args[-1], metrics)` over the
    data mesh, `specs` the partition specs of `args`: the train step's (the train state) and the
    eval step's (params replicated, the carried state). The last argument is donated and comes back
    updated with its spec; the metrics come back replicated (the step `psum`s them)."""
    mapped = jax.shard_map(
        per_device_step, mesh=mesh, in_specs=(*specs, BATCH_SPEC), out_specs=(specs[-1], P()), check_vma=False
    )
    return jax.jit(mapped, donate_argnums=len(specs) - 1)
