"""Word -> character ids, compatible with bilm-tf and AllenNLP.

A word is encoded as `[bow, utf8_bytes[:max_chars - 2]..., eow, pad...]`; `<S>` and `</S>` use
the reserved begin/end-of-sentence characters. Every id is shifted by +1 so that 0 means "no
token" (the padding row of the character embedding). With a character vocabulary
(data/char_vocab.py) its characters are one id each, the others bytes, and no cut splits a
character.
"""

from __future__ import annotations

from typing import Protocol, Sequence, TypeVar, runtime_checkable

import numpy as np

Ids = TypeVar("Ids")  # A NumPy or a JAX array of char ids.

BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
# A token is [BOW, chars..., EOW, pad...]: room for one character (data.max_chars_per_token's least).
MIN_CHARS_PER_TOKEN = 3
N_CHARACTERS = 262  # 261 bilm-tf characters + the "no token" row 0.
ID_SHIFT = 1


class Spelling(Protocol):
    """What the encoders here ask of a character vocabulary (data/char_vocab.py's `CharVocabulary`,
    built on these ids)."""

    def spell(self, word: str, max_units: int) -> tuple[list[int], bool]:
        """(the unshifted ids of `word`'s first units, whether it was cut)."""


@runtime_checkable
class OwnInputs(Protocol):
    """A model's own token inputs in place of a spelling (data/manylangs_inputs.py's ELMoForManyLangs
    dictionaries): words -> their id rows, `n_ids` bounding every id."""

    n_ids: int

    def token_ids(self, words: Sequence[str]) -> np.ndarray:
        """`[len(words), width]` int32 id rows, `<S>`/`</S>` among the words."""


BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
UNK_TOKEN = "<UNK>"


def word_to_char_ids(word: str, max_chars: int = 50, characters: Spelling | OwnInputs | None = None) -> np.ndarray:
    """The +1-shifted character ids of one word, `[max_chars]` int32: UTF-8 bytes past
    `max_chars - 2` cut, lone surrogates dropped (as bilm-tf and AllenNLP); with `characters`,
    `CharVocabulary.spell`'s units."""
    return words_to_char_ids([word], max_chars, characters)[0]


def words_to_char_ids(
    words: Sequence[str], max_chars: int = 50, characters: Spelling | OwnInputs | None = None
) -> np.ndarray:
    """`word_to_char_ids` of many words at once (vectorised), `[len(words), max_chars]` int32; with
    `characters` a model's own inputs (`OwnInputs`), their rows (`max_chars` wide)."""
    if isinstance(characters, OwnInputs):
        return characters.token_ids(words)
    if max_chars < 3:
        raise ValueError(f"max_chars must be >= 3, got {max_chars}")
    if characters is None:
        data = [w.encode("utf-8", errors="ignore")[: max_chars - 2] for w in words]
        dtype = np.uint8
    else:
        data = [np.array(characters.spell(w, max_chars - 2)[0], np.int32).tobytes() for w in words]
        dtype = np.int32
    n = len(data)
    lengths = np.fromiter(map(len, data), np.int64, n) // np.dtype(dtype).itemsize
    ids = np.full((n, max_chars), PAD_CHAR, np.int32)
    ids[:, 0] = BOW_CHAR
    flat = np.frombuffer(b"".join(data), dtype)
    rows = np.repeat(np.arange(n), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    ids[rows, np.arange(flat.size) - starts + 1] = flat
    ids[np.arange(n), lengths + 1] = EOW_CHAR
    for i, word in enumerate(words):
        if word == BOS_TOKEN or word == EOS_TOKEN:  # Spelled as their reserved character.
            ids[i] = PAD_CHAR
            ids[i, :3] = BOW_CHAR, BOS_CHAR if word == BOS_TOKEN else EOS_CHAR, EOW_CHAR
    return ids + ID_SHIFT


def narrow_char_ids(ids: Ids, max_chars: int) -> Ids:
    """Char ids `[..., C]` of width `C >= max_chars` -> `[..., max_chars]`, each token spelled as
    `words_to_char_ids(word, max_chars)` spells it (a biLM of `max_chars` reading AllenNLP's
    50-wide `batch_to_ids`): a cut token gets the end-of-word mark in its last column. NumPy or JAX.
    """
    narrow = ids[..., :max_chars]
    last = narrow[..., -1:]
    cut = (last != 0) & (last != PAD_CHAR + ID_SHIFT) & (last != EOW_CHAR + ID_SHIFT)  # A byte: the word went on.
    in_last_column = np.arange(max_chars) == max_chars - 1
    return narrow + (cut & in_last_column) * (EOW_CHAR + ID_SHIFT - last)


class CharIdCache:
    """Memoised `word_to_char_ids` (corpora repeat words; encoding each occurrence is slow)."""

    def __init__(
        self, max_chars: int = 50, max_entries: int = 2_000_000, characters: Spelling | OwnInputs | None = None
    ):
        self.max_chars = max_chars
        self.max_entries = max_entries
        self.characters = characters
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, word: str) -> np.ndarray:
        ids = self._cache.get(word)
        if ids is None:
            ids = word_to_char_ids(word, self.max_chars, self.characters)
            if len(self._cache) < self.max_entries:
                self._cache[word] = ids
        return ids

    def encode(self, words: list[str]) -> np.ndarray:
        """Character ids of a word sequence, `[len(words), max_chars]` int32."""
        if not words:
            return words_to_char_ids([], self.max_chars, self.characters)
        new = [w for w in dict.fromkeys(words) if w not in self._cache]
        # One vectorised call.
        encoded = dict(zip(new, words_to_char_ids(new, self.max_chars, self.characters))) if new else {}
        room = max(self.max_entries - len(self._cache), 0)
        self._cache.update((w, encoded[w]) for w in new[:room])
        return np.stack([encoded[w] if w in encoded else self._cache[w] for w in words])


