"""The optimizer and learning-rate schedule of `config.train`: the keys of `train.optimizer` are the
keyword parameters of `make_schedule` and of the optimizer each names; the config was checked
where it entered, so the names index their maps."""

from __future__ import annotations

import logging
from typing import Any, Callable

import ml_collections
import optax

from elmo_jax.config import schema

# Each schedule after the warmup, from (peak, its steps).
_SCHEDULES: dict[str, Callable[[float, int], optax.Schedule]] = {
    "constant": lambda peak, steps: optax.constant_schedule(peak),
    "cosine": lambda peak, steps: optax.cosine_decay_schedule(peak, steps),
    "linear": lambda peak, steps: optax.linear_schedule(peak, 0.0, steps),
}
# Each optimizer from (the schedule, train.optimizer's keys it reads).
_OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "adagrad": lambda lr, initial_accumulator_value, **_: optax.adagrad(
        lr, initial_accumulator_value=initial_accumulator_value, eps=0.0),  # bilm-tf's: no epsilon.
    "adam": lambda lr, b1, b2, eps, **_: optax.adam(lr, b1=b1, b2=b2, eps=eps),
    "sgd": lambda lr, **_: optax.sgd(lr),
}


def make_schedule(
    num_steps: int, learning_rate: float, schedule: str, warmup_steps: int, **_: Any
) -> optax.Schedule:
    """Learning rate per step: optional linear warmup, then constant, or a decay to 0 at `num_steps`."""
    warmup = _warmup(num_steps, learning_rate, schedule, warmup_steps)
    decay = _SCHEDULES[schedule](learning_rate, num_steps - warmup)
    if warmup > 0:
        return optax.join_schedules([optax.linear_schedule(0.0, learning_rate, warmup), decay], [warmup])
    return decay


def _warmup(num_steps: int, learning_rate: float, schedule: str, warmup_steps: int) -> int:
    """`warmup_steps`, clamped to a tenth of the run when it leaves a decaying schedule no steps,
    so a short run (a smoke test) warms up in proportion; warned about, as is a constant schedule
    whose warmup outlasts the run (it never reaches its peak)."""
    if warmup_steps == 0 or warmup_steps < num_steps:
        return warmup_steps
    if schedule == "constant":
        logging.warning(
            "train.optimizer.warmup_steps=%d >= the run's %d steps: the constant schedule never reaches "
            "its peak learning rate %g", warmup_steps, num_steps, learning_rate,
        )
        return warmup_steps
    clamped = num_steps // 10
    logging.warning(
        "train.optimizer.warmup_steps=%d >= the run's %d steps: clamped to %d (a tenth of the run) so "
        "the %s schedule can decay", warmup_steps, num_steps, clamped, schedule,
    )
    return clamped


def make_optimizer(
    train: ml_collections.ConfigDict, num_steps: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Global-norm clipping (`train.clip_norm`, 0 = none) followed by `train.optimizer`, and its schedule."""
    options = schema.section_options(train.optimizer, "train.optimizer")
    schedule = make_schedule(num_steps, **options)
    parts = [optax.clip_by_global_norm(train.clip_norm)] if train.clip_norm > 0 else []
    return optax.chain(*parts, _OPTIMIZERS[options["name"]](schedule, **options)), schedule
