"""Analytic model FLOPs of the biLM (matmuls and convolutions; elementwise work not counted).

The Transformer's count is for windows of model.transformer.max_window positions (training's and
evaluation's unroll_steps where they equal it) over a full memory.

A multiply-add counts as 2 FLOPs. Training FLOPs = 3 x forward (the backward pass costs twice
the forward pass). A "token" is one position of the global batch, which the model processes in
both directions.
"""

from __future__ import annotations

import ml_collections

from elmo_jax.model.lstm import has_projection
from elmo_jax.model.transformer import transformer_flops_per_token


def forward_flops_per_direction(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> dict[str, int]:
    """Forward FLOPs for one token in one direction, by component."""
    p, d = model.lstm.projection_dim, model.lstm.dim
    parts = {}
    token_dim = p  # The first contextual layer's input width.
    if model.token_encoder == "char_cnn":
        cnn = model.char_cnn
        n_filters = sum(n for _, n in cnn.filters)
        parts["char_cnn"] = sum(2 * w * cnn.embed_dim * n * (max_chars - w + 1) for w, n in cnn.filters)
        parts["highway"] = cnn.n_highway * 2 * (2 * n_filters * n_filters)
        if cnn.get("projection", True):
            parts["token_projection"] = 2 * n_filters * p
        else:
            token_dim = n_filters
    contextualizer = model.get("contextualizer", "lstm")
    if contextualizer == "gated_cnn":
        parts["gated_cnn"] = gated_cnn_flops(model, token_dim)
    elif contextualizer == "transformer":
        tfm = model.transformer
        parts["transformer"] = transformer_flops_per_token(
            tfm.n_layers, p, tfm.ff_dim, tfm.max_window, tfm.memory_length, token_dim
        )
    else:
        projection = 2 * d * p if has_projection(d, p) else 0
        layer_inputs = (model.lstm.n_layers - 1) * p + token_dim
        parts["lstm"] = 2 * (layer_inputs + model.lstm.n_layers * p) * 4 * d + model.lstm.n_layers * projection
    softmax_rows = model.softmax.n_negative_samples + 1 if model.softmax.sampled else vocab_size
    parts["softmax"] = 2 * p * softmax_rows
    return parts


def train_flops_per_token(model: ml_collections.ConfigDict, vocab_size: int, max_chars: int) -> int:
    """Training FLOPs per token: 2 directions x 3 (forward + backward pass)."""
    return 6 * sum(forward_flops_per_direction(model, vocab_size, max_chars).values())


def gated_cnn_flops(model: ml_collections.ConfigDict, token_dim: int) -> int:
    """Forward FLOPs of the gated CNN for one token in one direction: per layer one matmul of the
    k-wide window (k x its input width) by W and V (2 P outputs)."""
    gcnn, p = model.gated_cnn, model.lstm.projection_dim
    layer_inputs = token_dim + (gcnn.n_layers - 1) * p
    return 2 * gcnn.kernel_width * layer_inputs * 2 * p
