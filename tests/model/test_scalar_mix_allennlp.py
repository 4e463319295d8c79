"""AllenNLP's `tests/modules/scalar_mix_test.py`, ported call for call (names and tolerances kept).

Differences of design: Flax keeps params outside the module, so a test sets them in the variables
(AllenNLP: `mixture.scalar_parameters[k].data[0] = ...`); a bad argument is a ValueError
(AllenNLP: `ConfigurationError`); `trainable=False` creates no params (AllenNLP: parameters with
`requires_grad=False`); the layer norm divides by `sqrt(var + 1e-12)` (AllenNLP: `std + 1e-13`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy
import pytest

from elmo_jax.model.scalar_mix import ScalarMix


def randn(seed: int, shape=(3, 4, 5)) -> numpy.ndarray:
    """torch.randn: standard normal float32."""
    return numpy.random.default_rng(seed).standard_normal(shape).astype(numpy.float32)


def test_scalar_mix_can_run_forward():
    mixture = ScalarMix(3)
    tensors = [randn(k) for k in range(3)]
    params = {"scalar_parameters": jnp.asarray([0.1 * (k + 1) for k in range(3)]), "gamma": jnp.asarray(0.5)}
    result = mixture.apply({"params": params}, tensors)

    weights = [0.1, 0.2, 0.3]
    normed_weights = numpy.exp(weights) / numpy.sum(numpy.exp(weights))
    expected_result = sum(normed_weights[k] * tensors[k] for k in range(3))
    expected_result *= 0.5
    numpy.testing.assert_almost_equal(expected_result, numpy.asarray(result))


def test_scalar_mix_throws_error_on_incorrect_number_of_inputs():
    mixture = ScalarMix(3)
    tensors = [randn(k) for k in range(5)]
    with pytest.raises(ValueError, match="got 5 layers, expected mixture_size=3"):
        _ = mixture.init(jax.random.key(0), tensors)


def test_scalar_mix_throws_error_on_incorrect_initial_scalar_parameters_length():
    with pytest.raises(ValueError, match="initial_scalar_parameters has 2 values"):
        ScalarMix(3, initial_scalar_parameters=[0.0, 0.0])


def test_scalar_mix_trainable_with_initial_scalar_parameters():
    initial_scalar_parameters = [1.0, 2.0, 3.0]
    mixture = ScalarMix(3, initial_scalar_parameters=initial_scalar_parameters, trainable=False)
    tensors = [randn(k) for k in range(3)]
    assert mixture.init(jax.random.key(0), tensors) == {}  # nothing to train
    weights = numpy.exp(initial_scalar_parameters) / numpy.sum(numpy.exp(initial_scalar_parameters))
    expected_result = sum(weights[k] * tensors[k] for k in range(3))
    numpy.testing.assert_almost_equal(expected_result, numpy.asarray(mixture.apply({}, tensors)), decimal=6)


def test_scalar_mix_layer_norm():
    mixture = ScalarMix(3, do_layer_norm="scalar_norm_reg")

    tensors = [randn(10 + k) for k in range(3)]
    numpy_mask = numpy.ones((3, 4), dtype="int32")
    numpy_mask[1, 2:] = 0
    mask = numpy_mask.astype(bool)

    weights = [0.1, 0.2, 0.3]
    params = {"scalar_parameters": jnp.asarray(weights), "gamma": jnp.asarray(0.5)}
    result = mixture.apply({"params": params}, tensors, mask)

    normed_weights = numpy.exp(weights) / numpy.sum(numpy.exp(weights))
    expected_result = numpy.zeros((3, 4, 5))
    for k in range(3):
        mean = numpy.mean(tensors[k][numpy_mask == 1])
        std = numpy.std(tensors[k][numpy_mask == 1])
        normed_tensor = (tensors[k] - mean) / (std + 1e-13)  # util.tiny_value_of_dtype(torch.float)
        expected_result += normed_tensor * normed_weights[k]
    expected_result *= 0.5

    numpy.testing.assert_almost_equal(expected_result, numpy.asarray(result), decimal=6)
