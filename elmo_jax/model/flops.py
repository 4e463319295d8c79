"""Analytic model FLOPs of the biLM (matmuls and convolutions; a multiply-add is 2 FLOPs).

Training = 3 x forward. A token is one position of the global batch, in both directions.
"""

from __future__ import annotations

import ml_collections

from elmo_jax.model.contextualizer_registry import contextualizer_from_config
from elmo_jax.model.token_encoder_registry import token_encoder_class


def forward_flops_per_direction(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> dict[str, int]:
    """Forward FLOPs for one token in one direction, by component."""
    p = model.width
    encoder = token_encoder_class(model.token_encoder)
    parts = encoder.flops_per_token(model, max_chars)
    token_dim = encoder.width(model.char_cnn, p)
    parts[model.contextualizer] = contextualizer_from_config(model, token_dim).flops_per_token()
    softmax_rows = model.softmax.n_negative_samples + 1 if model.softmax.sampled else vocab_size
    parts["softmax"] = 2 * p * softmax_rows
    return parts


def train_flops_per_token(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> int:
    """Training FLOPs per token: 2 directions x 3 (forward + backward pass)."""
    return 6 * sum(forward_flops_per_direction(model, vocab_size, max_chars).values())

