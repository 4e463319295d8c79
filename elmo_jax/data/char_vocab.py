"""A character vocabulary (`data.char_vocab_file`): characters spelled as one id each instead of
their UTF-8 bytes.

bilm-tf spells a word as its UTF-8 bytes, so a Chinese character is 3 positions of the char CNN and
a cut can fall inside it. With a character vocabulary, ids 0..260 keep bilm-tf's meaning (bytes and
the special characters) and the listed characters take the ids after them, 261, 262, ... (+1
shifted in the model's inputs, as every char id); a character not listed is still its bytes, so
ASCII text is spelled as bilm-tf spells it. The file: one character a line, optionally a tab and its
count, most frequent first (`elmo-vocab chars` writes it).
"""

from __future__ import annotations

import collections
import hashlib
import os
from typing import Iterable, Mapping, Sequence

from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.data.vocab import read_counted_lines
from elmo_jax.runtime.atomic_write import write_atomic

FIRST_ID = N_CHARACTERS - 1  # Unshifted id of the first listed character: bilm-tf's 261 come before it.
MAX_IDS = 2**16  # Char ids are stored as uint16 (data.chars.CharIdTable).


class CharVocabularyError(ValueError):
    """A character vocabulary file that cannot be used."""


def _listable(char: str) -> str | None:
    """Why `char` cannot be listed, or None: a listed character is one code point of 2-4 UTF-8
    bytes (a 1-byte character already has its own id, its byte), not whitespace."""
    if len(char) != 1:
        return f"{char!r} is not one character"
    if char.isspace():
        return f"{char!r} is whitespace"
    try:
        size = len(char.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{char!r} is a lone surrogate"
    return f"{char!r} is ASCII: it is spelled as its byte already" if size == 1 else None


def _checked_character(token: str) -> str:
    """A character vocabulary line's character; ValueError saying why it cannot be listed."""
    reason = _listable(token)
    if reason:
        raise ValueError(reason)
    return token


def count_characters(word_counts: Mapping[str, int]) -> collections.Counter[str]:
    """Occurrences of each listable character (2-4 UTF-8 bytes, not whitespace) in words counted
    `word_counts` (word -> occurrences): what a character vocabulary is built from."""
    counts: collections.Counter[str] = collections.Counter()
    for word, count in word_counts.items():
        for char in word:
            if _listable(char) is None:
                counts[char] += count
    return counts


class CharVocabulary:
    """Listed characters -> their ids; `spell` gives a word's ids (unshifted, 0..n_ids - 2)."""

    def __init__(self, characters: Sequence[str], counts: Sequence[int] | None = None):
        index: dict[str, int] = {}
        for k, char in enumerate(characters):
            reason = _listable(char)
            if reason:
                raise CharVocabularyError(f"line {k + 1}: {reason}")
            if char in index:
                first = index[char] - FIRST_ID + 1
                raise CharVocabularyError(f"duplicate character {char!r} at lines {first} and {k + 1}")
            index[char] = FIRST_ID + k
        if FIRST_ID + len(index) + 1 > MAX_IDS:
            raise CharVocabularyError(f"{len(index)} characters: at most {MAX_IDS - FIRST_ID - 1} fit the char ids")
        self.characters = tuple(characters)
        self.counts = tuple(counts) if counts is not None else None
        self._index = index

    def __len__(self) -> int:
        return len(self.characters)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharVocabulary) and self.characters == other.characters

    def __hash__(self) -> int:
        return hash(self.characters)

    @property
    def n_ids(self) -> int:
        """Rows of the char CNN's embedding table: bilm-tf's 261 ids, the listed characters', and 0 (no token)."""
        return N_CHARACTERS + len(self.characters)

    def fingerprint(self) -> str:
        """'sha256:<hex>' of the characters in their order: what the rows of the char table are indexed by."""
        return "sha256:" + hashlib.sha256("\n".join(self.characters).encode("utf-8")).hexdigest()

    def spell(self, word: str, max_units: int) -> tuple[list[int], bool]:
        """(the unshifted ids of `word`'s first units, whether it was cut): a listed character is one
        unit, any other its UTF-8 bytes (lone surrogates dropped, as bilm-tf); at most `max_units`,
        never cutting a character's bytes apart."""
        units: list[int] = []
        for char in word:
            k = self._index.get(char)
            group = [k] if k is not None else list(char.encode("utf-8", errors="ignore"))
            if len(units) + len(group) > max_units:
                return units, True
            units.extend(group)
        return units, False

    @classmethod
    def build(cls, word_counts: Mapping[str, int], min_count: int = 1) -> "CharVocabulary":
        """The characters of 2-4 UTF-8 bytes in words counted `word_counts` (word -> occurrences) at
        least `min_count` times, by descending count, ties by the character."""
        return cls.from_character_counts(count_characters(word_counts), min_count)

    @classmethod
    def from_character_counts(cls, char_counts: Mapping[str, int], min_count: int = 1) -> "CharVocabulary":
        """The characters of `char_counts` (listable character -> occurrences, `count_characters`)
        seen at least `min_count` times, by descending count, ties by the character: counted once,
        the counts serve several thresholds or totals without another pass over the words."""
        items = sorted(((c, n) for c, n in char_counts.items() if n >= min_count), key=lambda cn: (-cn[1], cn[0]))
        return cls([c for c, _ in items], [n for _, n in items])

    @classmethod
    def load(cls, path: str) -> "CharVocabulary":
        """Reads the file `save` writes: `char` or `char<TAB>count` a line; CharVocabularyError naming
        the file and line of the first bad one."""
        if not os.path.exists(path):
            raise CharVocabularyError(f"{path}: character vocabulary file not found")
        characters, counts = read_counted_lines(path, "character", _checked_character, CharVocabularyError)
        if not characters:
            raise CharVocabularyError(f"{path}: no characters (an empty data.char_vocab_file means bytes)")
        try:
            return cls(characters, counts)
        except CharVocabularyError as e:
            raise CharVocabularyError(f"{path}: {e}") from None

    def save(self, path: str) -> None:
        """Writes `char<TAB>count` lines (counts known), else one character a line, atomically."""
        write_atomic(path, self._write)

    def _write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for k, char in enumerate(self.characters):
                f.write(f"{char}\t{self.counts[k]}\n" if self.counts is not None else f"{char}\n")


