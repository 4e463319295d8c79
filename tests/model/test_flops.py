"""Analytic FLOP counts, checked by hand for a small model."""

import jax
import numpy as np

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.flops import forward_flops_per_direction, train_flops_per_token
from elmo_jax.model.initial_params import init_params
from tests.training.helpers import tiny_config


def test_flops_by_hand():
    config = tiny_config()
    m = config.model  # filters [[1,4],[2,8],[3,8]], embed 4, 1 highway, LSTM 16/8 x 2, 16 negatives.
    chars = 12
    parts = forward_flops_per_direction(m, vocab_size=100, max_chars=chars)
    assert parts["char_cnn"] == 2 * 4 * (1 * 4 * 12 + 2 * 8 * 11 + 3 * 8 * 10)
    assert parts["highway"] == 1 * 2 * 2 * 20 * 20
    assert parts["token_projection"] == 2 * 20 * 8
    assert parts["lstm"] == 2 * (2 * 16 * 64 + 2 * 16 * 8)
    assert parts["softmax"] == 2 * 8 * 17
    assert train_flops_per_token(m, 100, chars) == 6 * sum(parts.values())
    m.softmax.sampled = False
    m.token_encoder = "word"
    parts = forward_flops_per_direction(m, vocab_size=100, max_chars=chars)
    assert set(parts) == {"lstm", "softmax"} and parts["softmax"] == 2 * 8 * 100


def test_no_projection_flops_when_projection_dim_equals_dim():
    """bilm-tf (and BiLSTMLayer) have no W_P when projection_dim == dim: only [x, h] W per layer."""
    config = tiny_config(**{"model.lstm.dim": 8})  # = projection_dim
    parts = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)
    assert parts["lstm"] == 2 * (2 * (8 + 8) * 32)
    config.model.lstm.dim = 4  # projection_dim > dim: an (up-)projection W_P of 4 x 8
    parts = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)
    assert parts["lstm"] == 2 * (2 * (8 + 8) * 16 + 2 * 4 * 8)


def test_flops_without_token_projection():
    """char_cnn.projection=False: no token projection; the first LSTM reads sum(channels) = 20 inputs."""
    config = tiny_config(**{"model.char_cnn.projection": False})
    parts = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)
    assert "token_projection" not in parts
    assert parts["lstm"] == 2 * (20 + 8) * 64 + 2 * (8 + 8) * 64 + 2 * (2 * 16 * 8)


def test_gated_cnn_flops_are_two_per_weight_of_its_convolutions():
    """The gated CNN replaces the LSTM part: per token and direction each weight of W and V is one
    multiply-add (the window covers k positions of the layer's input), here checked by hand and
    against the initialised model's kernels."""
    config = tiny_config(**{"model.contextualizer": "gated_cnn", "model.char_cnn.projection": False})
    gcnn = config.model.gated_cnn  # kernel 3, 3 layers; the first reads 20 channels, the others P = 8.
    parts = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)
    assert "lstm" not in parts
    assert parts["gated_cnn"] == 2 * 3 * (20 + 8 + 8) * 2 * 8
    params = init_params(bilm_from_config(config.model, 100), jax.random.key(0), 12)["gated_cnn"]
    kernels = sum(np.size(layer[name]) for layer in params.values() for name in ("W", "V"))
    assert parts["gated_cnn"] == 2 * kernels // 2 and len(params) == gcnn.n_layers


def test_transformer_flops_replace_the_lstms_and_count_its_weights_and_attention():
    """The Transformer replaces the LSTM part: per token and direction, without memory and with
    F = P, each weight of its blocks is one multiply-add, plus per layer the scores and weighted
    sums over the window's T positions (P wide); a memory of M positions adds, per layer, its
    keys and values once per window of T tokens and M more scores and weighted sums."""
    config = tiny_config(**{
        "model.contextualizer": "transformer", "model.transformer.memory_length": 0,
        "model.transformer.max_window": 5, "model.transformer.ff_dim": 12, "model.transformer.n_heads": 2,
    })
    parts = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)
    assert "lstm" not in parts
    params = init_params(bilm_from_config(config.model, 100), jax.random.key(0), 12)["transformer"]["directions"]
    weights = sum(np.size(w) for w in jax.tree.leaves(params) if w.ndim == 3) // 2  # Per direction.
    assert weights == 2 * (4 * 8 * 8 + 2 * 8 * 12)  # 2 layers: Q, K, V, O and the feed-forward layer.
    layers, p, window = 2, 8, 5
    assert parts["transformer"] == 2 * weights + layers * (2 * window * p * 2)
    config.model.transformer.memory_length = memory = 5
    with_memory = forward_flops_per_direction(config.model, vocab_size=100, max_chars=12)["transformer"]
    keys_values = memory * 2 * p * p * 2 // window
    assert with_memory == parts["transformer"] + layers * (keys_values + 2 * memory * p * 2)
