"""bilm-tf style batching: B independent sentence streams per direction, windows of T tokens.

Row r of consecutive batches continues the same stream, so carried LSTM states see continuous
text. Each sentence `w1..wn` contributes n + 1 positions:
  forward : inputs `<S> w1 .. wn`,   targets `w1 .. wn </S>`
  backward: inputs `</S> wn .. w1`,  targets `wn .. w1 <S>`
(the backward stream holds the same sentences, each reversed, at the same positions).
When a finite source runs out, the remaining positions get mask 0; iteration ends once a batch
would hold no real token, so every target is produced exactly once.
"""

from __future__ import annotations

import threading
import queue
from typing import Any, Iterator

import numpy as np

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, CharIdTable
from elmo_jax.data.vocab import Vocabulary

Batch = dict[str, dict[str, np.ndarray]]


# Per position of a sentence `w1..wn` (n + 1 positions), the index into `[<S>, w1..wn, </S>]`
# (length L = n + 2) of: forward input, forward target, backward input, backward target; and into
# `[<S>, w1..wn, </S>]`'s char-table rows, stored after the ids, of both directions' inputs.
# Each is `sign * position + offset`: offsets are 0, 1, L - 1, L - 2, L, 2L - 1.
_SIGNS = np.array([1, 1, -1, -1, 1, -1])[:, None]
_MAX_CACHED_PATTERN = 1024


def _pattern(n: int, fields: int) -> np.ndarray:
    length = n + 2
    offsets = np.array([0, 1, length - 1, length - 2, length, 2 * length - 1])[:fields, None]
    return _SIGNS[:fields] * np.arange(n + 1) + offsets


