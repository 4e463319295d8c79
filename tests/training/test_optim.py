"""Optimizer and schedules from config, checked against hand-computed updates."""

import logging

import numpy as np
import jax.numpy as jnp
import optax
import pytest

from elmo_jax.config import schema
from elmo_jax.config.recipes import recipe_module
from elmo_jax.config.validation import validate
from elmo_jax.training import optim

demo = recipe_module("demo")


def _train_config(**opt):
    config = schema.get_config().train
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
    schedule = optim.make_schedule(110, **opt)
    assert float(schedule(0)) == 0.0
    assert float(schedule(5)) == pytest.approx(0.5)
    assert float(schedule(10)) == pytest.approx(1.0)
    assert float(schedule(60)) == pytest.approx(0.5, abs=1e-6)
    assert float(schedule(110)) == pytest.approx(0.0, abs=1e-6)


def test_linear_and_constant_schedules():
    linear = optim.make_schedule(100, **_train_config(learning_rate=2.0, schedule="linear").optimizer)
    assert float(linear(50)) == pytest.approx(1.0)
    constant = optim.make_schedule(100, **_train_config(learning_rate=0.3).optimizer)
    assert float(constant(99)) == pytest.approx(0.3)


@pytest.mark.parametrize(
    "key,value,message",
    [("name", "lamb", "train.optimizer.name"), ("schedule", "step", "train.optimizer.schedule")],
)
def test_bad_optimizer_config_names_the_key(key, value, message):
    config = schema.get_config()
    config.train.optimizer[key] = value
    with pytest.raises(ValueError, match=message):  # Where a config enters, before any optimizer is built.
        validate(config)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_warmup_outlasting_a_decaying_run_is_clamped_to_a_tenth(schedule, caplog):
    opt = _train_config(learning_rate=1.0, schedule=schedule, warmup_steps=100).optimizer
    with caplog.at_level(logging.WARNING):
        lr = optim.make_schedule(50, **opt)
    assert _warnings(caplog) == [
        f"train.optimizer.warmup_steps=100 >= the run's 50 steps: clamped to 5 (a tenth of the run) so the "
        f"{schedule} schedule can decay"
    ]
    values = np.array([float(lr(step)) for step in range(51)])
    assert values[0] == 0.0
    assert values[5] == pytest.approx(1.0) and values.argmax() == 5
    assert np.all(np.diff(values[5:]) < 0)
    assert values[50] == pytest.approx(0.0, abs=1e-6)


def test_constant_schedule_warns_when_warmup_outlasts_the_run(caplog):
    opt = _train_config(learning_rate=1.0, warmup_steps=20).optimizer
    with caplog.at_level(logging.WARNING):
        lr = optim.make_schedule(10, **opt)
    assert _warnings(caplog) == [
        "train.optimizer.warmup_steps=20 >= the run's 10 steps: the constant schedule never reaches its peak "
        "learning rate 1"
    ]
    assert float(lr(9)) == pytest.approx(0.45)


def test_warmup_within_the_run_is_kept_silently(caplog):
    with caplog.at_level(logging.WARNING):
        lr = optim.make_schedule(10, **_train_config(learning_rate=1.0, schedule="cosine", warmup_steps=9).optimizer)
    assert _warnings(caplog) == []
    assert float(lr(9)) == pytest.approx(1.0)


def test_demo_config_builds_an_optimizer_for_five_steps():
    """demo.py warms up for 100 steps: a 5-step run clamps it to 0 and decays from the peak."""
    train = demo.get_config().train
    train.num_steps = 5
    tx, lr = optim.make_optimizer(train, train.num_steps)
    params = {"w": jnp.ones(3)}
    updates, _ = tx.update({"w": jnp.ones(3)}, tx.init(params), params)
    assert np.all(np.isfinite(updates["w"])) and np.any(updates["w"] != 0)
    assert float(lr(0)) == pytest.approx(train.optimizer.learning_rate)
    assert float(lr(5)) == pytest.approx(0.0, abs=1e-9)
