"""The biaffine scorers and losses vs NumPy loops over their formulas (Dozat & Manning 2017, eq. 3-7),
on random params read from each module's own variables."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.tasks import biaffine
from elmo_jax.tasks.biaffine import BiaffineArcScorer, BiaffineLabelScorer

# Compiled once for all tests (op by op, each op would compile on its own).
arc_loss, label_loss = jax.jit(biaffine.arc_loss), jax.jit(biaffine.label_loss)

BATCH, POSITIONS, DIM = 2, 5, 6  # POSITIONS = time + 1 (position 0: the root).
LENGTHS = np.array([4, 2])  # Words per sentence, without the root.


def real_words() -> np.ndarray:
    """mask `[BATCH, POSITIONS]`: True at positions 1..length."""
    positions = np.arange(POSITIONS)
    return (positions >= 1) & (positions <= LENGTHS[:, None])


def encoded(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((BATCH, POSITIONS, DIM)).astype(np.float32)


def random_params(module, *args, seed: int = 1) -> dict:
    """The module's params (init's tree, shapes and names), each leaf drawn at random (the biaffine
    weights start at zero, which would test nothing)."""
    params = module.init(jax.random.key(0), *args)["params"]
    leaves, tree = jax.tree.flatten(params)
    rng = np.random.default_rng(seed)
    return jax.tree.unflatten(tree, [rng.standard_normal(leaf.shape).astype(np.float32) * 0.7 for leaf in leaves])


def np_mlp(x: np.ndarray, dense: dict) -> np.ndarray:
    hidden = x.astype(np.float64) @ np.asarray(dense["kernel"], np.float64) + np.asarray(dense["bias"], np.float64)
    return np.where(hidden > 0, hidden, 0.1 * hidden)


def np_mlps(x: np.ndarray, params: dict) -> tuple[np.ndarray, np.ndarray]:
    return np_mlp(x, params["dep_mlp"]["Dense_0"]), np_mlp(x, params["head_mlp"]["Dense_0"])


def np_label_scores_all_heads(x: np.ndarray, params: dict) -> np.ndarray:
    """`[batch, d, h, labels]`: every (dependent, head) pair's label scores, by loops."""
    dep, head = np_mlps(x, params)
    weight, linear, bias = (np.asarray(params[name], np.float64) for name in ("weight", "linear", "bias"))
    out = np.zeros((BATCH, POSITIONS, POSITIONS, len(bias)))
    for b in range(BATCH):
        for d in range(POSITIONS):
            for h in range(POSITIONS):
                for label in range(len(bias)):
                    pair = np.concatenate([dep[b, d], head[b, h]])
                    out[b, d, h, label] = dep[b, d] @ weight[label] @ head[b, h] + pair @ linear[:, label] + bias[label]
    return out


def test_params_and_zero_initial_scores():
    x = encoded()
    arc = BiaffineArcScorer(arc_dim=4)
    params = arc.init(jax.random.key(0), x)["params"]
    assert params["weight"].shape == (4, 4) and params["head_bias"].shape == (4,)
    assert params["dep_mlp"]["Dense_0"]["kernel"].shape == (DIM, 4)
    np.testing.assert_array_equal(arc.apply({"params": params}, x), np.zeros((BATCH, POSITIONS, POSITIONS)))
    label = BiaffineLabelScorer(label_dim=3, num_labels=7)
    heads = np.zeros((BATCH, POSITIONS), np.int32)
    params = label.init(jax.random.key(0), x, heads)["params"]
    assert params["weight"].shape == (7, 3, 3) and params["linear"].shape == (6, 7) and params["bias"].shape == (7,)
    np.testing.assert_array_equal(label.apply({"params": params}, x, heads), np.zeros((BATCH, POSITIONS, 7)))


def test_arc_scores_match_the_formula():
    x = encoded()
    arc = BiaffineArcScorer(arc_dim=4)
    params = random_params(arc, x)
    scores = np.asarray(jax.jit(arc.apply)({"params": params}, x))
    dep, head = np_mlps(x, params)
    weight, head_bias = np.asarray(params["weight"], np.float64), np.asarray(params["head_bias"], np.float64)
    expected = np.zeros((BATCH, POSITIONS, POSITIONS))
    for b in range(BATCH):
        for d in range(POSITIONS):
            for h in range(POSITIONS):
                expected[b, d, h] = dep[b, d] @ weight @ head[b, h] + head[b, h] @ head_bias
    assert scores.shape == (BATCH, POSITIONS, POSITIONS)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


def test_label_scores_gather_the_heads_of_the_full_computation():
    x = encoded()
    heads = np.array([[0, 2, 0, 2, 3], [0, 0, 1, 0, 0]], np.int32)
    label = BiaffineLabelScorer(label_dim=3, num_labels=4)
    params = random_params(label, x, heads)
    scores = np.asarray(jax.jit(label.apply)({"params": params}, x, heads))
    full = np_label_scores_all_heads(x, params)
    assert scores.shape == (BATCH, POSITIONS, 4)
    np.testing.assert_allclose(scores, np.take_along_axis(full, heads[:, :, None, None], axis=2)[:, :, 0], rtol=1e-5, atol=1e-5)


