"""Analytic FLOP counts, checked by hand for a small model."""

import jax
import numpy as np

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.flops import forward_flops_per_direction, train_flops_per_token
from elmo_jax.training.state import init_params
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
