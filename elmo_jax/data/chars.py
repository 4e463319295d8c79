"""Word -> character ids, compatible with bilm-tf and AllenNLP.

A word is encoded as `[bow, utf8_bytes[:max_chars - 2]..., eow, pad...]`; `<S>` and `</S>` use
the reserved begin/end-of-sentence characters. Every id is shifted by +1 so that 0 means "no
token" (the padding row of the character embedding).
"""

from __future__ import annotations

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
