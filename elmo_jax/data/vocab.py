"""Word vocabulary in the bilm-tf file format.

One token per line: `<S>`, `</S>`, `<UNK>` first, then words by descending training frequency
(the sampled softmax's log-uniform sampler assumes this order), an optional tab-separated count.
"""

from __future__ import annotations

import collections
import hashlib
import os
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from elmo_jax.runtime.atomic_write import write_atomic
from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from elmo_jax.data.line_files import utf8_line

SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
# <S>, </S>, <UNK> and a handful of words: with fewer every word is <UNK> and perplexity means nothing.
MIN_VOCAB_SIZE = 8


class VocabularyError(ValueError):
    """A vocabulary file that cannot be used."""


class Vocabulary:
    """Maps words to ids; unknown words map to `<UNK>`."""

    def __init__(self, words: list[str], counts: list[int] | None = None):
        index: dict[str, int] = {}
        for i, word in enumerate(words):
            if word in index:
                raise VocabularyError(f"duplicate token {word!r} at lines {index[word] + 1} and {i + 1}")
            index[word] = i
        for special in SPECIAL_TOKENS:
            if special not in index:
                raise VocabularyError(f"vocabulary lacks the special token {special!r}")
        self.words = list(words)
        self.counts = list(counts) if counts is not None else None
        self._index = index
        self.bos_id = index[BOS_TOKEN]
        self.eos_id = index[EOS_TOKEN]
        self.unk_id = index[UNK_TOKEN]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self._index

    def word_to_id(self, word: str) -> int:
        return self._index.get(word, self.unk_id)

    def encode(self, words: Iterable[str]) -> np.ndarray:
        """Word ids of a token sequence, `[n]` int32."""
        get, unk = self._index.get, self.unk_id
        return np.fromiter((get(w, unk) for w in words), dtype=np.int32)

    def fingerprint(self) -> str:
        """'sha256:<hex>' of the words in their order: what a checkpoint's softmax rows (and a
        word-input biLM's embedding rows) are indexed by. Counts do not change it."""
        return "sha256:" + hashlib.sha256("\n".join(self.words).encode("utf-8")).hexdigest()

    def is_frequency_sorted(self) -> bool:
        """True when the non-special words are known to be in descending frequency order."""
        if self.counts is None:
            return False
        counts = [c for w, c in zip(self.words, self.counts) if w not in SPECIAL_TOKENS]
        return all(a >= b for a, b in zip(counts, counts[1:]))

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_count: int = 1, max_size: int | None = None) -> "Vocabulary":
        """Counts words; orders them by descending count, ties broken by the word itself."""
        counter: collections.Counter[str] = collections.Counter()
        for sentence in sentences:
            counter.update(sentence)
        return cls.from_counts(counter, min_count=min_count, max_size=max_size)

    @classmethod
    def from_counts(cls, counter: collections.Counter, min_count: int = 1, max_size: int | None = None) -> "Vocabulary":
        items = [(w, c) for w, c in counter.items() if c >= min_count and w not in SPECIAL_TOKENS]
        items.sort(key=lambda wc: (-wc[1], wc[0]))
        if max_size is not None:
            items = items[: max(0, max_size - len(SPECIAL_TOKENS))]
        special_counts = [counter.get(t, 0) for t in SPECIAL_TOKENS]
        return cls(list(SPECIAL_TOKENS) + [w for w, _ in items], special_counts + [c for _, c in items])

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        """Reads a bilm-tf vocabulary file (`word` or `word<TAB>count` per line, the same on every line)."""
        if not os.path.exists(path):
            raise VocabularyError(f"{path}: vocabulary file not found")
        words, counts = read_counted_lines(path, "word", _checked_word, VocabularyError)
        try:
            return cls(words, counts)
        except VocabularyError as e:
            raise VocabularyError(f"{path}: {e}") from None

    def save(self, path: str, with_counts: bool = True) -> None:
        """Writes `word<TAB>count` lines (with counts known and `with_counts`), else one word a line,
        atomically."""
        write_atomic(path, lambda tmp: self.write(tmp, with_counts))

    def write(self, path: str, with_counts: bool = True) -> None:
        """Writes the file `save` writes, in place (a temporary of an atomic write)."""
        with open(path, "w", encoding="utf-8") as f:
            for i, word in enumerate(self.words):
                f.write(f"{word}\t{self.counts[i]}\n" if with_counts and self.counts is not None else f"{word}\n")


