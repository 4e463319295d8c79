"""The train state: everything a step reads and writes, checkpointed as one pytree."""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from elmo_jax.model.bilm import BiLM
from elmo_jax.model.initial_params import init_params


class TrainState(flax.struct.PyTreeNode):
    """step, params, opt_state, the contextualizer's carried state (`BiLM.initial_state`, `[2, B, ...]`
    leaves; `lstm_state` in older checkpoints) and the RNG."""

    step: jax.Array
    params: Any
    opt_state: Any
    carried_state: list[Any]
    rng: jax.Array
    tx: optax.GradientTransformation = flax.struct.field(pytree_node=False)


def create_train_state(
    model: BiLM, tx: optax.GradientTransformation, seed: int, batch_size: int, max_chars: int, params: Any = None
) -> TrainState:
    """Fresh state: initialised params (or `params`), optimizer state, the zero carried state for
    `batch_size` rows."""
    init_rng, rng = jax.random.split(jax.random.key(seed))
    if params is None:
        params = init_params(model, init_rng, max_chars)
    return TrainState(
        step=jnp.zeros((), jnp.int32),
        params=params,
        opt_state=jax.jit(tx.init)(params),
        carried_state=model.initial_state(batch_size),
        rng=jax.random.key_data(rng),
        tx=tx,
    )
