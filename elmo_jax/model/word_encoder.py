"""Word embeddings: the token encoder of word-input models (`model.token_encoder='word'`)."""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.model.initializers import uniform_symmetric, weight_init
from elmo_jax.model.token_encoder import TokenEncoder


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


class WordTokens(TokenEncoder):
    """Word embeddings by vocabulary id (the `word_inputs` ablation, Kim et al.'s LSTM-Word)."""

    config_name = "word"
    summary = "word embeddings; ablation"
    reads_chars = False
    bilm_tf_format = False

    @classmethod
    def flops_per_token(cls, model: Mapping[str, Any], max_chars: int) -> dict[str, int]:
        """A table lookup: no FLOPs."""
        return {}

    @classmethod
    def module(cls, bilm: nn.Module) -> WordEncoder:
        return WordEncoder(bilm.vocab_size, bilm.width, bilm.init_range)
