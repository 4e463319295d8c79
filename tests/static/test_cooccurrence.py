"""Co-occurrence counts against a plain-Python count of the same definition."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.static.cooccurrence import cooccurrence_counts

SENTENCES = [
    "the cat sat on the mat".split(),
    "the cat saw the dog and the dog saw the cat".split(),
    "a dog".split(),
    "mat".split(),
    [],
    "on on on the zebra mat".split(),  # A word repeated within the window; "zebra" is not in the vocabulary.
    "the cat sat on the mat".split(),
]


def _reference(sentences: list[list[str]], vocab: Vocabulary, window: int) -> dict[tuple[int, int], float]:
    """Per distance, the pairs counted one by one in both orders; a cell's value sum_d count_d / d in
    the order of d (what makes it exact to compare)."""
    by_distance = [collections.Counter() for _ in range(window + 1)]
    for sentence in sentences:
        ids = [vocab.word_to_id(w) for w in sentence]
        for i in range(len(ids)):
            for j in range(i + 1, min(i + window, len(ids) - 1) + 1):
                by_distance[j - i][ids[i], ids[j]] += 1
                by_distance[j - i][ids[j], ids[i]] += 1
    cells = set().union(*by_distance)
    values = {}
    for cell in cells:
        value = 0.0
        for d in range(1, window + 1):
            if by_distance[d][cell]:
                value += by_distance[d][cell] / d
        values[cell] = value
    return values


@pytest.mark.parametrize("window", [1, 2, 3])
def test_counts_equal_the_plain_python_reference_exactly(window: int) -> None:
    vocab = Vocabulary.build([s for s in SENTENCES if "zebra" not in s] + [["on", "the", "mat"]])
    cooc = cooccurrence_counts(SENTENCES, vocab, window)
    expected = _reference(SENTENCES, vocab, window)
    assert dict(zip(zip(cooc.rows.tolist(), cooc.cols.tolist()), cooc.values.tolist())) == expected
    assert cooc.rows.dtype == cooc.cols.dtype == np.int32 and cooc.values.dtype == np.float64
    keys = cooc.rows.astype(np.int64) * cooc.n_words + cooc.cols
    assert np.all(np.diff(keys) > 0) and np.all(cooc.values > 0)  # Sorted by (row, col), one entry a cell.
    assert cooc.n_words == len(vocab) and cooc.tokens == sum(map(len, SENTENCES))
    dense = cooc.dense()
    np.testing.assert_array_equal(dense, dense.T)
    assert dense[vocab.word_to_id("<UNK>")].sum() > 0  # "zebra" counted as <UNK>.


def test_a_small_case_by_hand() -> None:
    """a b a, window 2: a-b at distance 1 twice (both orders), a-a at distance 2 from both sides."""
    vocab = Vocabulary.build([["a", "b"]])
    a, b = vocab.word_to_id("a"), vocab.word_to_id("b")
    dense = cooccurrence_counts([["a", "b", "a"]], vocab, 2).dense()
    assert dense[a, b] == dense[b, a] == 2.0 and dense[a, a] == 1.0 and dense[b, b] == 0.0
    assert dense.sum() == 5.0


def test_windows_stop_at_sentence_ends() -> None:
    vocab = Vocabulary.build([["x", "y"]])
    cooc = cooccurrence_counts([["x"], ["y"]], vocab, 5)
    assert len(cooc.values) == 0 and cooc.tokens == 2


def test_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="window must be at least 1, not 0"):
        cooccurrence_counts(SENTENCES, Vocabulary.build(SENTENCES), 0)
