"""The hdf5 files `elmo-embed` writes, each whole or not at all: the representations (AllenNLP's
`allennlp elmo` layout) and bilm-tf's `dump_token_embeddings` file (docs/embeddings.md)."""

from __future__ import annotations

import json
import logging
from typing import Sequence

import h5py
import numpy as np

from elmo_jax.runtime.atomic_write import write_atomic

LAYER_MODES = ("all", "top", "average")  # What `embed_file` writes per sentence (`select_layers`).
SENTENCE_TO_INDEX = "sentence_to_index"  # `embed_file`'s dataset: JSON of sentence -> dataset name.


def select_layers(layers: np.ndarray, mode: str) -> np.ndarray:
    """One sentence's ELMo layers `[n_layers + 1, n_tokens, 2P]` as 'all', or 'top' / 'average'
    `[n_tokens, 2P]`, as AllenNLP's `allennlp elmo --all/--top/--average`."""
    if mode == "top":
        return layers[-1]
    return layers.mean(axis=0) if mode == "average" else layers


class DatasetWriter:
    """Names and writes `ElmoEmbedder.embed_file`'s datasets, one line at a time."""

    def __init__(self, out: h5py.File, source: str, forget_sentences: bool, use_sentence_keys: bool):
        self.out, self.source, self.by_sentence = out, source, use_sentence_keys
        self.sentence_to_index: dict[str, str] | None = None if forget_sentences or use_sentence_keys else {}
        self.lines = self.repeated = 0

    def add(self, tokens: Sequence[str], layers: np.ndarray) -> None:
        """Writes the next line's layers (unless its sentence names an earlier line's dataset)."""
        sentence = " ".join(tokens)
        self.lines += 1
        name = sentence if self.by_sentence else str(self.lines - 1)
        if self.by_sentence:
            # Not a name hdf5 can take: a NUL would end it there ('a\x00b' would name the dataset of 'a').
            if not sentence or sentence == "." or "/" in sentence or "\x00" in sentence:
                raise ValueError(
                    f"{self.source}:{self.lines}: {sentence!r} cannot name an hdf5 dataset (empty, '.' or holding "
                    "'/' or NUL): leave out use_sentence_keys (--use_sentence_keys) to name the datasets by line number"
                )
            if name in self.out:
                self.repeated += 1
                return
        elif self.sentence_to_index is not None:
            self.sentence_to_index[sentence] = name
        self.out.create_dataset(name, data=layers)

    def finish(self) -> int:
        """Writes `sentence_to_index` (when kept) and returns the line count."""
        if self.sentence_to_index is not None:
            index = self.out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
            index[0] = json.dumps(self.sentence_to_index)
        if self.repeated:
            logging.warning(
                "%s: %d line(s) repeat an earlier line's sentence; each sentence is written once, with the "
                "layers of its first line (use_sentence_keys)", self.source, self.repeated,
            )
        return self.lines


def write_token_embeddings(embeddings: np.ndarray, output_path: str) -> None:
    """Writes dataset `embedding` `(n_vocab, P)`: bilm-tf's `dump_token_embeddings` file."""

    def write(tmp: str) -> None:
        with h5py.File(tmp, "w") as out:
            out.create_dataset("embedding", data=embeddings)

    write_atomic(output_path, write)
