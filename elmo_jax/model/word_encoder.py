"""Word embeddings: the token encoder of word-input models (`model.token_encoder='word'`)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.model.initializers import uniform_symmetric, weight_init


class WordEncoder(nn.Module):
    """Word ids `[...]` -> embeddings `[..., output_dim]` (the `word_inputs` ablation)."""

    vocab_size: int
    output_dim: int
    init_range: float = 0.0  # > 0: U(-init_range, init_range) instead of U(-1, 1).

    @nn.compact
    def __call__(self, token_ids: jax.Array) -> jax.Array:
        table = self.param(
            "embedding", weight_init(self.init_range, uniform_symmetric(1.0)), (self.vocab_size, self.output_dim)
        )
        return jnp.take(table, token_ids, axis=0)
