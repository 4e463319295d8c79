"""ScalarMix vs the formula of bilm-tf's weight_layers / AllenNLP's ScalarMix, written in NumPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.scalar_mix import ScalarMix


def np_scalar_mix(layers, scalars, gamma, mask=None):
    """float64: gamma * sum_k softmax(s)_k * LN_k(h_k); LN over the unmasked elements of each layer."""
    layers = np.asarray(layers, np.float64)
    if mask is not None:
        normed = []
        for h in layers:
            real = h[np.asarray(mask, bool)]  # [n_real, dim]
            normed.append((h - real.mean()) / np.sqrt(real.var() + 1e-12))
        layers = np.stack(normed)
    w = np.exp(scalars - np.max(scalars))
    w /= w.sum()
    return gamma * np.tensordot(w, layers, axes=1)


def random_layers(seed: int, shape=(3, 2, 5, 4)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Layers with different scales, so the layer norm matters.
    return (rng.standard_normal(shape) * np.array([1.0, 3.0, 0.5])[:, None, None, None] + 0.7).astype(np.float32)


def test_default_is_the_average_of_the_layers():
    layers = random_layers(0)
    mix = ScalarMix(3)
    params = mix.init(jax.random.key(0), layers)["params"]
    assert params["scalar_parameters"].shape == (3,) and params["gamma"].shape == ()
    np.testing.assert_allclose(mix.apply({"params": params}, layers), layers.mean(axis=0), rtol=1e-6, atol=1e-6)


def test_weights_and_gamma():
    layers = random_layers(1)
    mix = ScalarMix(3, initial_scalar_parameters=[0.5, -1.0, 2.0])
    params = mix.init(jax.random.key(0), layers)["params"]
    params = {**params, "gamma": jnp.asarray(1.7)}
    want = np_scalar_mix(layers, np.array([0.5, -1.0, 2.0]), 1.7)
    np.testing.assert_allclose(mix.apply({"params": params}, list(layers)), want, rtol=1e-5, atol=1e-6)


def test_layer_norm_uses_only_unmasked_positions():
    layers = random_layers(2)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    mix = ScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[0.1, 0.2, -0.3])
    params = mix.init(jax.random.key(0), layers, mask)["params"]
    want = np_scalar_mix(layers, np.array([0.1, 0.2, -0.3]), 1.0, mask)
    got = mix.apply({"params": params}, layers, mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Padding values do not change the output at real positions.
    padded = layers.copy()
    padded[:, 0, 3:] = 100.0
    np.testing.assert_allclose(mix.apply({"params": params}, padded, mask)[mask], got[mask], rtol=1e-5, atol=1e-5)


def test_layer_norm_of_a_mask_without_positions_is_finite():
    """No unmasked element (an Elmo batch without tokens): no 0 / 0, in the mix or its gradients."""
    layers = random_layers(2)
    mask = np.zeros(layers.shape[1:-1], bool)
    mix = ScalarMix(3, do_layer_norm=True)
    params = mix.init(jax.random.key(0), layers, mask)["params"]
    assert np.all(np.isfinite(mix.apply({"params": params}, layers, mask)))
    grads = jax.grad(lambda p: jnp.sum(mix.apply({"params": p}, layers, mask)))(params)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_gradients_reach_the_scalars():
    layers = random_layers(3)
    mix = ScalarMix(3)
    params = mix.init(jax.random.key(0), layers)["params"]
    grads = jax.grad(lambda p: jnp.sum(mix.apply({"params": p}, layers) ** 2))(params)
    assert np.all(np.abs(grads["scalar_parameters"]) > 0) and np.abs(grads["gamma"]) > 0


def test_shape_errors():
    layers = random_layers(4)
    with pytest.raises(ValueError, match="got 3 layers, expected mixture_size=2"):
        ScalarMix(2).init(jax.random.key(0), layers)
    with pytest.raises(ValueError, match="initial_scalar_parameters has 2 values, expected mixture_size=3"):
        ScalarMix(3, initial_scalar_parameters=[0.0, 1.0])  # when built, before any call
    with pytest.raises(ValueError, match="mask shape"):
        ScalarMix(3, do_layer_norm=True).init(jax.random.key(0), layers, np.ones((2, 4), bool))


def test_fixed_mix_has_no_params_and_keeps_its_weights():
    layers = random_layers(5)
    mix = ScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[0.5, -1.0, 2.0], trainable=False)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    assert mix.init(jax.random.key(0), layers, mask) == {}
    want = np_scalar_mix(layers, np.array([0.5, -1.0, 2.0]), 1.0, mask)
    np.testing.assert_allclose(mix.apply({}, layers, mask), want, rtol=1e-5, atol=1e-5)
    # Without initial values: an equal average.
    np.testing.assert_allclose(ScalarMix(3, trainable=False).apply({}, layers), layers.mean(axis=0), rtol=1e-6)
