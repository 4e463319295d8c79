"""decode_tree vs brute force: every head assignment of up to 6 words enumerated, the trees with one
root child kept, the decoder's tree checked to reach their best score; and validity, single-arc
optimality and the batch loop on larger inputs."""

from __future__ import annotations

import numpy as np
import pytest

from elmo_jax.tasks.tree_decoding import decode_tree, decode_trees, tree_score


def all_heads(n: int) -> np.ndarray:
    """Every head assignment of n words: `[(n + 1) ** n, n]`, values in 0..n."""
    return np.stack(np.meshgrid(*[np.arange(n + 1)] * n, indexing="ij"), axis=-1).reshape(-1, n)


def is_tree(heads: np.ndarray) -> np.ndarray:
    """heads `[..., n]` -> `[...]`: every word reaches 0 (no cycle, no self-loop)."""
    full = np.concatenate([np.zeros(heads.shape[:-1] + (1,), heads.dtype), heads], axis=-1)
    node = heads
    for _ in range(heads.shape[-1] - 1):
        node = np.take_along_axis(full, node, axis=-1)
    return (node == 0).all(axis=-1)


def one_root(heads: np.ndarray) -> np.ndarray:
    return (heads == 0).sum(axis=-1) == 1


def scores_of(scores: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Summed arc scores of head assignments `[N, n]` -> `[N]`."""
    n = heads.shape[-1]
    with np.errstate(invalid="ignore"):
        return scores[np.arange(1, n + 1), heads].sum(axis=-1)


def brute_force(scores: np.ndarray, require_one_root: bool = True) -> tuple[float, np.ndarray]:
    """(best score, its heads) over the trees (with one root child, unless told otherwise); -inf if none."""
    heads = all_heads(len(scores) - 1)
    keep = is_tree(heads) & (one_root(heads) if require_one_root else True)
    totals = np.where(keep, scores_of(scores, heads), -np.inf)
    best = int(np.argmax(totals))
    return totals[best], heads[best]


def random_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_normal((n + 1, n + 1)) * 3


def planted_cycle(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random scores with a high-scoring cycle over several words (a 2-cycle when n = 2)."""
    scores = random_scores(rng, n)
    members = rng.permutation(np.arange(1, n + 1))[: max(2, n - 1)]
    scores[members, np.roll(members, 1)] += 10.0
    return scores


def many_root_children(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random scores whose best tree without the constraint attaches several words to the root."""
    scores = random_scores(rng, n)
    scores[1:, 0] += 8.0
    return scores


def forbidden_arcs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random scores with about 40% of the arcs -inf."""
    scores = random_scores(rng, n)
    scores[rng.random(scores.shape) < 0.4] = -np.inf
    return scores


def check(scores: np.ndarray) -> None:
    best, _ = brute_force(scores)
    if best == -np.inf:
        with pytest.raises(ValueError):
            decode_tree(scores)
        return
    heads = decode_tree(scores)
    n = len(scores) - 1
    assert heads.shape == (n,) and heads.dtype.kind == "i"
    assert is_tree(heads) and one_root(heads), heads
    np.testing.assert_allclose(tree_score(scores, heads), best, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", range(1, 7))
def test_best_tree_with_one_root_child_on_random_scores(n):
    for seed in range(6):
        check(random_scores(np.random.default_rng([n, seed]), n))


@pytest.mark.parametrize("n", range(2, 7))
def test_planted_cycle_is_broken_at_the_best_arc(n):
    for seed in range(4):
        scores = planted_cycle(np.random.default_rng([n, seed, 1]), n)
        check(scores)


@pytest.mark.parametrize("n", range(2, 7))
def test_several_root_children_unconstrained(n):
    for seed in range(4):
        scores = many_root_children(np.random.default_rng([n, seed, 2]), n)
        _, unconstrained = brute_force(scores, require_one_root=False)
        assert (unconstrained == 0).sum() > 1  # The case this test is about.
        check(scores)


@pytest.mark.parametrize("n", range(1, 7))
def test_forbidden_arcs(n):
    raised = 0
    for seed in range(8):
        scores = forbidden_arcs(np.random.default_rng([n, seed, 3]), n)
        raised += brute_force(scores)[0] == -np.inf
        check(scores)
    assert raised < 8  # Most draws admit a tree.


def test_one_word():
    np.testing.assert_array_equal(decode_tree(np.array([[0.0, 0.0], [-5.0, 9.0]])), [0])
    with pytest.raises(ValueError):
        decode_tree(np.array([[0.0, 0.0], [-np.inf, 9.0]]))


def test_row_zero_and_diagonal_are_ignored():
    rng = np.random.default_rng(7)
    scores = random_scores(rng, 6)
    heads = decode_tree(scores)
    scores[0] = 1e6
    np.fill_diagonal(scores, 1e6)
    np.testing.assert_array_equal(decode_tree(scores), heads)


def test_only_trees_with_several_root_children():
    scores = np.full((4, 4), -np.inf)
    scores[1:, 0] = 0.0  # Every word can only attach to the root.
    with pytest.raises(ValueError, match="one word attached to the root"):
        decode_tree(scores)


def single_arc_changes(heads: np.ndarray):
    """Every heads array differing from `heads` in exactly one arc."""
    n = len(heads)
    for d in range(n):
        for h in range(n + 1):
            if h != heads[d] and h != d + 1:
                changed = heads.copy()
                changed[d] = h
                yield changed


@pytest.mark.parametrize("kind", [random_scores, planted_cycle, many_root_children])
def test_larger_sentences_give_trees_no_single_arc_change_improves(kind):
    for seed in range(3):
        scores = kind(np.random.default_rng([30, seed, 4]), 30)
        heads = decode_tree(scores)
        assert is_tree(heads) and one_root(heads)
        best = tree_score(scores, heads)
        for changed in single_arc_changes(heads):
            if is_tree(changed) and one_root(changed):
                assert tree_score(scores, changed) <= best + 1e-9


def test_batch_matches_each_sentence_and_pads_with_zeros():
    rng = np.random.default_rng(11)
    lengths = np.array([5, 1, 0, 7])
    scores = rng.standard_normal((4, 8, 8))
    heads = decode_trees(scores, lengths)
    assert heads.shape == (4, 7)
    for b, length in enumerate(lengths):
        if length:
            np.testing.assert_array_equal(heads[b, :length], decode_tree(scores[b, : length + 1, : length + 1]))
        assert (heads[b, length:] == 0).all()
