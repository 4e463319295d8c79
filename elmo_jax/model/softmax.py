"""Softmax heads shared by both directions: sampled softmax (training) and chunked full softmax.

The sampled softmax is TF's `sampled_softmax_loss` as bilm-tf uses it: K log-uniform candidates,
logits minus log(expected count), accidental hits removed.
"""

from __future__ import annotations

import math
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.model.initializers import weight_init
from elmo_jax.model.precision import matmul
from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import BOOLEAN, integer

# model.softmax: the keys of the training softmax (`NegativeSampler`'s and the full softmax's chunks).
SECTION = Section("The softmax over the vocabulary, shared by both directions.", {
    "sampled": Key(True, BOOLEAN, "Sampled softmax in training (False: exact full softmax).", how_computed=True),
    "n_negative_samples": Key(8192, integer(1),
                              "Candidates per draw for the sampled softmax (one draw per step by default).",
                              how_computed=True),
    "unique_samples": Key(True, BOOLEAN, "Distinct candidates (as TF's sampler) vs. with replacement.",
                          how_computed=True),
    "streams_per_draw": Key(0, integer(0),
                            "Each group of this many consecutive streams draws its own n_negative_samples, "
                            "and its tokens see only that draw (bilm-tf: 128, one draw per GPU tower); 0 = "
                            "one draw for the global batch. Groups are global (the loss does not depend on "
                            "the device count); their number and the device count must divide one another.",
                            how_computed=True),
    "negatives_per_direction": Key(False, BOOLEAN,
                                   "Separate draws for the forward and backward streams of a group (bilm-tf: "
                                   "True, one sampled_softmax_loss call per direction).", how_computed=True),
    "chunk_size": Key(8192, integer(1), "Vocabulary rows per chunk of the full softmax (bounds memory).",
                      how_computed=True),
})

_NEG_INF = -1e30  # Finite "minus infinity": keeps gradients NaN-free.


class SoftmaxWeights(nn.Module):
    """Holds the output embedding `W [V, dim]` and bias `b [V]` (bilm-tf `softmax/W`, `softmax/b`)."""

    vocab_size: int
    dim: int
    init_range: float = 0.0  # > 0: W from U(-init_range, init_range) instead of N(0, 1 / dim).

    @nn.compact
    def __call__(self) -> tuple[jax.Array, jax.Array]:
        init = weight_init(self.init_range, nn.initializers.normal(stddev=1.0 / math.sqrt(self.dim)))
        w = self.param("W", init, (self.vocab_size, self.dim))
        b = self.param("b", nn.initializers.zeros, (self.vocab_size,))
        return w, b


def log_uniform_probs(ids: jax.Array, vocab_size: int) -> jax.Array:
    """P(k) = log((k + 2) / (k + 1)) / log(V + 1) for ids k in [0, V)."""
    ids = ids.astype(jnp.float32)
    return (jnp.log1p(1.0 / (ids + 1.0))) / math.log(vocab_size + 1.0)


def unique_sampling_tries(vocab_size: int, num_sampled: int) -> float:
    """Expected number n of log-uniform draws to see `num_sampled` distinct ids: sum_k 1 - (1 - P(k))^n
    = num_sampled by bisection, so P(k in sample) ~= 1 - (1 - P(k))^n, as TF's unique sampler says."""
    if not 0 < num_sampled < vocab_size:
        raise ValueError(f"need 0 < n_negative_samples < vocab size, got {num_sampled} and {vocab_size}")
    k = np.arange(vocab_size, dtype=np.float64)
    log1m_p = np.log1p(-np.log1p(1.0 / (k + 1.0)) / math.log(vocab_size + 1.0))

    def expected_unique(n: float) -> float:
        return float(np.sum(-np.expm1(n * log1m_p)))

    lo, hi = float(num_sampled), float(num_sampled)
    while expected_unique(hi) < num_sampled:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expected_unique(mid) < num_sampled else (lo, mid)
    return 0.5 * (lo + hi)


