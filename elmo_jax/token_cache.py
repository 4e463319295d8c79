"""Context-independent token embeddings, computed once per distinct word and kept on the host
(char-CNN biLMs), or looked up by vocabulary id (word-input biLMs: `WordTokenEmbeddings`).

A token embedding depends on the word alone, so an embedder can send each distinct word through
the char CNN once and reuse the result for every later occurrence (exact). The cache holds up to
`capacity` words (words beyond it are encoded each time they appear); a vocabulary given up front
(`vocab_to_cache`) is always held.

Encoding trims the character axis: every character window that lies wholly in the padding after
a word gives the same convolution output, so the char CNN over the first `longest word + widest
filter` characters (rounded up to a multiple of 8) has the same max over positions as over all
`max_chars`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from elmo_jax.data.chars import ID_SHIFT, PAD_CHAR, CharIdCache
from elmo_jax.data.vocab import Vocabulary

TOKEN_CHUNK = 4096  # Words per char-CNN call.
MIN_WORDS = 64  # The smallest padded count of words per char-CNN call.
CHAR_STEP = 8  # Trimmed character lengths are multiples of this (few shapes to compile).


def padded_count(n: int, smallest: int) -> int:
    """The first of smallest x (1, 1.5, 2, 3, 4, 6, 8, ...) that is >= n: few shapes, < 50% padding."""
    size = smallest
    while size < n:
        size += max(size // 2 if size & (size - 1) == 0 else size // 3, 1)
    return size


def trimmed_char_ids(char_ids: np.ndarray, widest_filter: int) -> np.ndarray:
    """char_ids `[N, C]` cut to `[N, C']`, C' = min(C, longest word + widest filter, rounded up to 8).

    Each word keeps its characters and at least one all-padding window per filter width (when it
    had one), so each filter's max over positions is unchanged.
    """
    n_chars = char_ids.shape[1]
    longest = int((char_ids != PAD_CHAR + ID_SHIFT).sum(axis=1).max(initial=0))
    keep = -(-(longest + widest_filter) // CHAR_STEP) * CHAR_STEP
    return char_ids[:, : min(n_chars, keep)]


class TokenEmbeddingCache:
    """Word -> token embedding `[P]` float32, from `encode(char_ids [N, C']) -> [N, P]`."""

    def __init__(
        self,
        encode: Callable[[np.ndarray], np.ndarray],
        dim: int,
        max_chars: int,
        widest_filter: int,
        capacity: int = 100_000,
    ):
        if capacity < 0:
            raise ValueError(f"token cache capacity must be >= 0, got {capacity}")
        self._encode = encode
        self._chars = CharIdCache(max_chars)
        self._widest_filter = widest_filter
        self._limit = capacity  # Words held at most: capacity + the vocabulary given to `add`.
        self._index: dict[str, int] = {}
        self._table = np.zeros((0, dim), np.float32)

    def __len__(self) -> int:
        return len(self._index)

    def encode(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings of `words` through the char CNN (no cache), `[len(words), P]`."""
        out = [self._table[:0]]
        for start in range(0, len(words), TOKEN_CHUNK):
            part = list(words[start : start + TOKEN_CHUNK])
            trimmed = trimmed_char_ids(self._chars.encode(part), self._widest_filter)
            # The padding rows (all zeros: no token) come after the trimming, which they would defeat.
            char_ids = np.zeros((padded_count(len(part), MIN_WORDS), trimmed.shape[1]), np.int32)
            char_ids[: len(part)] = trimmed
            out.append(np.asarray(self._encode(char_ids))[: len(part)])
        return np.concatenate(out)

    def add(self, words: Sequence[str]) -> None:
        """Encodes and holds `words` beyond the capacity (the `vocab_to_cache` vocabulary)."""
        new = [w for w in dict.fromkeys(words) if w not in self._index]
        self._limit += len(new)
        self._store(new)

    def lookup(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings of `words`, `[len(words), P]`; words met for the first time are encoded
        once and held while there is room."""
        new = [w for w in dict.fromkeys(words) if w not in self._index]
        room = max(self._limit - len(self._index), 0)
        self._store(new[:room])
        rows = np.fromiter((self._index.get(w, -1) for w in words), np.int64, len(words))
        if len(self._table):
            out = self._table[np.maximum(rows, 0)]
        else:
            out = np.zeros((len(words), self._table.shape[1]), np.float32)
        if new[room:]:
            unheld = dict(zip(new[room:], self.encode(new[room:])))
            for i in np.flatnonzero(rows < 0):
                out[i] = unheld[words[i]]
        return out

    def _store(self, words: list[str]) -> None:
        """Appends the embeddings of `words` (none held yet) to the table, growing it geometrically."""
        if not words:
            return
        embeddings = self.encode(words)
        start, needed = len(self._index), len(self._index) + len(words)
        if needed > len(self._table):
            grown = np.zeros((max(needed, min(2 * len(self._table), self._limit)), self._table.shape[1]), np.float32)
            grown[:start] = self._table[:start]
            self._table = grown
        self._table[start:needed] = embeddings
        self._index.update((w, start + i) for i, w in enumerate(words))


class WordTokenEmbeddings:
    """Word -> token embedding `[P]` of a word-input biLM: the row of the word's id in `vocab`
    (`<UNK>`'s for a word outside it, as in training), from `embed(token_ids [N]) -> [N, P]`.

    The same `encode`/`lookup` as `TokenEmbeddingCache`; nothing is held on the host (a lookup
    costs no more than reading a cache), and ids are padded to `padded_count` (few shapes).
    """

    def __init__(self, embed: Callable[[np.ndarray], np.ndarray], vocab: Vocabulary):
        self._embed = embed
        self.vocab = vocab

    def encode(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings of `words`, `[len(words), P]`."""
        ids = np.zeros(padded_count(len(words), MIN_WORDS), np.int32)
        ids[: len(words)] = self.vocab.encode(words)
        return np.asarray(self._embed(ids))[: len(words)]

    lookup = encode
