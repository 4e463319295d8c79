"""Maximum spanning tree decoding of a graph-based dependency parser (Dozat & Manning 2017): the
highest-scoring tree of a sentence's arc scores by Chu-Liu-Edmonds, with exactly one word attached
to the root (the CoNLL 2018 / UD rule), in NumPy on the host, one sentence at a time.
Written here: ufal.chu_liu_edmonds is GPLv3 (this project is Apache-2.0) and allows several root children.

One root child, exactly, in one Chu-Liu-Edmonds run (Gabow & Tarjan 1984; Zmigrod et al. 2020, "Please
Mind the Root"): every root arc is lowered by more than the score difference of any two trees, so the
maximum spanning tree has the fewest root children (one, when a tree with one exists) and is the best
tree among those. Exact up to float64 rounding: trees closer in score than ~1e-16 x the penalty may tie.
"""

from __future__ import annotations

import numpy as np


def decode_tree(scores: np.ndarray) -> np.ndarray:
    """The best tree with one root child of arc scores `[words + 1, words + 1]`: `scores[d, h]` scores
    word h (0: the artificial root) as the head of word d; row 0 and the diagonal are ignored; -inf
    forbids an arc. -> heads `[words]` (of words 1..n, values in 0..n). Raises ValueError if no tree
    with one root child exists."""
    scores = np.asarray(scores, np.float64)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or scores.shape[0] < 2:
        raise ValueError(f"scores must be [words + 1, words + 1] with words >= 1, got shape {scores.shape}")
    arcs = scores[1:].copy()  # [words, words + 1]: the arcs into words 1..n.
    words = np.arange(len(arcs))
    arcs[words, words + 1] = -np.inf
    finite = np.isfinite(arcs)
    if not finite.any(axis=1).all():
        raise ValueError("the scores admit no tree (some word has no possible head)")
    # Each word's best arc at 0 (a word's arcs shifted alike leave the best tree as it is), so that the
    # penalty exceeds the spread of any tree's score: the sum over the words of their arcs' ranges.
    arcs -= np.max(arcs, axis=1, keepdims=True)
    arcs[:, 0] -= 1.0 + np.sum(-np.min(np.where(finite, arcs, 0.0), axis=1))
    heads = _max_spanning_tree(np.concatenate([np.zeros((1, len(scores))), arcs]))
    if heads is None:
        raise ValueError("the scores admit no tree (some word has no finite path from the root)")
    if np.count_nonzero(heads[1:] == 0) != 1:
        raise ValueError("the scores admit no tree with exactly one word attached to the root")
    return heads[1:]


def decode_trees(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`decode_tree` of each sentence of a batch: scores `[batch, time + 1, time + 1]` (sentence b in
    `[:lengths[b] + 1, :lengths[b] + 1]`), lengths `[batch]` (words, without the root) -> heads
    `[batch, time]` (0 beyond each length)."""
    scores = np.asarray(scores)
    heads = np.zeros((scores.shape[0], scores.shape[1] - 1), np.int64)
    for b, length in enumerate(np.asarray(lengths)):
        if length > 0:
            heads[b, :length] = decode_tree(scores[b, : length + 1, : length + 1])
    return heads


def tree_score(scores: np.ndarray, heads: np.ndarray) -> float:
    """The summed arc scores `scores[d, heads[d - 1]]` of words d = 1..n: scores `[words + 1, words + 1]`,
    heads `[words]`."""
    return float(scores[np.arange(1, len(heads) + 1), heads].sum())


def _max_spanning_tree(scores: np.ndarray) -> np.ndarray | None:
    """Chu-Liu-Edmonds on scores `[m + 1, m + 1]` (node 0 the root; row 0 and the diagonal ignored)
    -> heads `[m + 1]` (heads[0] = 0, a placeholder), or None when no tree of finite score exists.
    Each cycle of the greedy heads is contracted into one node and the smaller graph solved in turn."""
    scores = scores.copy()
    np.fill_diagonal(scores, -np.inf)
    scores[0] = -np.inf
    heads = scores.argmax(axis=1)
    heads[0] = 0
    nodes = np.arange(1, len(scores))
    if not np.isfinite(scores[nodes, heads[1:]]).all():
        return None
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    rest = np.setdiff1d(np.arange(len(scores)), cycle)  # Starts with the root, never in a cycle.
    k = len(rest)  # The contracted cycle is node k of the smaller graph.
    # Entering the cycle at d from h outside: the arc h -> d replaces d's cycle arc.
    entering = scores[np.ix_(cycle, rest)] - scores[cycle, heads[cycle]][:, None]  # [cycle, k]
    entered_at = entering.argmax(axis=0)  # [k]
    leaving_from = scores[np.ix_(rest, cycle)].argmax(axis=1)  # [k]: the best head in the cycle of each node outside.
    contracted = np.full((k + 1, k + 1), -np.inf)
    contracted[:k, :k] = scores[np.ix_(rest, rest)]
    contracted[k, :k] = entering[entered_at, np.arange(k)]
    contracted[:k, k] = scores[rest, cycle[leaving_from]]
    inner = _max_spanning_tree(contracted)
    if inner is None:
        return None
    for i in range(1, k):
        heads[rest[i]] = cycle[leaving_from[i]] if inner[i] == k else rest[inner[i]]
    heads[cycle[entered_at[inner[k]]]] = rest[inner[k]]
    return heads


def _find_cycle(heads: np.ndarray) -> np.ndarray | None:
    """The nodes of a cycle of heads `[m + 1]` (heads[0] ignored), or None if every node reaches 0."""
    state = np.zeros(len(heads), np.int8)  # 0: unvisited, 1: on the current path, 2: reaches the root.
    state[0] = 2
    for start in range(1, len(heads)):
        path = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node]
        if state[node] == 1:
            return np.array(path[path.index(node) :])
        state[path] = 2
    return None
