"""Parameter initializers: bilm-tf's per weight, or U(-r, r) for every weight (Kim et al. 2016)."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def uniform_symmetric(limit: float) -> nn.initializers.Initializer:
    """Uniform on [-limit, limit) (bilm-tf's `random_uniform_initializer(-limit, limit)`)."""

    def init(key: jax.Array, shape: Sequence[int], dtype: jnp.dtype = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -limit, limit)

    return init


def weight_init(init_range: float, default: nn.initializers.Initializer) -> nn.initializers.Initializer:
    """U(-init_range, init_range) when init_range > 0, else `default` (bilm-tf's)."""
    return uniform_symmetric(init_range) if init_range > 0 else default