class BiLMBatcher:
    """Turns a sentence source into fixed-shape bidirectional batches.

    Each batch is `{'forward'|'backward': {'token_ids' [B,T] int32, 'char_ids' [B,T,C] int32
    (char encoder only), 'targets' [B,T] int32, 'mask' [B,T] bool}}`.
    `state_dict()` captures the source position and every row's partial sentence.

    Speed: each sentence is encoded once into one `[F, n + 1]` array (ids of both directions and
    char-table rows, one fancy index), a row's window is one slice copy per sentence piece, and
    the char ids of the whole batch are one gather from a per-word table (`CharIdTable`).
    """

    def __init__(
        self,
        source: Any,
        vocab: Vocabulary,
        batch_size: int,
        unroll_steps: int,
        max_chars: int | None = 50,
    ):
        self.source = source
        self.vocab = vocab
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.chars = CharIdTable(vocab.words, vocab.unk_id, max_chars) if max_chars else None
        self._fields = 4 if self.chars is None else 6
        self._patterns: dict[int, np.ndarray] = {}
        self._words: list[list[str] | None] = [None] * batch_size
        self._encoded: list[np.ndarray | None] = [None] * batch_size
        self._offsets = [0] * batch_size
        self._exhausted = False
        if self.chars is not None:
            self._bos_row, self._eos_row = self.chars.rows([BOS_TOKEN, EOS_TOKEN], vocab.encode([BOS_TOKEN, EOS_TOKEN]))

    def __iter__(self) -> Iterator[Batch]:
        return self

    def _encode(self, words: list[str]) -> np.ndarray:
        """`[F, n + 1]` int32: forward input/target ids, backward input/target ids and (char
        encoder) the char-table rows of the forward and backward inputs, per position."""
        n = len(words)
        length = n + 2
        ids = self.vocab.encode(words)
        buf = np.empty(length if self.chars is None else 2 * length, np.int32)
        buf[0], buf[1 : n + 1], buf[n + 1] = self.vocab.bos_id, ids, self.vocab.eos_id
        if self.chars is not None:
            buf[length], buf[length + 1 : 2 * length - 1], buf[-1] = (
                self._bos_row, self.chars.rows(words, ids), self._eos_row
            )
        pattern = self._patterns.get(n)
        if pattern is None:
            pattern = _pattern(n, self._fields)
            if n <= _MAX_CACHED_PATTERN:
                self._patterns[n] = pattern
        return buf[pattern]

    def _next_sentence(self, row: int) -> np.ndarray | None:
        words = None
        if not self._exhausted:
            try:
                words = next(self.source)
            except StopIteration:
                self._exhausted = True
        self._words[row] = words
        self._encoded[row] = None if words is None else self._encode(words)
        return self._encoded[row]

    def _forget_other_words(self) -> None:
        """Bounds the char table's out-of-vocabulary rows; re-encodes the rows' live sentences."""
        self.chars.forget_other_words()
        for r, words in enumerate(self._words):
            if words is not None:
                self._encoded[r] = self._encode(words)

    def __next__(self) -> Batch:
        B, T = self.batch_size, self.unroll_steps
        if self.chars is not None and self.chars.other_words_full:
            self._forget_other_words()
        grid = np.zeros((self._fields, B, T), np.int32)
        lengths = np.zeros((B, 1), np.int64)
        for r in range(B):
            encoded, k, pos = self._encoded[r], self._offsets[r], 0
            while pos < T:
                if encoded is None or k >= encoded.shape[1]:
                    encoded, k = self._next_sentence(r), 0
                    if encoded is None:
                        break
                n = min(encoded.shape[1] - k, T - pos)
                grid[:, r, pos : pos + n] = encoded[:, k : k + n]
                k += n
                pos += n
            self._offsets[r] = k
            lengths[r] = pos
        if not lengths.any():
            raise StopIteration
        mask = np.arange(T) < lengths
        out = {
            "forward": {"token_ids": grid[0], "targets": grid[1], "mask": mask},
            "backward": {"token_ids": grid[2], "targets": grid[3], "mask": mask.copy()},
        }
        if self.chars is not None:
            out["forward"]["char_ids"] = self.chars.lookup(grid[4])
            out["backward"]["char_ids"] = self.chars.lookup(grid[5])
        return out

    def epochs_at(self, state: dict) -> float:
        """Fractional epochs consumed at a position returned by `state_dict()`."""
        return self.source.epochs_at(state["source"])

    def state_dict(self) -> dict:
        """JSON-serialisable position: source state plus each row's unfinished sentence."""
        rows = []
        for words, encoded, k in zip(self._words, self._encoded, self._offsets):
            live = encoded is not None and k < encoded.shape[1]
            rows.append({"words": words, "offset": k} if live else None)
        return {"source": self.source.state_dict(), "rows": rows, "exhausted": self._exhausted}

    def load_state_dict(self, state: dict) -> None:
        if len(state["rows"]) != self.batch_size:
            raise ValueError(
                f"data state has {len(state['rows'])} rows but batch_size is {self.batch_size}"
            )
        self.source.load_state_dict(state["source"])
        self._exhausted = bool(state.get("exhausted", False))
        for r, row in enumerate(state["rows"]):
            if row is None:
                self._words[r], self._encoded[r], self._offsets[r] = None, None, 0
            else:
                self._words[r] = list(row["words"])
                self._encoded[r] = self._encode(self._words[r])
                self._offsets[r] = int(row["offset"])


class Prefetcher:
    """Produces items of an iterator on a background thread, `size` items ahead.

    `state_dict()` returns the wrapped iterator's state as of the last item handed out, so a
    checkpoint never skips or repeats batches that were prefetched but not consumed.
    """

    _END = object()

    def __init__(self, iterator: Any, size: int = 4):
        self._iterator = iterator
        self._queue: queue.Queue = queue.Queue(maxsize=size)
        self._state = iterator.state_dict() if hasattr(iterator, "state_dict") else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._iterator:
                state = self._iterator.state_dict() if self._state is not None else None
                while not self._stop.is_set():
                    try:
                        self._queue.put((item, state), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
            self._put_final((self._END, None))
        except BaseException as e:  # Re-raised in the consumer thread.
            self._put_final((e, None))

    def _put_final(self, item: tuple) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def __iter__(self) -> "Prefetcher":
        return self

    def __next__(self) -> Any:
        item, state = self._queue.get()
        if item is self._END:
            self._queue.put((self._END, None))
            raise StopIteration
        if isinstance(item, BaseException):
            self._queue.put((item, None))  # Every later call fails the same way.
            raise item
        self._state = state
        return item

    def state_dict(self) -> dict | None:
        return self._state

    def close(self) -> None:
        self._stop.set()