def _checked_word(token: str) -> str:
    """A vocabulary line's word, its surrounding spaces dropped; ValueError saying why it is none."""
    word = token.strip()
    if not word:
        raise ValueError("empty token")
    if len(word.split()) > 1:
        raise ValueError(f"token {word!r} contains whitespace")
    return word


def read_counted_lines(
    path: str, noun: str, checked: Callable[[str], str], error: type[ValueError]
) -> tuple[list[str], list[int] | None]:
    """(the tokens, their counts or None) of a file of `token` or `token<TAB>count` lines, the same
    on every line (a vocabulary's, a character vocabulary's). `checked(token)` gives the token kept
    or raises ValueError saying why; every problem is an `error` naming the file and line."""
    tokens, counts = [], []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            where = f"{path}:{line_no}"
            line = utf8_line(raw, where, error)
            fields = line.rstrip("\r\n").split("\t")
            try:
                token = checked(fields[0])
            except ValueError as e:
                raise error(f"{where}: {e}") from None
            if len(fields) > 2:
                raise error(f"{where}: expected `{noun}` or `{noun}<TAB>count`: {line.strip()!r}")
            has_count = len(fields) == 2
            if line_no > 1 and has_count != bool(counts):  # Counts so far: line 1 had one.
                raise error(f"{where}: {'a' if has_count else 'no'} count, unlike line 1")
            tokens.append(token)
            if has_count:
                try:
                    counts.append(int(fields[1]))
                except ValueError:
                    raise error(f"{where}: count {fields[1]!r} is not an integer") from None
    return tokens, counts or None


def read_words(path: str) -> list[str]:
    """The first tab-separated field of each line: the words whose token embeddings are wanted,
    special tokens and counts optional."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: vocabulary file not found")
    words = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            word = utf8_line(raw, f"{path}:{line_no}").split("\t")[0].strip()
            if not word:
                raise ValueError(f"{path}:{line_no}: empty token")
            words.append(word)
    return words


# A checkpoint's params with one row per vocabulary word: (what, keys to the array).
_ROWS_PER_WORD = (("softmax", ("softmax", "W")), ("word embedding table", ("encoder", "embedding")))


def checkpoint_vocabulary(path: str, params: Mapping, fingerprint: str | None = None) -> Vocabulary:
    """The vocabulary at `path` of a checkpoint with `params`: VocabularyError naming both counts
    unless it has a word per row of the softmax (and of a word-input biLM's embedding table), and
    naming the file when its words or their order differ from the checkpoint's `fingerprint`
    (`Vocabulary.fingerprint`; None for checkpoints written without one)."""
    vocab = Vocabulary.load(path)
    for what, keys in _ROWS_PER_WORD:
        node: Any = params
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None and node.shape[0] != len(vocab):
            raise VocabularyError(
                f"{path}: {len(vocab)} lines, but the checkpoint's {what} has {node.shape[0]} rows (one per line)"
            )
    if fingerprint is not None and vocab.fingerprint() != fingerprint:
        raise VocabularyError(fingerprint_mismatch(path, vocab.fingerprint(), fingerprint))
    return vocab


def fingerprint_mismatch(path: str, found: str, trained_with: str) -> str:
    """The one-line reason for refusing the vocabulary file `path`: its fingerprint `found` is not the
    checkpoint's `trained_with`, so its lines would name other rows of the softmax."""
    return (
        f"{path}: not the vocabulary the checkpoint was trained with (its words or their order differ: "
        f"{found[:19]}, the checkpoint's {trained_with[:19]}); restore the file the run wrote"
    )
