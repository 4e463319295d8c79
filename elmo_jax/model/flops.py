"""Analytic model FLOPs of the biLM (matmuls and convolutions; a multiply-add is 2 FLOPs).

Training = 3 x forward. A token is one position of the global batch, in both directions.
"""

from __future__ import annotations

import ml_collections

from elmo_jax.config import schema
from elmo_jax.model.contextualizer_registry import contextualizer_from_config


def forward_flops_per_direction(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> dict[str, int]:
    """Forward FLOPs for one token in one direction, by component."""
    p = model.width
    parts = {}
    if model.token_encoder == "char_cnn":
        cnn = model.char_cnn
        n_filters = sum(n for _, n in cnn.filters)
        parts["char_cnn"] = sum(2 * w * cnn.embed_dim * n * (max_chars - w + 1) for w, n in cnn.filters)
        parts["highway"] = cnn.n_highway * 2 * (2 * n_filters * n_filters)
        if cnn.projection:
            parts["token_projection"] = 2 * n_filters * p
    token_dim = schema.token_width(model.token_encoder, model.char_cnn, p)
    parts[model.contextualizer] = contextualizer_from_config(model, token_dim).flops_per_token()
    softmax_rows = model.softmax.n_negative_samples + 1 if model.softmax.sampled else vocab_size
    parts["softmax"] = 2 * p * softmax_rows
    return parts


def train_flops_per_token(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> int:
    """Training FLOPs per token: 2 directions x 3 (forward + backward pass)."""
    return 6 * sum(forward_flops_per_direction(model, vocab_size, max_chars).values())

