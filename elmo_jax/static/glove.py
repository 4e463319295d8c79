"""GloVe (Pennington et al. 2014): word vectors fit to the log co-occurrence counts by weighted
least squares, J = sum_ij f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2 over the nonzero X_ij,
with f(x) = min(1, (x / x_max)^alpha).

Trained as GloVe's C code (glove.c) trains it: weights and biases uniform in [-0.5, 0.5] / dim,
AdaGrad with learning rate 0.05 and an accumulator that starts at 1 and sums (lr * g)^2, g the
gradient of J / 2 (the C code's cost), over the entries shuffled every epoch. The C code updates
after each entry; here a jit-compiled step takes a minibatch, its gradient summed per word, and
the step divides by the accumulator after adding the step's own (lr * g)^2 (the C code adds it
after dividing), which bounds each coordinate's step below 1 where a frequent word's gradient is
summed over many entries. The vectors are W + W~, as the paper's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.static.cooccurrence import Cooccurrence

Params = dict[str, jax.Array]  # w, w_context: [n_words, dim]; b, b_context: [n_words].


@dataclasses.dataclass(frozen=True)
class GloveConfig:
    """The paper's and the C code's defaults, but the minibatch (the C code's is one entry)."""

    dim: int = 100
    epochs: int = 15
    x_max: float = 100.0
    alpha: float = 0.75
    learning_rate: float = 0.05
    batch_size: int = 1024
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class GloveResult:
    """vectors: `[n_words, dim]` float32, W + W~; params: the final `Params`; losses: J / nnz of each
    epoch, each entry's term taken before its step (as the C code reports its cost); seconds:
    each epoch's; compile_seconds: compiling the epoch, once."""

    vectors: np.ndarray
    params: Params
    losses: list[float]
    seconds: list[float]
    compile_seconds: float


def weighting(x: jax.Array, x_max: float, alpha: float) -> jax.Array:
    """f(x) = min(1, (x / x_max)^alpha): rare pairs count less, frequent ones no more than 1."""
    return jnp.minimum(1.0, (x / x_max) ** alpha)


def glove_loss(params: Params, rows: jax.Array, cols: jax.Array, weights: jax.Array, log_x: jax.Array) -> jax.Array:
    """J over the entries (rows, cols: `[n]` word ids; weights: `[n]` f(X); log_x: `[n]` log X),
    in the params' dtype."""
    w, w_context = params["w"][rows], params["w_context"][cols]
    diff = jnp.sum(w * w_context, axis=-1) + params["b"][rows] + params["b_context"][cols] - log_x
    return jnp.sum(weights * diff**2)


def initial_params(n_words: int, dim: int, seed: int) -> Params:
    """Uniform in [-0.5, 0.5] / dim, float32, as glove.c initializes its weights and biases."""
    rng = np.random.default_rng(seed)
    uniform = lambda *shape: jnp.asarray(((rng.random(shape) - 0.5) / dim).astype(np.float32))
    return {"w": uniform(n_words, dim), "w_context": uniform(n_words, dim), "b": uniform(n_words),
            "b_context": uniform(n_words)}


def adagrad_step(params: Params, accumulators: Params, batch: tuple, learning_rate: float) -> tuple:
    """One step on a minibatch (the arguments of `glove_loss` but params): the new params and
    accumulators and the batch's J. Only the rows of the batch's words change: each gets its
    gradient summed over the batch, then every copy of a row writes the same new value."""
    rows, cols = batch[0], batch[1]
    loss, grads = jax.value_and_grad(glove_loss)(params, *batch)
    new_params, new_accumulators = {}, {}
    for name, ids in (("w", rows), ("b", rows), ("w_context", cols), ("b_context", cols)):
        step = 0.5 * learning_rate * grads[name][ids]  # The gradient of J / 2.
        accumulator = accumulators[name][ids] + step**2
        new_params[name] = params[name].at[ids].set(params[name][ids] - step / jnp.sqrt(accumulator))
        new_accumulators[name] = accumulators[name].at[ids].set(accumulator)
    return new_params, new_accumulators, loss


@jax.jit
def _epoch(params: Params, accumulators: Params, batches: tuple, learning_rate: jax.Array) -> tuple:
    """`adagrad_step` over `batches` (each array `[n_batches, batch_size]`), J summed."""

    def step(carry, batch):
        params, accumulators, total = carry
        params, accumulators, loss = adagrad_step(params, accumulators, batch, learning_rate)
        return (params, accumulators, total + loss), None

    (params, accumulators, total), _ = jax.lax.scan(step, (params, accumulators, jnp.float32(0.0)), batches)
    return params, accumulators, total


def _batches(cooc: Cooccurrence, config: GloveConfig, order: np.ndarray) -> tuple:
    """The entries in `order`, padded with weight-0 entries (no gradient) to whole batches."""
    n = len(order)
    padded = -(-n // config.batch_size) * config.batch_size
    weights = np.zeros(padded, np.float32)
    log_x = np.zeros(padded, np.float32)
    rows = np.zeros(padded, np.int32)
    cols = np.zeros(padded, np.int32)
    rows[:n], cols[:n] = cooc.rows[order], cooc.cols[order]
    values = cooc.values[order]
    weights[:n] = weighting(values, config.x_max, config.alpha)
    log_x[:n] = np.log(values)
    return tuple(jnp.asarray(a.reshape(-1, config.batch_size)) for a in (rows, cols, weights, log_x))


def train_glove(
    cooc: Cooccurrence, config: GloveConfig = GloveConfig(), log: Callable[[str], None] | None = None
) -> GloveResult:
    """GloVe vectors of the counts `cooc`, `config.epochs` passes over its entries in an order
    drawn from `config.seed` each epoch; the same seed gives the same vectors on one machine.
    `log` gets a line per epoch."""
    if len(cooc.values) == 0:
        raise ValueError("no co-occurrences to train on: the corpus has no two words in one sentence")
    params = initial_params(cooc.n_words, config.dim, config.seed)
    accumulators = jax.tree.map(jnp.ones_like, params)
    rng = np.random.default_rng(config.seed)
    learning_rate = jnp.float32(config.learning_rate)
    start = time.perf_counter()
    n_batches = -(-len(cooc.values) // config.batch_size)
    shapes = tuple(jax.ShapeDtypeStruct((n_batches, config.batch_size), dtype)
                   for dtype in (jnp.int32, jnp.int32, jnp.float32, jnp.float32))
    epoch = _epoch.lower(params, accumulators, shapes, learning_rate).compile()
    compile_seconds = time.perf_counter() - start
    losses, seconds = [], []
    for index in range(config.epochs):
        start = time.perf_counter()
        batches = _batches(cooc, config, rng.permutation(len(cooc.values)))
        params, accumulators, total = epoch(params, accumulators, batches, learning_rate)
        losses.append(float(total) / len(cooc.values))
        seconds.append(time.perf_counter() - start)
        if log:
            log(f"epoch {index + 1}/{config.epochs}: J / nnz {losses[-1]:.4f}, {seconds[-1]:.1f} s, "
                f"{len(cooc.values) / seconds[-1]:,.0f} entries/s")
    vectors = np.asarray(params["w"] + params["w_context"])
    return GloveResult(vectors=vectors, params=params, losses=losses, seconds=seconds, compile_seconds=compile_seconds)