def checkpoint_characters(path: str, n_rows: int, fingerprint: str | None) -> CharVocabulary:
    """The character vocabulary at `path` of a checkpoint whose char table has `n_rows` rows and
    whose record holds `fingerprint`: CharVocabularyError naming the file unless they fit."""
    characters = CharVocabulary.load(path)
    if characters.n_ids != n_rows:
        raise CharVocabularyError(
            f"{path}: {len(characters)} characters, but the checkpoint's char table has {n_rows} rows "
            f"({N_CHARACTERS} + one per character)"
        )
    if fingerprint is not None and characters.fingerprint() != fingerprint:
        raise CharVocabularyError(
            f"{path}: not the character vocabulary the checkpoint was trained with (its characters or their order "
            "differ); restore the file the run wrote"
        )
    return characters


def count_cut(words: Iterable[str], max_chars: int, characters: CharVocabulary | None) -> tuple[int, str | None]:
    """(how many of `words` are cut to `max_chars` ids, the first of them): longer than
    `max_chars - 2` units (a listed character or a byte), BOW and EOW taking the other two."""
    n_cut, first = 0, None
    for word in words:
        if characters is None:
            cut = len(word.encode("utf-8", errors="ignore")) > max_chars - 2
        else:
            cut = characters.spell(word, max_chars - 2)[1]
        if cut:
            n_cut += 1
            first = first or word
    return n_cut, first


def n_char_ids(characters: CharVocabulary | None) -> int:
    """The char ids of a run spelling with `characters`: bilm-tf's 262 without a character vocabulary."""
    return N_CHARACTERS if characters is None else characters.n_ids
