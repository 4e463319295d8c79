"""GloVe's objective, gradients and step against NumPy references (float64, jax_enable_x64 for the
comparison only: float32 would need tolerances near its own rounding), and training on a toy corpus."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.static.cooccurrence import Cooccurrence, cooccurrence_counts
from elmo_jax.static.glove import GloveConfig, adagrad_step, glove_loss, initial_params, train_glove, weighting

N_WORDS, DIM = 7, 4


def _problem(seed: int = 0) -> tuple[dict, tuple]:
    """float64 params and 12 entries, words repeated among the rows and the columns."""
    rng = np.random.default_rng(seed)
    params = {"w": rng.normal(size=(N_WORDS, DIM)), "w_context": rng.normal(size=(N_WORDS, DIM)),
              "b": rng.normal(size=N_WORDS), "b_context": rng.normal(size=N_WORDS)}
    rows = np.array([0, 1, 1, 2, 3, 3, 3, 4, 5, 6, 6, 0])
    cols = np.array([1, 0, 2, 2, 4, 5, 6, 3, 3, 0, 6, 1])
    x = rng.uniform(0.3, 300.0, size=len(rows))
    weights = np.minimum(1.0, (x / 100.0) ** 0.75)
    return params, (rows, cols, weights, np.log(x))


def _numpy_loss_and_grads(params: dict, rows, cols, weights, log_x) -> tuple[float, dict]:
    w, wc, b, bc = params["w"], params["w_context"], params["b"], params["b_context"]
    diff = np.einsum("nd,nd->n", w[rows], wc[cols]) + b[rows] + bc[cols] - log_x
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    for n, (i, j) in enumerate(zip(rows, cols)):
        g = 2.0 * weights[n] * diff[n]
        grads["w"][i] += g * wc[j]
        grads["w_context"][j] += g * w[i]
        grads["b"][i] += g
        grads["b_context"][j] += g
    return float(np.sum(weights * diff**2)), grads


def test_weighting_is_min_one_and_a_power() -> None:
    f = np.asarray(weighting(jnp.array([1.0, 50.0, 100.0, 250.0]), 100.0, 0.75))
    np.testing.assert_allclose(f, [0.01**0.75, 0.5**0.75, 1.0, 1.0], rtol=1e-6)


def test_loss_and_gradients_equal_the_numpy_reference() -> None:
    params, batch = _problem()
    expected_loss, expected_grads = _numpy_loss_and_grads(params, *batch)
    with jax.enable_x64(True):
        loss, grads = jax.value_and_grad(glove_loss)(jax.tree.map(jnp.asarray, params), *map(jnp.asarray, batch))
        assert loss.dtype == jnp.float64
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-6)
    for name in params:
        np.testing.assert_allclose(np.asarray(grads[name]), expected_grads[name], rtol=1e-6, atol=1e-9)


def test_a_step_is_glove_c_adagrad_on_the_batch_gradient() -> None:
    """Every row's gradient of J / 2 summed over the batch, scaled by the learning rate, added
    squared to its accumulator, then divided by the accumulator's root; untouched rows stay."""
    params, batch = _problem(1)
    rng = np.random.default_rng(2)
    accumulators = {name: rng.uniform(1.0, 3.0, size=value.shape) for name, value in params.items()}
    _, grads = _numpy_loss_and_grads(params, *batch)
    expected_params, expected_accumulators = {}, {}
    for name in params:
        step = 0.05 * 0.5 * grads[name]
        expected_accumulators[name] = accumulators[name] + step**2
        expected_params[name] = params[name] - step / np.sqrt(expected_accumulators[name])
    with jax.enable_x64(True):
        new_params, new_accumulators, _ = adagrad_step(
            jax.tree.map(jnp.asarray, params), jax.tree.map(jnp.asarray, accumulators), tuple(map(jnp.asarray, batch)), 0.05
        )
    for name in params:
        np.testing.assert_allclose(np.asarray(new_params[name]), expected_params[name], rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(np.asarray(new_accumulators[name]), expected_accumulators[name], rtol=1e-6)
    untouched = sorted(set(range(N_WORDS)) - set(batch[1].tolist()))
    np.testing.assert_array_equal(np.asarray(new_params["w_context"])[untouched], params["w_context"][untouched])


def test_initial_params_are_glove_c_uniform() -> None:
    params = initial_params(50, 10, seed=0)
    for value in params.values():
        assert value.dtype == jnp.float32 and float(jnp.max(jnp.abs(value))) <= 0.05


def _toy_counts() -> Cooccurrence:
    rng = np.random.default_rng(0)
    topics = [[f"a{i}" for i in range(8)], [f"b{i}" for i in range(8)], [f"c{i}" for i in range(8)]]
    sentences = [list(rng.choice(topics[rng.integers(3)], size=rng.integers(3, 9))) for _ in range(300)]
    return cooccurrence_counts(sentences, Vocabulary.build(sentences), 3)


def test_training_lowers_the_loss_and_a_seed_gives_the_same_vectors() -> None:
    cooc = _toy_counts()
    config = GloveConfig(dim=8, epochs=6, batch_size=50, seed=3)  # Not a divisor of the entries: a padded batch.
    assert len(cooc.values) % config.batch_size
    result = train_glove(cooc, config)
    batch = (cooc.rows, cooc.cols, np.asarray(weighting(cooc.values, 100.0, 0.75), np.float32),
             np.log(cooc.values).astype(np.float32))
    before = float(glove_loss(initial_params(cooc.n_words, 8, 3), *batch))
    assert float(glove_loss(result.params, *batch)) < 0.5 * before
    assert result.losses[-1] < result.losses[0] and len(result.seconds) == 6
    assert result.vectors.shape == (cooc.n_words, 8) and result.vectors.dtype == np.float32
    np.testing.assert_array_equal(result.vectors, np.asarray(result.params["w"] + result.params["w_context"]))
    np.testing.assert_array_equal(train_glove(cooc, config).vectors, result.vectors)
    assert not np.array_equal(train_glove(cooc, GloveConfig(dim=8, epochs=6, batch_size=50, seed=4)).vectors,
                              result.vectors)


def test_no_entries_is_refused() -> None:
    empty = Cooccurrence(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0), n_words=3, tokens=2)
    with pytest.raises(ValueError, match="no co-occurrences to train on"):
        train_glove(empty)
