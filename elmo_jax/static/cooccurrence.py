"""GloVe's co-occurrence counts of a corpus: X[i, j] sums 1/d over every occurrence of word j at
distance d <= `window` to the left or right of word i, within a sentence.

Words are ids of an `elmo_jax.data.vocab.Vocabulary`, so the biLM's rules apply: a word outside
the vocabulary counts as `<UNK>`, and `<S>`/`</S>` are not added to the sentences (their rows stay
empty). Windows stop at sentence ends, as GloVe's reference `cooccur` stops them at line ends (one
sentence a line in PTB and the text corpora). The matrix is symmetric; a word repeated within the
window counts on the diagonal from both sides (2/d a pair), as the reference's symmetric count does.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

from elmo_jax.data.vocab import Vocabulary


@dataclasses.dataclass(frozen=True)
class Cooccurrence:
    """A sparse `[n_words, n_words]` matrix in COO form, entries sorted by (row, col), no zeros.

    rows, cols: `[nnz]` int32 word ids; values: `[nnz]` float64; tokens: the words counted.
    """

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    n_words: int
    tokens: int

    def dense(self) -> np.ndarray:
        """The matrix as a dense `[n_words, n_words]` float64 array (small vocabularies only)."""
        matrix = np.zeros((self.n_words, self.n_words))
        matrix[self.rows, self.cols] = self.values
        return matrix


def _encoded(sentences: Iterable[Sequence[str]], vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """All sentences' word ids end to end, `[tokens]` int64, and each token's sentence index."""
    ids, lengths = [], []
    for sentence in sentences:
        ids.append(vocab.encode(sentence))
        lengths.append(len(sentence))
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(ids).astype(np.int64), np.repeat(np.arange(len(lengths)), lengths)


def cooccurrence_counts(sentences: Iterable[Sequence[str]], vocab: Vocabulary, window: int) -> Cooccurrence:
    """X of `sentences` (lists of words) with a symmetric window of `window` words on each side.

    Vectorized per distance d: the pairs of tokens d apart in one sentence, both orders, counted
    per cell with np.unique. Each cell's value is then sum_d count_d / d, added in the order of d,
    so it does not depend on the order of the sentences.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    ids, sentence_of = _encoded(sentences, vocab)
    n_words = len(vocab)
    keys, weights = [], []
    for d in range(1, window + 1):
        same = sentence_of[:-d] == sentence_of[d:]
        left, right = ids[:-d][same], ids[d:][same]
        cells, counts = np.unique(np.concatenate([left * n_words + right, right * n_words + left]), return_counts=True)
        keys.append(cells)
        weights.append(counts / d)
    cells, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    values = np.bincount(inverse, weights=np.concatenate(weights), minlength=len(cells))  # Summed in the order of d.
    return Cooccurrence(
        rows=(cells // n_words).astype(np.int32),
        cols=(cells % n_words).astype(np.int32),
        values=values,
        n_words=n_words,
        tokens=len(ids),
    )
