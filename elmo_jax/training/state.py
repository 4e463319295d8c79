"""The train state: everything a step reads and writes, checkpointed as one pytree."""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax

from elmo_jax.model.bilm import BiLM


class TrainState(flax.struct.PyTreeNode):
    """step, params, opt_state, the contextualizer's carried state (`BiLM.initial_state`: LSTM states
    or gated-CNN buffers, `[2, B, ...]` leaves; the field keeps its name, that of the checkpoints) and the RNG."""

    step: jax.Array
    params: Any
    opt_state: Any
    lstm_state: list[Any]
    rng: jax.Array
    tx: optax.GradientTransformation = flax.struct.field(pytree_node=False)


def dummy_inputs(model: BiLM, batch_size: int, unroll_steps: int, max_chars: int) -> dict[str, jax.Array]:
    """Zero inputs of the right shapes (for initialisation)."""
    inputs = {
        "token_ids": jnp.zeros((2, batch_size, unroll_steps), jnp.int32),
        "mask": jnp.ones((2, batch_size, unroll_steps), bool),
    }
    if model.token_encoder == "char_cnn":
        inputs["char_ids"] = jnp.zeros((2, batch_size, unroll_steps, max_chars), jnp.int32)
    return inputs


def init_params(model: BiLM, rng: jax.Array, max_chars: int) -> Any:
    """Initial parameters (independent of the batch size), initialised in one compiled call."""
    init = lambda key: model.init(key, dummy_inputs(model, 1, 1, max_chars), model.initial_state(1))["params"]
    return jax.jit(init)(rng)


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
        lstm_state=model.initial_state(batch_size),
        rng=jax.random.key_data(rng),
        tx=tx,
    )
