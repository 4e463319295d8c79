"""Optimizer and learning-rate schedule from `config.train`."""

from __future__ import annotations

import ml_collections
import optax


def make_schedule(opt: ml_collections.ConfigDict, num_steps: int) -> optax.Schedule:
    """Learning rate per step: optional linear warmup, then constant, cosine or linear decay."""
    peak, warmup = opt.learning_rate, opt.warmup_steps
    if opt.schedule == "constant":
        decay = optax.constant_schedule(peak)
    elif opt.schedule in ("cosine", "linear"):
        if num_steps <= warmup:
            raise ValueError(f"train.optimizer.schedule={opt.schedule!r} needs train.num_steps > warmup_steps")
        decay_steps = num_steps - warmup
        decay = (
            optax.cosine_decay_schedule(peak, decay_steps)
            if opt.schedule == "cosine"
            else optax.linear_schedule(peak, 0.0, decay_steps)
        )
    else:
        raise ValueError(f"train.optimizer.schedule must be 'constant', 'cosine' or 'linear', got {opt.schedule!r}")
    if warmup > 0:
        return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), decay], [warmup])
    return decay


def make_optimizer(train: ml_collections.ConfigDict, num_steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
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