class CharIdTable:
    """Character ids as rows of tables, so that a whole batch's char ids are one gather.

    Row 0 is "no token" (zeros); row `id + 1` holds vocabulary word `id`, encoded when first seen.
    Words outside the vocabulary (`<UNK>`, with their own characters) get rows after those;
    `other_words_full` says when `forget_other_words()` should bound their memory.
    """

    def __init__(
        self, vocab_words: Sequence[str], unk_id: int, max_chars: int = 50, max_other_words: int = 200_000,
        characters: Spelling | OwnInputs | None = None,
    ):
        self.max_chars = max_chars
        self.max_other_words = max_other_words
        self.characters = characters
        self._vocab_words = vocab_words
        self._unk_id = unk_id
        self._unk_word = vocab_words[unk_id]
        # uint16 holds every char id (data/char_vocab.py's MAX_IDS), not every model's own input ids.
        dtype = np.int32 if isinstance(characters, OwnInputs) and characters.n_ids > 2**16 else np.uint16
        self._vocab = np.zeros((len(vocab_words) + 1, max_chars), dtype)
        self._encoded = np.zeros(len(vocab_words) + 1, bool)
        self._encoded[0] = True
        self._other_index: dict[str, int] = {}
        self._other = np.zeros((1024, max_chars), dtype)

    @property
    def other_words_full(self) -> bool:
        return len(self._other_index) >= self.max_other_words

    def forget_other_words(self) -> None:
        """Frees the rows of out-of-vocabulary words; rows returned earlier for them become invalid."""
        self._other_index.clear()

    def rows(self, words: Sequence[str], word_ids: np.ndarray) -> np.ndarray:
        """Table rows of `words` (whose vocabulary ids are `word_ids`), `[n]` int32."""
        rows = word_ids + 1
        new = np.unique(rows[~self._encoded[rows]])
        if new.size:
            words_new = [self._vocab_words[r - 1] for r in new.tolist()]
            self._vocab[new] = words_to_char_ids(words_new, self.max_chars, self.characters)
            self._encoded[new] = True
        unknown = (word_ids == self._unk_id).nonzero()[0]
        if unknown.size:
            self._other_rows(words, unknown, rows)
        return rows

    def _other_rows(self, words: Sequence[str], positions: np.ndarray, rows: np.ndarray) -> None:
        """Sets `rows` at `positions` (words mapped to `<UNK>`) to their out-of-vocabulary rows."""
        index, first, unk_word = self._other_index, len(self._vocab), self._unk_word
        added: list[str] = []
        for i in positions.tolist():
            word = words[i]
            if word == unk_word:
                continue
            k = index.get(word)
            if k is None:
                k = index[word] = len(index)
                added.append(word)
            rows[i] = first + k
        if added:
            end = len(index)
            while end > len(self._other):
                self._other = np.concatenate([self._other, np.zeros_like(self._other)])
            self._other[end - len(added) : end] = words_to_char_ids(added, self.max_chars, self.characters)

    def lookup(self, rows: np.ndarray) -> np.ndarray:
        """Character ids of table rows: `[...]` -> `[..., max_chars]` int32."""
        n_vocab = len(self._vocab)
        out = self._vocab[np.minimum(rows, n_vocab - 1)].astype(np.int32)
        other = rows >= n_vocab
        if other.any():
            out[other] = self._other[rows[other] - n_vocab]
        return out
