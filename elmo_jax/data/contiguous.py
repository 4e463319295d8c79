"""The language-modelling papers' batching: the text in its order, split into B contiguous streams.

Row r of the forward batches reads the r-th of B equal parts of the corpus, window after window;
row r of the backward batches the r-th part of the reversed corpus. So the state a row carries
always holds the real preceding text (Zaremba et al. 2014, Kim et al. 2016). Each sentence `w1..wn`
contributes n + 1 positions per direction, as in `BiLMBatcher`; the tail of the last part is masked.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from elmo_jax.data.batching import Batch, SentenceEncoder
from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.sources import DataError
from elmo_jax.data.vocab import Vocabulary

_FORWARD_FIELDS, _BACKWARD_FIELDS = (0, 1, 4), (2, 3, 5)  # (inputs, targets, char rows) of SentenceEncoder.


class ContiguousBatcher:
    """Fixed-shape bidirectional batches of contiguous streams; the same batch layout as `BiLMBatcher`.

    `batch_size` counts the streams of all P processes (a multiple of P); process i yields rows
    `[i * B / P, (i + 1) * B / P)`, so the processes together read the whole corpus.
    """

    def __init__(
        self,
        sentences: Sequence[list[str]],
        vocab: Vocabulary,
        batch_size: int,
        unroll_steps: int,
        max_chars: int | None = 50,
        num_epochs: int | None = 1,
        process_index: int = 0,
        process_count: int = 1,
        characters: CharVocabulary | None = None,
    ):
        if not sentences:
            raise DataError("the corpus has no sentences")
        encode = SentenceEncoder(vocab, max_chars, characters)
        self.chars = encode.chars
        self.unroll_steps = unroll_steps
        self.num_epochs = num_epochs
        positions = sum(len(s) + 1 for s in sentences)
        self.positions_per_row = -(-positions // batch_size)
        self.windows = -(-self.positions_per_row // unroll_steps)
        local = batch_size // process_count
        rows = slice(process_index * local, (process_index + 1) * local)
        self._streams = np.stack([  # [2 directions, fields, B, windows * T]
            self._split(encode(list(sentences)), _FORWARD_FIELDS, batch_size)[:, rows],
            self._split(encode(list(sentences)[::-1]), _BACKWARD_FIELDS, batch_size)[:, rows],
        ])
        self._mask = (np.arange(batch_size * self.positions_per_row) < positions).reshape(batch_size, -1)[rows]
        self._mask = self._pad_time(self._mask)
        self.epoch, self.window = 0, 0

    def _pad_time(self, array: np.ndarray) -> np.ndarray:
        """Pads the last axis (positions of a row) to a whole number of windows."""
        pad = self.windows * self.unroll_steps - array.shape[-1]
        return np.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, pad)])

    def _split(self, encoded: np.ndarray, fields: tuple[int, ...], batch_size: int) -> np.ndarray:
        """`[fields, B, windows * T]`: the fields' positions in order, cut into B equal rows."""
        chosen = encoded[[f for f in fields if f < encoded.shape[0]]]
        chosen = np.pad(chosen, [(0, 0), (0, batch_size * self.positions_per_row - chosen.shape[1])])
        return self._pad_time(chosen.reshape(chosen.shape[0], batch_size, self.positions_per_row))

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        if self.num_epochs is not None and self.epoch >= self.num_epochs:
            raise StopIteration
        columns = slice(self.window * self.unroll_steps, (self.window + 1) * self.unroll_steps)
        mask = self._mask[:, columns]
        fields = self._streams[:, :, :, columns]  # [2 directions, fields, B, T]
        out = {"token_ids": fields[:, 0], "targets": fields[:, 1], "mask": np.stack([mask, mask])}
        if self.chars is not None:
            out["char_ids"] = self.chars.lookup(fields[:, 2])
        self.window += 1
        if self.window == self.windows:
            self.epoch, self.window = self.epoch + 1, 0
        return out

    def epochs_at(self, state: dict) -> float:
        """Fractional passes over the corpus at a position returned by `state_dict()`."""
        return state["epoch"] + state["window"] / self.windows

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "window": self.window}

    def load_state_dict(self, state: dict) -> None:
        if "window" not in state:
            raise ValueError("the checkpoint's data position was written with data.streams='sentences'")
        self.epoch, self.window = int(state["epoch"]), int(state["window"])
