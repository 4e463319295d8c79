"""A vector file's words looked up as the probes and tools read text (docs/probing.md, "Static
baselines"): each word tried in several spellings, the first the file has giving its vector.

A word none of its spellings finds is out of vocabulary (OOV): it takes the vector of the file's
unknown-word entry when it has one (`<UNK>`, as `elmo-static` writes the rare words' vector, or
`<unk>`; GloVe's `unk` is an ordinary word), else no vector, which features read as zeros.
"""

from __future__ import annotations

import dataclasses
import os
from typing import NamedTuple, Sequence

import numpy as np

from elmo_jax.static.vector_files import read_vectors

UNKNOWN_WORDS = ("<UNK>", "<unk>")  # The unknown-word entries looked for, in this order.
NO_ROW = -1  # The row of a word without a vector.


class Lookup(NamedTuple):
    """Where each of n words was found: `rows` `[n]` its row (the unknown word's for an OOV word
    when the file has one, else NO_ROW) and `found_by` `[n]` the index of the spelling that found
    it (-1: OOV)."""

    rows: np.ndarray
    found_by: np.ndarray

    @property
    def oov(self) -> np.ndarray:
        """`[n]` bool: the words none of their spellings found."""
        return self.found_by < 0


@dataclasses.dataclass(frozen=True)
class StaticVectors:
    """A vector file's `words` and `vectors` `[n_words, dim]` float32, by the `name` results give it."""

    name: str
    path: str
    binary: bool
    words: list[str]
    vectors: np.ndarray
    index: dict[str, int]

    @classmethod
    def read(cls, path: str, name: str | None = None) -> StaticVectors:
        """The file at `path`, text or word2vec binary; ValueError naming `file:line` when malformed."""
        words, vectors, binary = read_vectors(path)
        return cls(name or os.path.basename(path), path, binary, words, vectors,
                   {word: i for i, word in enumerate(words)})

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def unknown_word(self) -> str | None:
        """The file's unknown-word entry (UNKNOWN_WORDS), or None."""
        return next((word for word in UNKNOWN_WORDS if word in self.index), None)

    def lookup(self, spellings: Sequence[Sequence[str]]) -> Lookup:
        """Each word's row by the first of its `spellings` (one sequence a word, tried in order) the
        file has, else the unknown word's (module docstring)."""
        unknown = self.index.get(self.unknown_word, NO_ROW) if self.unknown_word else NO_ROW
        rows, found_by = np.full(len(spellings), unknown, np.int64), np.full(len(spellings), -1, np.int64)
        for i, forms in enumerate(spellings):
            for n, form in enumerate(forms):
                if form in self.index:
                    rows[i], found_by[i] = self.index[form], n
                    break
        return Lookup(rows, found_by)

    def rows_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors `[n, dim]` of `rows` `[n]`, zeros for NO_ROW."""
        rows = np.asarray(rows)
        vectors = self.vectors[np.maximum(rows, 0)]
        vectors[rows == NO_ROW] = 0.0
        return vectors
