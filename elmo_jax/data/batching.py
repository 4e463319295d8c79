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

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, CharIdCache
from elmo_jax.data.vocab import Vocabulary

Batch = dict[str, dict[str, np.ndarray]]


class _EncodedSentence:
    """A sentence's input/target ids (and char ids) for both directions, built once."""

    __slots__ = ("words", "fwd_in", "fwd_tgt", "bwd_in", "bwd_tgt", "fwd_chars", "bwd_chars")

    def __init__(self, words: list[str], vocab: Vocabulary, chars: CharIdCache | None):
        ids = vocab.encode(words)
        rev = ids[::-1]
        self.words = words
        self.fwd_in = np.concatenate([[vocab.bos_id], ids]).astype(np.int32)
        self.fwd_tgt = np.concatenate([ids, [vocab.eos_id]]).astype(np.int32)
        self.bwd_in = np.concatenate([[vocab.eos_id], rev]).astype(np.int32)
        self.bwd_tgt = np.concatenate([rev, [vocab.bos_id]]).astype(np.int32)
        if chars is not None:
            word_chars = chars.encode(words)
            self.fwd_chars = np.concatenate([chars(BOS_TOKEN)[None], word_chars])
            self.bwd_chars = np.concatenate([chars(EOS_TOKEN)[None], word_chars[::-1]])

    def __len__(self) -> int:
        return len(self.fwd_in)


class BiLMBatcher:
    """Turns a sentence source into fixed-shape bidirectional batches.

    Each batch is `{'forward'|'backward': {'token_ids' [B,T] int32, 'char_ids' [B,T,C] int32
    (char encoder only), 'targets' [B,T] int32, 'mask' [B,T] bool}}`.
    `state_dict()` captures the source position and every row's partial sentence.
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
        self.chars = CharIdCache(max_chars) if max_chars else None
        self._rows: list[_EncodedSentence | None] = [None] * batch_size
        self._offsets = [0] * batch_size
        self._exhausted = False

    def __iter__(self) -> Iterator[Batch]:
        return self

    def _next_sentence(self) -> _EncodedSentence | None:
        if self._exhausted:
            return None
        try:
            return _EncodedSentence(next(self.source), self.vocab, self.chars)
        except StopIteration:
            self._exhausted = True
            return None

    def __next__(self) -> Batch:
        B, T = self.batch_size, self.unroll_steps
        out = {
            d: {
                "token_ids": np.zeros((B, T), np.int32),
                "targets": np.zeros((B, T), np.int32),
                "mask": np.zeros((B, T), bool),
            }
            for d in ("forward", "backward")
        }
        if self.chars is not None:
            for d in out:
                out[d]["char_ids"] = np.zeros((B, T, self.chars.max_chars), np.int32)
        fwd, bwd = out["forward"], out["backward"]
        any_token = False
        for r in range(B):
            pos = 0
            while pos < T:
                sent = self._rows[r]
                if sent is None or self._offsets[r] >= len(sent):
                    sent = self._rows[r] = self._next_sentence()
                    self._offsets[r] = 0
                    if sent is None:
                        break
                k = self._offsets[r]
                n = min(len(sent) - k, T - pos)
                s, e = slice(pos, pos + n), slice(k, k + n)
                fwd["token_ids"][r, s] = sent.fwd_in[e]
                fwd["targets"][r, s] = sent.fwd_tgt[e]
                bwd["token_ids"][r, s] = sent.bwd_in[e]
                bwd["targets"][r, s] = sent.bwd_tgt[e]
                if self.chars is not None:
                    fwd["char_ids"][r, s] = sent.fwd_chars[e]
                    bwd["char_ids"][r, s] = sent.bwd_chars[e]
                fwd["mask"][r, s] = True
                bwd["mask"][r, s] = True
                self._offsets[r] = k + n
                pos += n
                any_token = True
        if not any_token:
            raise StopIteration
        return out

    def epochs_at(self, state: dict) -> float:
        """Fractional epochs consumed at a position returned by `state_dict()`."""
        return self.source.epochs_at(state["source"])

    def state_dict(self) -> dict:
        """JSON-serialisable position: source state plus each row's unfinished sentence."""
        rows = []
        for sent, k in zip(self._rows, self._offsets):
            rows.append(None if sent is None or k >= len(sent) else {"words": sent.words, "offset": k})
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
                self._rows[r], self._offsets[r] = None, 0
            else:
                self._rows[r] = _EncodedSentence(list(row["words"]), self.vocab, self.chars)
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