def test_dropout_only_when_not_deterministic():
    x = encoded()
    for module, args in [
        (BiaffineArcScorer(arc_dim=4, dropout=0.5), (x,)),
        (BiaffineLabelScorer(label_dim=3, num_labels=4, dropout=0.5), (x, np.zeros((BATCH, POSITIONS), np.int32))),
    ]:
        params = random_params(module, *args)
        plain = module.clone(dropout=0.0)
        np.testing.assert_allclose(module.apply({"params": params}, *args), plain.apply({"params": params}, *args), rtol=1e-6)
        first, second = (
            module.apply({"params": params}, *args, deterministic=False, rngs={"dropout": jax.random.key(seed)})
            for seed in (0, 1)
        )
        assert not np.allclose(first, second)


def np_masked_cross_entropy(logits: np.ndarray, gold: np.ndarray, mask: np.ndarray, candidates) -> float:
    """Mean over the masked (b, d) of -log softmax over `candidates(b, d)` (a list of classes) at the gold."""
    losses = []
    for b, d in zip(*np.nonzero(mask)):
        allowed = candidates(b, d)
        row = logits[b, d, allowed].astype(np.float64)
        log_z = np.log(np.sum(np.exp(row - row.max()))) + row.max()
        losses.append(log_z - logits[b, d, gold[b, d]])
    return float(np.mean(losses))


def arc_candidates(b: int, d: int) -> list[int]:
    """The root and the real words of sentence b, but d."""
    return [h for h in range(LENGTHS[b] + 1) if h != d]


def arc_case(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((BATCH, POSITIONS, POSITIONS)).astype(np.float32) * 2
    gold = np.array([[-1, 2, 0, 2, 3], [-1, 0, 1, -1, -1]], np.int32)  # -1 at position 0 and padding.
    return scores, gold, real_words()


def test_arc_loss_matches_numpy():
    scores, gold, mask = arc_case()
    expected = np_masked_cross_entropy(scores, gold, mask, arc_candidates)
    np.testing.assert_allclose(arc_loss(scores, gold, mask), expected, rtol=1e-5)


def test_arc_loss_ignores_padded_heads_the_diagonal_and_padded_words():
    scores, gold, mask = arc_case()
    loss = arc_loss(scores, gold, mask)
    changed = scores.copy()
    changed[1, :, 3:] = 50.0  # Head columns beyond sentence 1's 2 words.
    changed[:, np.arange(POSITIONS), np.arange(POSITIONS)] = 50.0  # Each word its own head.
    changed[1, 3:] = -7.0  # The rows of padding.
    changed[:, 0] = 9.0  # The root's row.
    np.testing.assert_allclose(arc_loss(changed, gold, mask), loss, rtol=1e-6)
    changed[1, 1, 2] += 1.0  # A real candidate: the loss moves.
    assert abs(float(arc_loss(changed, gold, mask)) - float(loss)) > 1e-3


def test_arc_loss_gradient_is_softmax_minus_onehot_over_the_count():
    scores, gold, mask = arc_case()
    grad = np.asarray(jax.jit(jax.grad(biaffine.arc_loss))(scores, gold, mask))
    expected = np.zeros_like(scores, dtype=np.float64)
    for b, d in zip(*np.nonzero(mask)):
        allowed = arc_candidates(b, d)
        row = np.exp(scores[b, d, allowed] - scores[b, d, allowed].max())
        expected[b, d, allowed] = row / row.sum()
        expected[b, d, gold[b, d]] -= 1.0
    expected /= mask.sum()
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


def test_label_loss_matches_numpy_and_its_gradient():
    rng = np.random.default_rng(4)
    scores = rng.standard_normal((BATCH, POSITIONS, 3)).astype(np.float32) * 2
    gold = np.array([[-1, 2, 0, 1, 1], [-1, 0, 2, -1, -1]], np.int32)
    mask = real_words()
    all_labels = lambda b, d: [0, 1, 2]
    np.testing.assert_allclose(label_loss(scores, gold, mask), np_masked_cross_entropy(scores, gold, mask, all_labels), rtol=1e-5)
    grad = np.asarray(jax.jit(jax.grad(biaffine.label_loss))(scores, gold, mask))
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    expected = (probs - np.eye(3)[np.maximum(gold, 0)]) * mask[..., None] / mask.sum()
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loss", [arc_loss, label_loss])
def test_no_real_word_gives_zero(loss):
    scores = jnp.ones((1, 3, 3))
    assert float(loss(scores, jnp.zeros((1, 3), jnp.int32), jnp.zeros((1, 3), bool))) == 0.0
