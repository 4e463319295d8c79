"""Context-independent token embeddings, computed once per distinct word and kept on the host
(`TokenEmbeddingCache`), or looked up by vocabulary id (`WordTokenEmbeddings`). Encoding trims each
word's padding but `widest filter` characters: all windows in it give the same convolution output."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.chars import CharIdCache, OwnInputs
from elmo_jax.data.vocab import Vocabulary

TOKEN_CHUNK = 256  # Words of every char-CNN call (the last of a trimmed length padded): one shape per length.
MIN_WORDS = 64  # The smallest padded count of words of a table (`bucket`).
CHAR_STEP = 16  # Trimmed character lengths are 16, 32, 64, ... (`bucket`), at most the model's.


def bucket(n: int, smallest: int) -> int:
    """The first of smallest x (1, 2, 4, 8, ...) that is >= n: each compiled shape (XLA's, a few
    seconds each on a GPU) serves sizes up to twice apart, so a corpus meets few of them."""
    return smallest << max(-(-n // smallest) - 1, 0).bit_length()


def needed_chars(char_ids: np.ndarray, widest_filter: int) -> np.ndarray:
    """Id rows `[N, C]` -> `[N]`: min(C, `bucket(length + widest filter, CHAR_STEP)`), a row's length
    being where its trailing run of one id (its padding) starts.

    Exact for a max over the char CNN's windows: every window inside the trailing run reads the same
    ids, so the first one, kept, stands for the rest. Rows of bilm-tf's char ids (`[<bow> chars <eow>
    pad...]`) and of ELMoForManyLangs' (`[word id, <bow> chars <eow> pad...]`, the word id read apart)
    both end in such a run.
    """
    n_ids = char_ids.shape[1]
    differs = char_ids != char_ids[:, -1:]
    lengths = np.where(differs.any(axis=1), n_ids - np.argmax(differs[:, ::-1], axis=1), 0)
    buckets = np.fromiter((bucket(int(n), CHAR_STEP) for n in lengths + widest_filter), np.int64, len(lengths))
    return np.minimum(n_ids, buckets)


class TokenEmbeddingCache:
    """Word -> token embedding `[P]` float32 from `encode(char_ids [N, C']) -> [N, P]`, for up to
    `capacity` words (later ones are encoded each time) and the words given to `add`. by_length:
    `encode` per group of one trimmed length, in calls of TOKEN_CHUNK words (few shapes to compile); False:
    once, untrimmed (an encoder that skips padding itself: the CPU kernel). `characters`: what the
    words are spelled with (`PretrainedBiLM.characters`: a character vocabulary, a biLM's own inputs
    giving id rows `[N, C']`, trimmed alike, or None: bytes).
    """

    def __init__(
        self, encode: Callable[[np.ndarray], np.ndarray], dim: int, max_chars: int, widest_filter: int,
        capacity: int = 100_000, by_length: bool = True, characters: CharVocabulary | OwnInputs | None = None,
    ):
        if capacity < 0:
            raise ValueError(f"token cache capacity must be >= 0, got {capacity}")
        self._encode = encode
        self._chars = CharIdCache(max_chars, characters=characters)
        self._widest_filter = widest_filter
        self._by_length = by_length
        self._limit = capacity  # Words held at most: capacity + the vocabulary given to `add`.
        self._index: dict[str, int] = {}
        self._table = np.zeros((0, dim), np.float32)

    def __len__(self) -> int:
        return len(self._index)

    def encode(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings `[len(words), P]` of `words` through the char CNN (no cache)."""
        char_ids = self._chars.encode(list(words))
        if not self._by_length:
            return np.asarray(self._encode(char_ids), np.float32)
        needed = needed_chars(char_ids, self._widest_filter)
        out = np.zeros((len(words), self._table.shape[1]), np.float32)
        for n_chars in np.unique(needed):
            group = np.flatnonzero(needed == n_chars)
            for start in range(0, len(group), TOKEN_CHUNK):
                part = group[start : start + TOKEN_CHUNK]
                padded = np.zeros((TOKEN_CHUNK, n_chars), np.int32)  # Zero rows: no token.
                padded[: len(part)] = char_ids[part, :n_chars]
                out[part] = np.asarray(self._encode(padded))[: len(part)]
        return out

    def add(self, words: Sequence[str]) -> None:
        """Encodes and holds `words` beyond the capacity (the `vocab_to_cache` vocabulary)."""
        new = [w for w in dict.fromkeys(words) if w not in self._index]
        self._limit += len(new)
        self._store(new)

    def lookup(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings `[len(words), P]`; new words are encoded and held while there is room."""
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
    """Word -> token embedding `[P]` of a word-input biLM, `embed(token_ids [N]) -> [N, P]` of its
    `vocab` id (`<UNK>`'s outside it): `TokenEmbeddingCache`'s `encode`/`lookup`, holding nothing."""

    def __init__(self, embed: Callable[[np.ndarray], np.ndarray], vocab: Vocabulary):
        self._embed = embed
        self.vocab = vocab

    def encode(self, words: Sequence[str]) -> np.ndarray:
        """Token embeddings of `words`, `[len(words), P]`."""
        ids = np.zeros(bucket(len(words), MIN_WORDS), np.int32)
        ids[: len(words)] = self.vocab.encode(words)
        return np.asarray(self._embed(ids))[: len(words)]

    lookup = encode
