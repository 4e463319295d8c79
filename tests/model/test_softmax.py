"""Log-uniform sampler, sampled softmax and chunked full softmax vs NumPy (float64)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.softmax import (
    SoftmaxWeights,
    full_softmax_nll,
    grouped_sampled_softmax_nll,
    log_uniform_probs,
    sample_log_uniform,
    sampled_softmax_nll,
    unique_sampling_tries,
)

RTOL, ATOL = 1e-5, 1e-6

# Jitted once: eager dispatch compiles every primitive separately, which is much slower here.
sampled_nll = jax.jit(sampled_softmax_nll)
full_nll = jax.jit(full_softmax_nll, static_argnums=4)

V, DIM, N = 20, 5, 6  # vocabulary, hidden size, tokens (softmax tests)
SAMPLER_V, SAMPLER_K, DRAWS = 50, 10, 20000  # sampler tests: DRAWS x K candidates


# ----------------------------------------------------------------------------- NumPy references


def np_log_uniform(vocab_size: int) -> np.ndarray:
    """P(k) = (log(k + 2) - log(k + 1)) / log(V + 1), k = 0..V-1."""
    k = np.arange(vocab_size, dtype=np.float64)
    return (np.log(k + 2.0) - np.log(k + 1.0)) / np.log(vocab_size + 1.0)


def np_logsumexp(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable log(sum(exp(x)))."""
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def np_sampled_nll(
    w: np.ndarray, b: np.ndarray, h: np.ndarray, targets: np.ndarray,
    sampled: np.ndarray, sampled_log_q: np.ndarray, target_log_q: np.ndarray,
) -> np.ndarray:
    """Per token: -log softmax over [true, non-hit sampled] logits, each minus its log expected count."""
    out = np.zeros(len(targets))
    for n, t in enumerate(targets):
        true = h[n] @ w[t] + b[t] - target_log_q[n]
        logits = [true] + [h[n] @ w[s] + b[s] - q for s, q in zip(sampled, sampled_log_q) if s != t]
        out[n] = np_logsumexp(np.array(logits)) - true
    return out


def np_full_nll(w: np.ndarray, b: np.ndarray, h: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-log softmax(h W^T + b)[target]."""
    logits = h @ w.T + b
    return np_logsumexp(logits) - logits[np.arange(len(targets)), targets]


def softmax_example(seed: int = 0) -> tuple[np.ndarray, ...]:
    """w [V, DIM], b [V], hidden [N, DIM], targets [N] (float32 / int32)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0.0, 0.8, (V, DIM)).astype(np.float32)
    b = rng.normal(0.0, 0.5, (V,)).astype(np.float32)
    h = rng.normal(size=(N, DIM)).astype(np.float32)
    targets = np.array([0, 3, 3, 7, 19, 11], np.int32)
    return w, b, h, targets


def f64(*arrays: np.ndarray) -> list[np.ndarray]:
    """float64 copies."""
    return [np.asarray(a, np.float64) for a in arrays]


# ----------------------------------------------------------------------------- log-uniform sampler


@pytest.mark.parametrize("vocab_size", [1, 7, 1000, 800000])
def test_log_uniform_probs_normalised(vocab_size: int) -> None:
    p = np.asarray(log_uniform_probs(jnp.arange(vocab_size), vocab_size), np.float64)
    np.testing.assert_allclose(p.sum(), 1.0, rtol=2e-5)
    if vocab_size <= 1000:
        np.testing.assert_allclose(p, np_log_uniform(vocab_size), rtol=RTOL)
    assert np.all(np.diff(p) < 0)  # frequency-sorted: id 0 most likely


@pytest.mark.parametrize("vocab_size,num_sampled", [(SAMPLER_V, SAMPLER_K), (1000, 64), (800000, 8192)])
def test_unique_sampling_tries_solves_equation(vocab_size: int, num_sampled: int) -> None:
    n = unique_sampling_tries(vocab_size, num_sampled)
    p = np_log_uniform(vocab_size)
    np.testing.assert_allclose(np.sum(1.0 - (1.0 - p) ** n), num_sampled, rtol=1e-9)
    assert n > num_sampled  # repeats happen, so more tries than distinct ids


