"""Word -> character ids, compatible with bilm-tf and AllenNLP.

A word is encoded as `[bow, utf8_bytes[:max_chars - 2]..., eow, pad...]`; `<S>` and `</S>` use
the reserved begin/end-of-sentence characters. Every id is shifted by +1 so that 0 means "no
token" (the padding row of the character embedding).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
N_CHARACTERS = 262  # 261 bilm-tf characters + the "no token" row 0.
ID_SHIFT = 1

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
UNK_TOKEN = "<UNK>"


def _special(char: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int32)
    ids[0], ids[1], ids[2] = BOW_CHAR, char, EOW_CHAR
    return ids + ID_SHIFT


def word_to_char_ids(word: str, max_chars: int = 50) -> np.ndarray:
    """Returns the +1-shifted character ids of one word, `[max_chars]` int32.

    UTF-8 bytes beyond `max_chars - 2` are truncated (as bilm-tf). Characters that cannot be
    encoded (lone surrogates) are dropped, as bilm-tf and AllenNLP do.
    """
    if max_chars < 3:
        raise ValueError(f"max_chars must be >= 3, got {max_chars}")
    if word == BOS_TOKEN:
        return _special(BOS_CHAR, max_chars)
    if word == EOS_TOKEN:
        return _special(EOS_CHAR, max_chars)
    data = word.encode("utf-8", errors="ignore")[: max_chars - 2]
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int32)
    ids[0] = BOW_CHAR
    ids[1 : 1 + len(data)] = np.frombuffer(data, dtype=np.uint8)
    ids[1 + len(data)] = EOW_CHAR
    return ids + ID_SHIFT


class CharIdCache:
    """Memoised `word_to_char_ids` (corpora repeat words; encoding each occurrence is slow)."""

    def __init__(self, max_chars: int = 50, max_entries: int = 2_000_000):
        self.max_chars = max_chars
        self.max_entries = max_entries
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, word: str) -> np.ndarray:
        ids = self._cache.get(word)
        if ids is None:
            ids = word_to_char_ids(word, self.max_chars)
            if len(self._cache) < self.max_entries:
                self._cache[word] = ids
        return ids

    def encode(self, words: list[str]) -> np.ndarray:
        """Character ids of a word sequence, `[len(words), max_chars]` int32."""
        if not words:
            return np.zeros((0, self.max_chars), dtype=np.int32)
        return np.stack([self(w) for w in words])


class CharIdTable:
    """Character ids as rows of tables, so that a whole batch's char ids are one gather.

    Row 0 is "no token" (all zeros, for padding). Row `id + 1` holds vocabulary word `id`,
    encoded on first use. Words outside the vocabulary (which map to `<UNK>` but keep their own
    characters) get rows after those, memoised in a dict; `forget_other_words()` empties it, and
    `other_words_full` says when it holds `max_other_words`, so memory stays bounded on corpora
    with endless rare words. Rows are stored as uint16; the vocabulary table is allocated zeroed,
    so its memory becomes resident only as words are seen.
    """

    def __init__(self, vocab_words: Sequence[str], unk_id: int, max_chars: int = 50, max_other_words: int = 200_000):
        self.max_chars = max_chars
        self.max_other_words = max_other_words
        self._vocab_words = vocab_words
        self._unk_id = unk_id
        self._unk_word = vocab_words[unk_id]
        self._vocab = np.zeros((len(vocab_words) + 1, max_chars), np.uint16)
        self._filled = np.zeros(len(vocab_words) + 1, bool)
        self._filled[0] = True
        self._other_index: dict[str, int] = {}
        self._other = np.zeros((1024, max_chars), np.uint16)

    @property
    def other_words_full(self) -> bool:
        return len(self._other_index) >= self.max_other_words

    def forget_other_words(self) -> None:
        """Frees the rows of out-of-vocabulary words; rows returned earlier for them become invalid."""
        self._other_index.clear()

    def rows(self, words: Sequence[str], word_ids: np.ndarray) -> np.ndarray:
        """Table rows of `words` (whose vocabulary ids are `word_ids`), `[n]` int32."""
        rows = word_ids + 1
        new = rows[~self._filled[rows]]
        for row in np.unique(new):
            self._vocab[row] = word_to_char_ids(self._vocab_words[row - 1], self.max_chars)
        self._filled[new] = True
        for i in np.flatnonzero(word_ids == self._unk_id):
            word = words[i]
            if word != self._unk_word:
                rows[i] = self._other_row(word)
        return rows

    def _other_row(self, word: str) -> int:
        index = self._other_index.get(word)
        if index is None:
            index = len(self._other_index)
            if index == len(self._other):
                self._other = np.concatenate([self._other, np.zeros_like(self._other)])
            self._other[index] = word_to_char_ids(word, self.max_chars)
            self._other_index[word] = index
        return len(self._vocab) + index

    def lookup(self, rows: np.ndarray) -> np.ndarray:
        """Character ids of table rows: `[...]` -> `[..., max_chars]` int32."""
        n_vocab = len(self._vocab)
        out = self._vocab[np.minimum(rows, n_vocab - 1)].astype(np.int32)
        other = rows >= n_vocab
        if other.any():
            out[other] = self._other[rows[other] - n_vocab]
        return out
