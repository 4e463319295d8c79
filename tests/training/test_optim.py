"""Optimizer and schedules from config, checked against hand-computed updates."""

import numpy as np
import jax.numpy as jnp
import optax
import pytest

from configs import default
from elmo_jax.training import optim


def _train_config(**opt):
    config = default.get_config().train
    for k, v in opt.items():
        config.optimizer[k] = v
    return config


def test_adagrad_matches_bilm_tf_update():
    """p -= lr * g / sqrt(acc), acc = initial_accumulator + sum of g^2 (after norm clipping)."""
    config = _train_config(name="adagrad", learning_rate=0.2, initial_accumulator_value=1.0)
    config.clip_norm = 1.0
    tx, _ = optim.make_optimizer(config, 10)
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grads = [np.array([3.0, 4.0, 0.0]), np.array([0.1, -0.2, 0.3])]
    state = tx.init(params)
    p, acc = np.array([1.0, -2.0, 3.0]), np.ones(3)
    for g in grads:
        updates, state = tx.update({"w": jnp.asarray(g)}, state, params)
        params = optax.apply_updates(params, updates)
        g = g * min(1.0, 1.0 / np.linalg.norm(g))
        acc += g * g
        p -= 0.2 * g / np.sqrt(acc)
    np.testing.assert_allclose(params["w"], p, rtol=1e-6)


def test_warmup_then_cosine_schedule():
    opt = _train_config(learning_rate=1.0, schedule="cosine", warmup_steps=10).optimizer
    schedule = optim.make_schedule(opt, 110)
    assert float(schedule(0)) == 0.0
    assert float(schedule(5)) == pytest.approx(0.5)
    assert float(schedule(10)) == pytest.approx(1.0)
    assert float(schedule(60)) == pytest.approx(0.5, abs=1e-6)
    assert float(schedule(110)) == pytest.approx(0.0, abs=1e-6)


def test_linear_and_constant_schedules():
    linear = optim.make_schedule(_train_config(learning_rate=2.0, schedule="linear").optimizer, 100)
    assert float(linear(50)) == pytest.approx(1.0)
    constant = optim.make_schedule(_train_config(learning_rate=0.3).optimizer, 100)
    assert float(constant(99)) == pytest.approx(0.3)


@pytest.mark.parametrize(
    "key,value,message",
    [("name", "lamb", "train.optimizer.name"), ("schedule", "step", "train.optimizer.schedule")],
)
def test_bad_optimizer_config_names_the_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        optim.make_optimizer(_train_config(**{key: value}), 10)


def test_decaying_schedule_needs_steps_beyond_warmup():
    with pytest.raises(ValueError, match="num_steps"):
        optim.make_schedule(_train_config(schedule="cosine", warmup_steps=10).optimizer, 10)