@pytest.mark.parametrize("vocab_size,num_sampled", [(10, 0), (10, 10), (10, 11)])
def test_unique_sampling_tries_rejects_bad_sizes(vocab_size: int, num_sampled: int) -> None:
    with pytest.raises(ValueError):
        unique_sampling_tries(vocab_size, num_sampled)


def test_unique_sampling_needs_num_tries() -> None:
    with pytest.raises(ValueError, match="num_tries"):
        sample_log_uniform(jax.random.key(0), SAMPLER_V, SAMPLER_K, unique=True)


def draw_unique(num_tries: float) -> tuple[np.ndarray, np.ndarray]:
    """DRAWS independent unique calls: ids [DRAWS, K] and log expected counts [DRAWS, K]."""
    keys = jax.random.split(jax.random.key(1234), DRAWS)
    sample = jax.vmap(lambda k: sample_log_uniform(k, SAMPLER_V, SAMPLER_K, True, num_tries))
    ids, log_q = jax.jit(sample)(keys)
    return np.asarray(ids), np.asarray(log_q)


def chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson statistic of multinomial counts against probabilities."""
    expected = counts.sum() * probs
    return float(np.sum((counts - expected) ** 2 / expected))


def chi_square_bound(dof: int) -> float:
    """A bound the statistic exceeds with probability ~1e-6 (Wilson-Hilferty, z = 4.75)."""
    z = 4.75
    return dof * (1.0 - 2.0 / (9.0 * dof) + z * math.sqrt(2.0 / (9.0 * dof))) ** 3


def test_sample_log_uniform_with_replacement_frequencies() -> None:
    """One call of K = DRAWS * SAMPLER_K independent draws: counts match K P(k)."""
    num_sampled = DRAWS * SAMPLER_K
    sample = jax.jit(sample_log_uniform, static_argnums=(1, 2, 3))
    ids, log_q = sample(jax.random.key(1234), SAMPLER_V, num_sampled, False)
    ids, log_q = np.asarray(ids), np.asarray(log_q)
    p = np_log_uniform(SAMPLER_V)
    assert ids.shape == (num_sampled,) and ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < SAMPLER_V
    # Reported log expected count: log(K P(id)).
    np.testing.assert_allclose(log_q, np.log(num_sampled * p[ids]), rtol=RTOL, atol=1e-5)
    counts = np.bincount(ids, minlength=SAMPLER_V).astype(np.float64)
    assert chi_square(counts, p) < chi_square_bound(SAMPLER_V - 1)
    # Frequent ids (>= ~4000 hits each): within 5% relative (>= 5 standard deviations).
    top = slice(0, 5)
    np.testing.assert_allclose(counts[top], num_sampled * p[top], rtol=0.05)
    # The rarest id (~1000 expected hits) within 15% (~5 standard deviations).
    np.testing.assert_allclose(counts[-1], num_sampled * p[-1], rtol=0.15)


def test_sample_log_uniform_unique_inclusion_probabilities() -> None:
    n = unique_sampling_tries(SAMPLER_V, SAMPLER_K)
    ids, log_q = draw_unique(n)
    p = np_log_uniform(SAMPLER_V)
    inclusion = 1.0 - (1.0 - p) ** n
    np.testing.assert_allclose(inclusion.sum(), SAMPLER_K, rtol=1e-9)
    # Distinct ids in every call.
    assert all(len(set(row)) == SAMPLER_K for row in ids.tolist())
    assert ids.min() >= 0 and ids.max() < SAMPLER_V
    np.testing.assert_allclose(log_q, np.log(inclusion[ids]), rtol=RTOL, atol=1e-5)
    # The first candidate (the Gumbel arg-max) is an exact draw from P.
    first = np.bincount(ids[:, 0], minlength=SAMPLER_V).astype(np.float64)
    assert chi_square(first, p) < chi_square_bound(SAMPLER_V - 1)
    # Empirical inclusion vs 1 - (1 - P(k))^n. The formula is an approximation for sampling
    # without replacement (off by up to ~2.5% on the top ids for V=50, K=10, measured with 4e5
    # NumPy draws), so allow 4% relative plus 4 standard deviations of sampling noise.
    empirical = np.bincount(ids.ravel(), minlength=SAMPLER_V) / DRAWS
    sigma = np.sqrt(inclusion * (1.0 - inclusion) / DRAWS)
    assert np.all(np.abs(empirical - inclusion) <= 0.04 * inclusion + 4.0 * sigma), np.max(
        np.abs(empirical - inclusion) / inclusion
    )
    # Rare ids together (k >= V/2): within 4% relative.
    tail = slice(SAMPLER_V // 2, None)
    np.testing.assert_allclose(empirical[tail].sum(), inclusion[tail].sum(), rtol=0.04)


# ----------------------------------------------------------------------------- sampled softmax


def test_sampled_softmax_nll_matches_numpy() -> None:
    w, b, h, targets = softmax_example()
    sampled = np.array([3, 0, 12, 3, 5, 19, 1], np.int32)  # accidental hits with targets 3, 0, 19; a repeat
    rng = np.random.default_rng(1)
    sampled_log_q = rng.normal(-1.0, 0.5, sampled.shape).astype(np.float32)
    target_log_q = rng.normal(-1.0, 0.5, targets.shape).astype(np.float32)
    args = (w, b, h, targets, sampled, sampled_log_q, target_log_q)
    nll = sampled_nll(*args)
    ref = np_sampled_nll(*f64(w, b, h), targets, sampled, *f64(sampled_log_q, target_log_q))
    assert nll.shape == (N,)
    np.testing.assert_allclose(nll, ref, rtol=RTOL, atol=ATOL)
    # Removing the hits matters here: keeping them would change the loss of the hit tokens.
    w64, b64, h64 = f64(w, b, h)
    kept = np.zeros(N)
    for n, t in enumerate(targets):
        true = h64[n] @ w64[t] + b64[t] - target_log_q[n]
        every = [h64[n] @ w64[s] + b64[s] - q for s, q in zip(sampled, sampled_log_q)]
        kept[n] = np_logsumexp(np.array([true] + every)) - true
    hit_rows = np.isin(targets, sampled)
    assert hit_rows.any() and (~hit_rows).any()
    assert np.all(np.abs(kept[hit_rows] - ref[hit_rows]) > 1e-3)


def test_sampled_softmax_all_hits_gives_zero_loss_and_finite_grads() -> None:
    w, b, h, _ = softmax_example()
    targets = np.full((N,), 4, np.int32)
    sampled = np.full((3,), 4, np.int32)
    args = [jnp.asarray(a) for a in (w, b, h, targets, sampled, np.zeros(3, np.float32), np.zeros(N, np.float32))]
    np.testing.assert_allclose(sampled_nll(*args), 0.0, atol=ATOL)
    def loss(w_: jax.Array, b_: jax.Array, h_: jax.Array) -> jax.Array:
        return jnp.sum(sampled_nll(w_, b_, h_, *args[3:]))

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*args[:3])
    for g in grads:
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, 0.0, atol=ATOL)


def test_sampled_softmax_gradients_match_analytic() -> None:
    """d/dh of -log softmax over the candidate logits = sum_c softmax_c w_c - w_true."""
    w, b, h, targets = softmax_example(2)
    sampled = np.array([3, 0, 12, 5, 19], np.int32)
    sampled_log_q = np.linspace(-2.0, -0.5, 5).astype(np.float32)
    target_log_q = np.full((N,), -1.0, np.float32)

    def loss(w_: jax.Array, b_: jax.Array, h_: jax.Array) -> jax.Array:
        return jnp.sum(sampled_nll(w_, b_, h_, targets, sampled, sampled_log_q, target_log_q))

    g_w, g_b, g_h = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(w, b, h)
    w64, b64, h64 = f64(w, b, h)
    ref_h, ref_w, ref_b = np.zeros_like(h64), np.zeros_like(w64), np.zeros_like(b64)
    for n, t in enumerate(targets):
        cand = [(t, float(target_log_q[n]))] + [(s, float(q)) for s, q in zip(sampled, sampled_log_q) if s != t]
        logits = np.array([h64[n] @ w64[c] + b64[c] - q for c, q in cand])
        probs = np.exp(logits - np_logsumexp(logits))
        probs[0] -= 1.0  # minus the one-hot of the true class
        for (c, _), coef in zip(cand, probs):
            ref_h[n] += coef * w64[c]
            ref_w[c] += coef * h64[n]
            ref_b[c] += coef
    np.testing.assert_allclose(g_h, ref_h, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g_w, ref_w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g_b, ref_b, rtol=RTOL, atol=ATOL)


def test_grouped_sampled_softmax_uses_each_groups_own_candidates() -> None:
    """Group g's tokens see only sampled[g]: the NumPy loss of each group with its candidates."""
    w, b, h, targets = softmax_example(3)
    sampled = np.array([[3, 0, 12, 5], [19, 1, 3, 8]], np.int32)  # [G=2, K=4]; hits in both groups
    rng = np.random.default_rng(4)
    sampled_log_q = rng.normal(-1.0, 0.5, sampled.shape).astype(np.float32)
    target_log_q = rng.normal(-1.0, 0.5, targets.shape).astype(np.float32)
    groups = lambda x: x.reshape(2, N // 2, *x.shape[1:])
    h, targets, target_log_q = groups(h), groups(targets), groups(target_log_q)
    nll = jax.jit(grouped_sampled_softmax_nll)(w, b, h, targets, sampled, sampled_log_q, target_log_q)
    assert nll.shape == (2, N // 2)
    for g in range(2):
        ref = np_sampled_nll(*f64(w, b, h[g]), targets[g], sampled[g], *f64(sampled_log_q[g], target_log_q[g]))
        np.testing.assert_allclose(nll[g], ref, rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- full softmax


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 20, 64])
def test_full_softmax_nll_matches_numpy(chunk_size: int) -> None:
    w, b, h, targets = softmax_example()
    nll = full_nll(w, b, h, targets, chunk_size)
    assert nll.shape == (N,)
    np.testing.assert_allclose(nll, np_full_nll(*f64(w, b, h), targets), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("chunk_size", [7])  # does not divide V (padded last chunk)
def test_full_softmax_gradients_match_analytic(chunk_size: int) -> None:
    """dL/dh = (softmax - onehot) W, dL/dW = (softmax - onehot)^T h, dL/db = sum(softmax - onehot)."""
    w, b, h, targets = softmax_example(3)

    def loss(w_: jax.Array, b_: jax.Array, h_: jax.Array) -> jax.Array:
        return jnp.sum(full_nll(w_, b_, h_, targets, chunk_size))

    g_w, g_b, g_h = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(w, b, h)
    for g in (g_w, g_b, g_h):
        assert np.all(np.isfinite(g))
    w64, b64, h64 = f64(w, b, h)
    logits = h64 @ w64.T + b64
    delta = np.exp(logits - np_logsumexp(logits)[:, None])
    delta[np.arange(N), targets] -= 1.0
    np.testing.assert_allclose(g_h, delta @ w64, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g_w, delta.T @ h64, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g_b, delta.sum(0), rtol=RTOL, atol=ATOL)


def test_full_softmax_equals_sampled_softmax_over_whole_vocabulary() -> None:
    """Sampling every other id once with zero corrections recovers the exact softmax."""
    w, b, h, targets = softmax_example(4)
    all_ids = np.arange(V, dtype=np.int32)
    zeros_k, zeros_n = np.zeros(V, np.float32), np.zeros(N, np.float32)
    sampled = sampled_nll(w, b, h, targets, all_ids, zeros_k, zeros_n)
    full = full_nll(w, b, h, targets, 7)
    np.testing.assert_allclose(sampled, full, rtol=RTOL, atol=ATOL)


def test_softmax_weights_shapes() -> None:
    shapes = jax.eval_shape(SoftmaxWeights(V, DIM).init, jax.random.key(0))["params"]
    assert shapes["W"].shape == (V, DIM) and shapes["b"].shape == (V,)
