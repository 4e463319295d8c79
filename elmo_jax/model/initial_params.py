"""A biLM's initial parameters, and their shapes without computing them (for checking checkpoints)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from elmo_jax.model.bilm import BiLM


def dummy_inputs(model: BiLM, batch_size: int, unroll_steps: int, max_chars: int) -> dict[str, jax.Array]:
    """Zero inputs of the right shapes (for initialisation): ids and mask `[2, B, T]`, chars `[2, B, T, C]`."""
    inputs = {
        "token_ids": jnp.zeros((2, batch_size, unroll_steps), jnp.int32),
        "mask": jnp.ones((2, batch_size, unroll_steps), bool),
    }
    if model.token_encoder_class.reads_chars:
        inputs["char_ids"] = jnp.zeros((2, batch_size, unroll_steps, max_chars), jnp.int32)
    return inputs


def _init(model: BiLM, rng: jax.Array, max_chars: int) -> Any:
    return model.init(rng, dummy_inputs(model, 1, 1, max_chars), model.initial_state(1))["params"]


def init_params(model: BiLM, rng: jax.Array, max_chars: int) -> Any:
    """Initial parameters (independent of the batch size), initialised in one compiled call."""
    return jax.jit(lambda key: _init(model, key, max_chars))(rng)


def param_shapes(model: BiLM, max_chars: int) -> Any:
    """The params' tree of `jax.ShapeDtypeStruct`: traced, nothing computed or allocated."""
    return jax.eval_shape(lambda: _init(model, jax.random.key(0), max_chars))
