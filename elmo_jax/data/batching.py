"""bilm-tf style batching: B independent sentence streams per direction, windows of T tokens.

Row r of consecutive batches continues the same stream, so carried LSTM states see continuous
text. Each sentence `w1..wn` contributes n + 1 positions:
  forward : inputs `<S> w1 .. wn`,   targets `w1 .. wn </S>`
  backward: inputs `</S> wn .. w1`,  targets `wn .. w1 <S>`
When a finite source runs out, the remaining positions get mask 0, and every target comes once.
"""

from __future__ import annotations

import itertools
import queue
import threading
from typing import Any, Iterator

import numpy as np

from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, CharIdTable
from elmo_jax.data.resumable import ResumableIterator
from elmo_jax.data.vocab import Vocabulary

# A batch: `{field: [2, B, T, ...]}`, direction 0 the forward stream, 1 the backward stream of
# reversed sentences: the layout the model reads, so nothing restacks it on the way.
Batch = dict[str, np.ndarray]


def _segments(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For consecutive segments of `lengths`: (segment of each element, index within it)."""
    owner = np.repeat(np.arange(len(lengths)), lengths)
    return owner, np.arange(len(owner)) - (np.cumsum(lengths) - lengths)[owner]


class SentenceEncoder:
    """Sentences -> their positions, one after another, as `[F, sum(n + 1)]` int32 fields:
    forward input/target ids, backward input/target ids and (char encoder, `max_chars` set) the
    char-table rows of the forward and backward inputs. `chars.lookup(rows)` gives the char ids,
    spelled with `characters` (a character vocabulary) or as bytes."""

    def __init__(self, vocab: Vocabulary, max_chars: int | None, characters: CharVocabulary | None = None):
        self.vocab = vocab
        self.chars = (
            CharIdTable(vocab.words, vocab.unk_id, max_chars, characters=characters) if max_chars else None
        )
        self.fields = 4 if self.chars is None else 6
        if self.chars is not None:
            self._bos_row, self._eos_row = self.chars.rows([BOS_TOKEN, EOS_TOKEN], vocab.encode([BOS_TOKEN, EOS_TOKEN]))

    def __call__(self, sentences: list[list[str]]) -> np.ndarray:
        lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
        words = list(itertools.chain.from_iterable(sentences))
        ids = self.vocab.encode(words)
        # Each sentence as `<S> w1 .. wn </S>` in one array; position p of a sentence reads its
        # forward input at `first + p` and its backward input at `last - p`.
        first = np.cumsum(lengths + 2) - (lengths + 2)
        last = first + lengths + 1
        inner = np.arange(len(words)) + np.repeat(2 * np.arange(len(sentences)) + 1, lengths)
        extended = np.empty(int(last[-1]) + 1 if len(sentences) else 0, np.int32)
        extended[first], extended[last], extended[inner] = self.vocab.bos_id, self.vocab.eos_id, ids
        owner, p = _segments(lengths + 1)
        forward, backward = first[owner] + p, last[owner] - p
        out = np.empty((self.fields, len(p)), np.int32)
        out[0], out[1], out[2], out[3] = (
            extended[forward], extended[forward + 1], extended[backward], extended[backward - 1]
        )
        if self.chars is not None:
            extended[first], extended[last], extended[inner] = self._bos_row, self._eos_row, self.chars.rows(words, ids)
            out[4], out[5] = extended[forward], extended[backward]
        return out


class BiLMBatcher:
    """Turns a sentence source into fixed-shape bidirectional batches.

    Each batch is `{'token_ids' [2,B,T] int32, 'char_ids' [2,B,T,C] int32 (char encoder only),
    'targets' [2,B,T] int32, 'mask' [2,B,T] bool}`, direction 0 forward, 1 backward (`Batch`).
    `state_dict()` captures the source position and every row's partial sentence. Python only
    hands sentences to rows: encoding and batching are array operations.
    """

    def __init__(
        self,
        source: ResumableIterator[list[str]],
        vocab: Vocabulary,
        batch_size: int,
        unroll_steps: int,
        max_chars: int | None = 50,
        characters: CharVocabulary | None = None,
    ):
        self.source = source
        self.vocab = vocab
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self._encode = SentenceEncoder(vocab, max_chars, characters)
        self.chars = self._encode.chars
        self._fields = self._encode.fields
        self._words: list[list[str] | None] = [None] * batch_size  # Each row's current sentence,
        self._remaining = [0] * batch_size  # how many of its positions are still to come,
        self._carried = np.zeros((self._fields, 0), np.int32)  # and those positions, row after row.
        self._exhausted = False

    def __iter__(self) -> Iterator[Batch]:
        return self

    def _next_sentence(self) -> list[str] | None:
        if not self._exhausted:
            try:
                return next(self.source)
            except StopIteration:
                self._exhausted = True
        return None

    def _set_rows(self, offsets: list[int]) -> None:
        """Re-encodes the rows' current sentences from `offsets` (positions already batched)."""
        live = [r for r in range(self.batch_size) if self._words[r] is not None and offsets[r] <= len(self._words[r])]
        self._remaining = [0] * self.batch_size
        encoded = self._encode([self._words[r] for r in live])
        lengths = np.array([len(self._words[r]) + 1 for r in live], np.int64)
        starts = np.cumsum(lengths) - lengths
        keep = [np.arange(start + offsets[r], start + n) for r, start, n in zip(live, starts, lengths)]
        for r, k in zip(live, keep):
            self._remaining[r] = len(k)
        self._carried = encoded[:, np.concatenate(keep)] if keep else encoded

    def __next__(self) -> Batch:
        B, T = self.batch_size, self.unroll_steps
        if self.chars is not None and self.chars.other_words_full:
            self.chars.forget_other_words()  # Bounds its memory; the rows' live sentences are re-encoded.
            self._set_rows([len(w) + 1 - k if w is not None else 0 for w, k in zip(self._words, self._remaining)])
        # Hand out sentences: row after row, each takes new ones until it has T positions.
        pulled: list[list[str]] = []
        totals = list(self._remaining)
        for r in range(B):
            while totals[r] < T:
                words = self._next_sentence()
                if words is None:
                    break
                pulled.append(words)
                self._words[r] = words
                totals[r] += len(words) + 1
        total = np.array(totals, np.int64)
        if not total.any():
            raise StopIteration
        # Row r's stream: its carried positions, then those of the sentences it took; a last
        # all-zero column pads rows that ran out.
        remaining = np.array(self._remaining, np.int64)
        source = np.concatenate([self._carried, self._encode(pulled), np.zeros((self._fields, 1), np.int32)], axis=1)
        carried_start = np.cumsum(remaining) - remaining
        new = total - remaining
        new_start = self._carried.shape[1] + np.cumsum(new) - new

        def stream_index(row: np.ndarray, t: np.ndarray) -> np.ndarray:
            return np.where(t < remaining[row], carried_start[row] + t, new_start[row] + t - remaining[row])

        rows, t = np.arange(B)[:, None], np.arange(T)[None, :]
        mask = t < total[:, None]
        grid = source[:, np.where(mask, stream_index(rows, t), source.shape[1] - 1)]
        left = np.maximum(total - T, 0)
        owner, j = _segments(left)
        self._carried = source[:, stream_index(owner, T + j)]
        self._remaining = left.tolist()
        out = {"token_ids": grid[[0, 2]], "targets": grid[[1, 3]], "mask": np.stack([mask, mask])}
        if self.chars is not None:
            out["char_ids"] = self.chars.lookup(grid[[4, 5]])
        return out

    def epochs_at(self, state: dict) -> float:
        """Fractional epochs consumed at a position returned by `state_dict()`."""
        return self.source.epochs_at(state["source"])

    def state_dict(self) -> dict:
        """JSON-serialisable position: source state plus each row's unfinished sentence."""
        rows = [
            {"words": words, "offset": len(words) + 1 - k} if k else None
            for words, k in zip(self._words, self._remaining)
        ]
        return {"source": self.source.state_dict(), "rows": rows, "exhausted": self._exhausted}

    def load_state_dict(self, state: dict) -> None:
        if len(state["rows"]) != self.batch_size:
            raise ValueError(f"data state has {len(state['rows'])} rows but batch_size is {self.batch_size}")
        self.source.load_state_dict(state["source"])
        self._exhausted = bool(state.get("exhausted", False))
        self._words = [None if row is None else list(row["words"]) for row in state["rows"]]
        self._set_rows([0 if row is None else int(row["offset"]) for row in state["rows"]])


class Prefetcher:
    """Produces items of an iterator on a background thread, `size` items ahead; `state_dict()`
    is the wrapped iterator's state as of the last item handed out."""

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
                self._put((item, self._iterator.state_dict() if self._state is not None else None))
                if self._stop.is_set():
                    return
            self._put((self._END, None))
        except BaseException as e:  # Re-raised in the consumer thread.
            self._put((e, None))

    def _put(self, item: tuple) -> None:
        """Queues `item` unless `close()` is called first."""
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
