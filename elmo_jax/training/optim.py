"""Optimizer and learning-rate schedule from `config.train`."""

from __future__ import annotations

import logging

import ml_collections
import optax


_SCHEDULES = ("constant", "cosine", "linear")


def make_schedule(opt: ml_collections.ConfigDict, num_steps: int) -> optax.Schedule:
    """Learning rate per step: optional linear warmup, then constant, or a decay to 0 at `num_steps`."""
    if opt.schedule not in _SCHEDULES:
        raise ValueError(f"train.optimizer.schedule must be 'constant', 'cosine' or 'linear', got {opt.schedule!r}")
    peak, warmup = opt.learning_rate, warmup_steps(opt, num_steps)
    if opt.schedule == "constant":
        decay = optax.constant_schedule(peak)
    elif opt.schedule == "cosine":
        decay = optax.cosine_decay_schedule(peak, num_steps - warmup)
    else:
        decay = optax.linear_schedule(peak, 0.0, num_steps - warmup)
    if warmup > 0:
        return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), decay], [warmup])
    return decay


def warmup_steps(opt: ml_collections.ConfigDict, num_steps: int) -> int:
    """`opt.warmup_steps`, clamped to a tenth of the run when it leaves a decaying schedule no steps.

    A tenth keeps a short run (a smoke test, the demo for 100 steps) warming up in proportion
    without spending most of its steps below the peak. The clamp is warned about, and so is a
    constant schedule whose warmup outlasts the run (it never reaches its peak).
    """
    warmup = opt.warmup_steps
    if warmup == 0 or warmup < num_steps:
        return warmup
    if opt.schedule == "constant":
        logging.warning(
            "train.optimizer.warmup_steps=%d >= the run's %d steps: the constant schedule never reaches "
            "its peak learning rate %g", warmup, num_steps, opt.learning_rate,
        )
        return warmup
    clamped = num_steps // 10
    logging.warning(
        "train.optimizer.warmup_steps=%d >= the run's %d steps: clamped to %d (a tenth of the run) so "
        "the %s schedule can decay", warmup, num_steps, clamped, opt.schedule,
    )
    return clamped


def make_optimizer(
    train: ml_collections.ConfigDict, num_steps: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Global-norm clipping followed by Adagrad (bilm-tf), Adam or SGD."""
    opt = train.optimizer
    schedule = make_schedule(opt, num_steps)
    if opt.name == "adagrad":
        base = optax.adagrad(schedule, initial_accumulator_value=opt.initial_accumulator_value, eps=0.0)
    elif opt.name == "adam":
        base = optax.adam(schedule, b1=opt.b1, b2=opt.b2, eps=opt.eps)
    elif opt.name == "sgd":
        base = optax.sgd(schedule)
    else:
        raise ValueError(f"train.optimizer.name must be 'adagrad', 'adam' or 'sgd', got {opt.name!r}")
    parts = [optax.clip_by_global_norm(train.clip_norm)] if train.clip_norm > 0 else []
    return optax.chain(*parts, base), schedule