def sample_log_uniform(
    rng: jax.Array, vocab_size: int, num_sampled: int, unique: bool, num_tries: float | None = None
) -> tuple[jax.Array, jax.Array]:
    """Candidate ids `[K]` and their log expected counts `[K]`: K independent draws (count K P(k)), or
    with `unique` K distinct ids by Gumbel top-k, TF's rejection sampler's distribution (count
    1 - (1 - P(k))^num_tries)."""
    if unique:
        if num_tries is None:
            raise ValueError("unique sampling needs num_tries (see unique_sampling_tries)")
        logp = jnp.log(log_uniform_probs(jnp.arange(vocab_size), vocab_size))
        _, ids = jax.lax.top_k(logp + jax.random.gumbel(rng, (vocab_size,)), num_sampled)
        p = log_uniform_probs(ids, vocab_size)
        log_expected = jnp.log(-jnp.expm1(num_tries * jnp.log1p(-p)))
    else:
        u = jax.random.uniform(rng, (num_sampled,))
        ids = jnp.floor(jnp.exp(u * math.log(vocab_size + 1.0))).astype(jnp.int32) - 1
        ids = jnp.clip(ids, 0, vocab_size - 1)
        log_expected = jnp.log(num_sampled * log_uniform_probs(ids, vocab_size))
    return ids.astype(jnp.int32), log_expected


def sampled_softmax_nll(
    w: jax.Array,
    b: jax.Array,
    hidden: jax.Array,
    targets: jax.Array,
    sampled_ids: jax.Array,
    sampled_log_expected: jax.Array,
    target_log_expected: jax.Array,
    dtype: jnp.dtype = jnp.float32,
) -> jax.Array:
    """Per-token sampled-softmax negative log-likelihood `[N]`: w `[V, P]`, b `[V]`, hidden `[N, P]`,
    targets `[N]`, sampled_ids `[K]` and their log expected counts `[K]`, the targets' `[N]`. Only the
    K sampled and N target rows of `w` are gathered."""
    w_true = jnp.take(w, targets, axis=0)
    true_logit = jnp.sum(hidden * w_true, axis=-1) + jnp.take(b, targets) - target_log_expected
    sampled_logits = matmul("np,kp->nk", hidden, jnp.take(w, sampled_ids, axis=0), dtype)
    sampled_logits = sampled_logits + jnp.take(b, sampled_ids) - sampled_log_expected
    hits = targets[:, None] == sampled_ids[None, :]
    sampled_logits = jnp.where(hits, _NEG_INF, sampled_logits)
    logits = jnp.concatenate([true_logit[:, None], sampled_logits], axis=-1)
    return jax.nn.logsumexp(logits, axis=-1) - true_logit


def grouped_sampled_softmax_nll(
    w: jax.Array,
    b: jax.Array,
    hidden: jax.Array,
    targets: jax.Array,
    sampled_ids: jax.Array,
    sampled_log_expected: jax.Array,
    target_log_expected: jax.Array,
    dtype: jnp.dtype = jnp.float32,
) -> jax.Array:
    """`sampled_softmax_nll` per group of tokens (a bilm-tf tower's), each with its own candidates:
    w, b shared; the others with a leading group axis G (hidden `[G, M, P]`, ...) -> `[G, M]`."""
    one_group = partial(sampled_softmax_nll, w, b, dtype=dtype)

    groups = (hidden, targets, sampled_ids, sampled_log_expected, target_log_expected)
    if hidden.shape[0] == 1:  # One group: plain matmuls (XLA:CPU runs a batch-of-1 dot slower).
        return one_group(*(x[0] for x in groups))[None]
    return jax.vmap(one_group)(*groups)


def full_softmax_nll(
    w: jax.Array, b: jax.Array, hidden: jax.Array, targets: jax.Array, chunk_size: int = 8192
) -> jax.Array:
    """Exact per-token negative log-likelihood `[N]` over the whole vocabulary, in chunks of at most
    `chunk_size` rows as even as possible: `[N, chunk_size]` logits at a time, few padding rows."""
    vocab_size, dim = w.shape
    n_chunks = -(-vocab_size // min(chunk_size, vocab_size))
    chunk_size = -(-vocab_size // n_chunks)
    pad = n_chunks * chunk_size - vocab_size
    w_chunks = jnp.pad(w, ((0, pad), (0, 0))).reshape(n_chunks, chunk_size, dim)
    b_chunks = jnp.concatenate([b, jnp.full((pad,), _NEG_INF, b.dtype)]).reshape(n_chunks, chunk_size)

    def chunk_logsumexp(chunk: tuple[jax.Array, jax.Array]) -> jax.Array:
        w_c, b_c = chunk
        return jax.nn.logsumexp(hidden @ w_c.T + b_c, axis=-1)

    log_z = jax.nn.logsumexp(jax.lax.map(chunk_logsumexp, (w_chunks, b_chunks)), axis=0)
    true_logit = jnp.sum(hidden * jnp.take(w, targets, axis=0), axis=-1) + jnp.take(b, targets)
    return log_z - true_logit
