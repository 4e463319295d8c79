"""The train step: loss definition, state carrying, and the optimizer update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import optim, parallel
from elmo_jax.training.state import create_train_state
from elmo_jax.training.step import make_train_step, stack_directions
from tests.training.helpers import random_batch, tiny_config

VOCAB = 37


def _setup(**overrides):
    config = tiny_config(**{"model.dropout": 0.0, **overrides})
    model = bilm_from_config(config.model, VOCAB)
    tx, _ = optim.make_optimizer(config.train, 100)
    state = create_train_state(model, tx, 0, config.train.batch_size, config.data.max_chars_per_token)
    mesh = parallel.make_mesh(jax.devices()[:1])
    state = parallel.place_state(state, mesh)
    step = parallel.parallel_train_step(make_train_step(model, config), mesh, state)
    return config, model, state, step, mesh


def _log_softmax_nll(hidden, w, b, targets):
    logits = hidden @ w.T + b
    logits = logits - logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits).sum(-1))
    return log_z - logits[np.arange(len(targets)), targets]


def test_full_softmax_loss_is_mean_of_directions():
    config, model, state, step, mesh = _setup(**{"model.softmax.sampled": False})
    batch = random_batch(np.random.default_rng(0), VOCAB, 4, 5, config.data.max_chars_per_token, mask_tail=2)
    params = jax.device_get(state.params)
    inputs = stack_directions(jax.tree.map(jnp.asarray, batch))
    _, top, final = model.apply({"params": params}, inputs, model.initial_state(4))
    top = np.asarray(top)
    w, b = np.asarray(params["softmax"]["W"]), np.asarray(params["softmax"]["b"])
    expected = []
    for d, direction in enumerate(("forward", "backward")):
        mask = batch[direction]["mask"].reshape(-1)
        nll = _log_softmax_nll(top[d].reshape(-1, top.shape[-1]), w, b, batch[direction]["targets"].reshape(-1))
        expected.append(nll[mask].mean())
    new_state, metrics = step(state, parallel.shard_batch(batch, mesh))
    np.testing.assert_allclose(metrics["train_forward_loss"], expected[0], rtol=1e-5)
    np.testing.assert_allclose(metrics["train_backward_loss"], expected[1], rtol=1e-5)
    np.testing.assert_allclose(metrics["train_loss"], 0.5 * sum(expected), rtol=1e-5)
    assert float(metrics["tokens"]) == 4 * 5 - 2
    for got, want in zip(jax.device_get(new_state.lstm_state), final):
        np.testing.assert_allclose(got.h, want.h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.c, want.c, rtol=1e-5, atol=1e-6)
    assert int(new_state.step) == 1


@pytest.mark.parametrize("stateful", [True, False])
def test_carried_state_changes_the_next_loss_only_when_stateful(stateful):
    config, model, state, step, mesh = _setup(**{"model.softmax.sampled": False, "train.stateful": stateful})
    rng = np.random.default_rng(1)
    chars = config.data.max_chars_per_token
    first, second = (random_batch(rng, VOCAB, 4, 5, chars) for _ in range(2))
    # Same parameters, but one run has seen `first` (non-zero carried state), one has not.
    sgd_zero = state.replace(tx=optim.optax.sgd(0.0), opt_state=optim.optax.sgd(0.0).init(state.params))
    step0 = parallel.parallel_train_step(make_train_step(model, config), mesh, sgd_zero)
    after_first, _ = step0(jax.tree.map(jnp.copy, sgd_zero), parallel.shard_batch(first, mesh))
    _, with_history = step0(after_first, parallel.shard_batch(second, mesh))
    _, fresh = step0(jax.tree.map(jnp.copy, sgd_zero), parallel.shard_batch(second, mesh))
    same = np.isclose(float(with_history["train_loss"]), float(fresh["train_loss"]), rtol=1e-7)
    assert same != stateful


def test_sampled_softmax_step_fits_a_fixed_batch():
    config, model, state, step, mesh = _setup(
        **{"train.stateful": False, "train.optimizer.name": "adam", "train.optimizer.learning_rate": 0.03}
    )
    batch = random_batch(np.random.default_rng(2), VOCAB, 4, 5, config.data.max_chars_per_token)
    sharded = parallel.shard_batch(batch, mesh)
    losses = []
    for _ in range(40):
        state, metrics = step(state, sharded)
        losses.append(float(metrics["train_loss"]))
    assert all(np.isfinite(losses))
    # Sampled losses are noisy (new negatives each step): compare averages.
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])
