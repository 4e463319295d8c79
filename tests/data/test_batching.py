"""BiLMBatcher and Prefetcher against an independent, stream-based reference (bilm-tf semantics)."""

import collections
import itertools
import json
import threading
import time

import numpy as np
import pytest

from elmo_jax.data.batching import BiLMBatcher, Prefetcher
from elmo_jax.data.chars import word_to_char_ids
from elmo_jax.data.sources import InMemorySource, TextFileSource
from elmo_jax.data.vocab import Vocabulary

BOS, EOS = "<S>", "</S>"

SENTENCES = [
    ["the", "cat", "sat"],
    ["a"],
    ["the", "dog", "ran", "far", "away", "today"],
    ["oov1", "the", "café"],  # oov1 and café are not in the vocabulary
    ["cat", "dog"],
    ["x" * 60, "a", "the", "the", "cat", "sat", "on", "the", "mat", "again", "and", "again"],
    ["sat"],
    ["dog", "oov2"],
    ["on", "a", "mat"],
]

VOCAB = Vocabulary.build([s for s in SENTENCES if "oov1" not in s and "oov2" not in s and "x" * 60 not in s])


def _positions(sentence):
    """Per-position (fwd input, fwd target, bwd input, bwd target) tokens of one sentence."""
    rev = sentence[::-1]
    return list(zip([BOS] + sentence, sentence + [EOS], [EOS] + rev, rev + [BOS]))


def reference_batches(sentences, vocab, B, T, max_chars=50):
    """Expected batches, built from B concatenated token streams.

    Sentences are handed to rows in the order the rows need them: for batch b, row r takes new
    sentences while its stream holds fewer than (b + 1) * T positions.
    """
    pending = iter(sentences)
    exhausted = False
    streams = [[] for _ in range(B)]
    batches = []
    b = 0
    while True:
        for r in range(B):
            while len(streams[r]) < (b + 1) * T and not exhausted:
                try:
                    streams[r].extend(_positions(next(pending)))
                except StopIteration:
                    exhausted = True
        windows = [streams[r][b * T:(b + 1) * T] for r in range(B)]
        if not any(windows):
            return batches
        batch = {}
        for d, (i_in, i_tgt) in (("forward", (0, 1)), ("backward", (2, 3))):
            tok = np.zeros((B, T), np.int32)
            tgt = np.zeros((B, T), np.int32)
            mask = np.zeros((B, T), bool)
            chars = np.zeros((B, T, max_chars or 1), np.int32)
            in_words = [[None] * T for _ in range(B)]
            for r, window in enumerate(windows):
                for t, pos in enumerate(window):
                    tok[r, t] = vocab.word_to_id(pos[i_in])
                    tgt[r, t] = vocab.word_to_id(pos[i_tgt])
                    mask[r, t] = True
                    in_words[r][t] = pos[i_in]
                    if max_chars:
                        chars[r, t] = word_to_char_ids(pos[i_in], max_chars)
            batch[d] = {"token_ids": tok, "targets": tgt, "mask": mask, "words": in_words}
            if max_chars:
                batch[d]["char_ids"] = chars
        batches.append(batch)
        b += 1


def by_direction(batch):
    """A batch `{field: [2, B, T, ...]}` as `{'forward'|'backward': {field: [B, T, ...]}}`, the
    reference's layout; every field must have the direction axis."""
    assert all(v.shape[0] == 2 for v in batch.values()), {k: v.shape for k, v in batch.items()}
    return {d: {k: v[i] for k, v in batch.items()} for i, d in enumerate(("forward", "backward"))}


def assert_batch_equal(got, want, max_chars=50):
    got = by_direction(got)
    for d in ("forward", "backward"):
        g, w = got[d], want[d]
        keys = {"token_ids", "targets", "mask"} | ({"char_ids"} if max_chars else set())
        assert set(g) == keys, d
        B, T = w["mask"].shape
        assert g["token_ids"].shape == (B, T) and g["token_ids"].dtype == np.int32
        assert g["targets"].shape == (B, T) and g["targets"].dtype == np.int32
        assert g["mask"].shape == (B, T) and g["mask"].dtype == bool
        np.testing.assert_array_equal(g["mask"], w["mask"], err_msg=d)
        m = w["mask"]
        np.testing.assert_array_equal(g["token_ids"][m], w["token_ids"][m], err_msg=d)
        np.testing.assert_array_equal(g["targets"][m], w["targets"][m], err_msg=d)
        # Padding must still be valid ids (the model looks them up before masking).
        for k in ("token_ids", "targets"):
            assert g[k].min() >= 0 and g[k].max() < len(VOCAB)
        if max_chars:
            assert g["char_ids"].shape == (B, T, max_chars) and g["char_ids"].dtype == np.int32
            np.testing.assert_array_equal(g["char_ids"][m], w["char_ids"][m], err_msg=d)
            # Padding positions are "no token": all zeros (the zero row of the char embedding).
            assert not g["char_ids"][~m].any()
            # char_ids rows are exactly word_to_char_ids of the input tokens.
            for r in range(B):
                for t in range(T):
                    if m[r, t]:
                        word = w["words"][r][t]
                        np.testing.assert_array_equal(g["char_ids"][r, t], word_to_char_ids(word, max_chars))


def _source(num_epochs=1, shuffle=False, seed=0):
    return InMemorySource(SENTENCES, shuffle=shuffle, seed=seed, num_epochs=num_epochs)


def _batches_equal(a, b):
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_reference_semantics_by_hand():
    """Sanity-check the reference itself on a case worked out by hand (B=1, T=4)."""
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c"])
    ref = reference_batches([["a", "b"], ["c"]], vocab, B=1, T=4, max_chars=None)
    assert len(ref) == 2
    # Streams (ids: <S>=0 </S>=1 a=3 b=4 c=5), windows of 4 split after the 4th position:
    #   fwd inputs  <S> a b <S> | c      targets  a b </S> c | </S>
    #   bwd inputs  </S> b a </S> | c    targets  b a <S> c  | <S>
    np.testing.assert_array_equal(ref[0]["forward"]["token_ids"], [[0, 3, 4, 0]])
    np.testing.assert_array_equal(ref[0]["forward"]["targets"], [[3, 4, 1, 5]])
    np.testing.assert_array_equal(ref[0]["backward"]["token_ids"], [[1, 4, 3, 1]])
    np.testing.assert_array_equal(ref[0]["backward"]["targets"], [[4, 3, 0, 5]])
    np.testing.assert_array_equal(ref[1]["forward"]["token_ids"][0, :1], [5])
    np.testing.assert_array_equal(ref[1]["forward"]["targets"][0, :1], [1])
    np.testing.assert_array_equal(ref[1]["backward"]["token_ids"][0, :1], [5])
    np.testing.assert_array_equal(ref[1]["backward"]["targets"][0, :1], [0])
    np.testing.assert_array_equal(ref[1]["forward"]["mask"], [[True, False, False, False]])

    got = [by_direction(b) for b in BiLMBatcher(InMemorySource([["a", "b"], ["c"]], shuffle=False), vocab, 1, 4, None)]
    assert len(got) == 2
    np.testing.assert_array_equal(got[0]["forward"]["token_ids"], [[0, 3, 4, 0]])
    np.testing.assert_array_equal(got[0]["forward"]["targets"], [[3, 4, 1, 5]])
    np.testing.assert_array_equal(got[0]["backward"]["token_ids"], [[1, 4, 3, 1]])
    np.testing.assert_array_equal(got[0]["backward"]["targets"], [[4, 3, 0, 5]])
    np.testing.assert_array_equal(got[1]["forward"]["mask"], [[True, False, False, False]])
    assert got[1]["forward"]["token_ids"][0, 0] == 5 and got[1]["forward"]["targets"][0, 0] == 1
    assert got[1]["backward"]["token_ids"][0, 0] == 5 and got[1]["backward"]["targets"][0, 0] == 0


@pytest.mark.parametrize("B,T", [(1, 1), (1, 4), (2, 3), (3, 5), (4, 7), (2, 13), (12, 20)])
def test_batches_match_reference(B, T):
    got = list(BiLMBatcher(_source(), VOCAB, B, T))
    want = reference_batches(SENTENCES, VOCAB, B, T)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_batch_equal(g, w)


def test_batches_match_reference_shuffled_multi_epoch():
    order = list(_source(num_epochs=3, shuffle=True, seed=4))
    got = list(BiLMBatcher(_source(num_epochs=3, shuffle=True, seed=4), VOCAB, 3, 4))
    want = reference_batches(order, VOCAB, 3, 4)
    assert len(got) == len(want) > 10
    for g, w in zip(got, want):
        assert_batch_equal(g, w)


def test_eos_never_forward_input_and_bos_never_backward_input():
    for batch in BiLMBatcher(_source(), VOCAB, 3, 4):
        f, b = by_direction(batch).values()
        assert not (f["token_ids"][f["mask"]] == VOCAB.eos_id).any()
        assert not (f["targets"][f["mask"]] == VOCAB.bos_id).any()
        assert not (b["token_ids"][b["mask"]] == VOCAB.bos_id).any()
        assert not (b["targets"][b["mask"]] == VOCAB.eos_id).any()
        np.testing.assert_array_equal(f["mask"], b["mask"])


@pytest.mark.parametrize("B,T", [(1, 4), (2, 5), (3, 4), (5, 2)])
def test_every_target_exactly_once_and_stop(B, T):
    batcher = BiLMBatcher(_source(), VOCAB, B, T)
    batches = [by_direction(b) for b in batcher]
    n_positions = sum(len(s) + 1 for s in SENTENCES)
    assert n_positions == 42
    for d in ("forward", "backward"):
        total = sum(int(b[d]["mask"].sum()) for b in batches)
        assert total == n_positions
        got = collections.Counter(int(t) for b in batches for t in b[d]["targets"][b[d]["mask"]])
        expected = collections.Counter(
            VOCAB.word_to_id(w) for s in SENTENCES for w in s + [EOS if d == "forward" else BOS]
        )
        assert got == expected
    # 42 positions in all: with these shapes the final batch is partially masked, and every
    # batch holds at least one real position.
    assert all(b["forward"]["mask"].any() for b in batches)
    assert not batches[-1]["forward"]["mask"].all()
    assert batches[0]["forward"]["mask"].all()
    # Masks are prefixes per row: real positions never follow padding within a row.
    for b in batches:
        m = b["forward"]["mask"].astype(int)
        assert (np.diff(m, axis=1) <= 0).all()
    with pytest.raises(StopIteration):
        next(batcher)
    with pytest.raises(StopIteration):
        next(batcher)


def test_infinite_source_batches_are_full():
    batcher = BiLMBatcher(_source(num_epochs=None, shuffle=True), VOCAB, 4, 6)
    for batch in itertools.islice(batcher, 60):
        assert batch["mask"].all()


def test_max_chars_none_omits_char_ids():
    got = list(BiLMBatcher(_source(), VOCAB, 2, 5, max_chars=None))
    want = reference_batches(SENTENCES, VOCAB, 2, 5, max_chars=None)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert "char_ids" not in g
        assert_batch_equal(g, w, max_chars=None)


def test_other_max_chars():
    got = list(BiLMBatcher(_source(), VOCAB, 2, 5, max_chars=10))
    want = reference_batches(SENTENCES, VOCAB, 2, 5, max_chars=10)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_batch_equal(g, w, max_chars=10)


def _state_round_trip(state):
    text = json.dumps(state)
    restored = json.loads(text)
    assert restored == state
    return restored


@pytest.mark.parametrize("B,T,epochs", [(2, 3, 1), (3, 4, 2), (1, 5, 2)])
def test_state_dict_resumes_exactly(B, T, epochs):
    make = lambda: _source(num_epochs=epochs, shuffle=True, seed=11)
    full = list(BiLMBatcher(make(), VOCAB, B, T))
    assert len(full) > 4
    for stop in range(len(full) + 1):
        batcher = BiLMBatcher(make(), VOCAB, B, T)
        head = list(itertools.islice(batcher, stop))
        state = _state_round_trip(batcher.state_dict())
        fresh = BiLMBatcher(make(), VOCAB, B, T)
        fresh.load_state_dict(state)
        tail = list(fresh)
        assert len(head) + len(tail) == len(full), stop
        for i, (g, w) in enumerate(zip(head + tail, full)):
            assert _batches_equal(g, w), (stop, i)
        # The original also continues identically.
        cont = list(batcher)
        assert len(cont) == len(tail)
        assert all(_batches_equal(a, b) for a, b in zip(cont, tail))


def test_state_dict_resumes_with_text_source(tmp_path):
    for i, chunk in enumerate([SENTENCES[:4], SENTENCES[4:6], SENTENCES[6:]]):
        (tmp_path / f"part{i}.txt").write_text("".join(" ".join(s) + "\n" for s in chunk), encoding="utf-8")
    pattern = str(tmp_path / "part*.txt")
    make = lambda: TextFileSource(pattern, shuffle=True, seed=3, num_epochs=2)
    full = list(BiLMBatcher(make(), VOCAB, 2, 4))
    want = reference_batches(list(make()), VOCAB, 2, 4)
    assert len(full) == len(want)
    for g, w in zip(full, want):
        assert_batch_equal(g, w)
    for stop in (1, len(full) // 2, len(full) - 1):
        batcher = BiLMBatcher(make(), VOCAB, 2, 4)
        list(itertools.islice(batcher, stop))
        fresh = BiLMBatcher(make(), VOCAB, 2, 4)
        fresh.load_state_dict(_state_round_trip(batcher.state_dict()))
        tail = list(fresh)
        assert len(tail) == len(full) - stop
        assert all(_batches_equal(a, b) for a, b in zip(tail, full[stop:]))


def _write_shards(root, n_files=3, lines_per_file=40, seed=0):
    """Shards of random sentences over VOCAB's words plus out-of-vocabulary words."""
    rng = np.random.default_rng(seed)
    words = VOCAB.words[3:] + ["oovA", "oovB", "naïveOOV"]
    for f in range(n_files):
        lines = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(lines_per_file)]
        (root / f"shard-{f}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root / "shard-*.txt")


def test_resumes_exactly_on_sharded_text_with_shuffle_buffer(tmp_path):
    """Interrupted anywhere (mid-shard, mid-block, mid-sentence), a resumed batcher yields
    exactly the batches of an uninterrupted one, over several passes."""
    pattern = _write_shards(tmp_path)
    B, T = 3, 7
    make = lambda: BiLMBatcher(
        TextFileSource(pattern, shuffle=True, seed=5, num_epochs=2, shuffle_buffer=16, max_sentence_tokens=6),
        VOCAB, B, T,
    )
    full = list(make())
    want = reference_batches(
        list(TextFileSource(pattern, shuffle=True, seed=5, num_epochs=2, shuffle_buffer=16, max_sentence_tokens=6)),
        VOCAB, B, T,
    )
    assert len(full) == len(want) > 40
    for g, w in zip(full, want):
        assert_batch_equal(g, w)
    for stop in range(0, len(full) + 1, 3):
        batcher = make()
        head = list(itertools.islice(batcher, stop))
        state = _state_round_trip(batcher.state_dict())
        fresh = make()
        fresh.load_state_dict(state)
        tail = list(fresh)
        assert len(head) + len(tail) == len(full), stop
        assert all(_batches_equal(a, b) for a, b in zip(head + tail, full)), stop


def test_epochs_at_with_shuffle_buffer(tmp_path):
    pattern = _write_shards(tmp_path)
    batcher = BiLMBatcher(TextFileSource(pattern, shuffle=True, seed=1, num_epochs=3, shuffle_buffer=10), VOCAB, 2, 5)
    epochs = [batcher.epochs_at(batcher.state_dict()) for _ in batcher]
    assert all(b >= a for a, b in zip(epochs, epochs[1:]))
    assert epochs[len(epochs) // 3] == pytest.approx(1.0, abs=0.1)
    assert epochs[-1] == pytest.approx(3.0)


def test_char_ids_stay_exact_when_out_of_vocabulary_rows_are_recycled():
    sentences = [[f"rare{i}", "the", f"rare{i + 1}", "cat"] for i in range(30)]
    batcher = BiLMBatcher(InMemorySource(sentences, shuffle=False), VOCAB, 2, 3)
    batcher.chars.max_other_words = 3
    got = list(batcher)
    want = reference_batches(sentences, VOCAB, 2, 3)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_batch_equal(g, w)
    assert len(batcher.chars._other_index) <= 3 + 2 * 3  # Bounded: the limit plus one batch's words.


def test_load_state_dict_wrong_batch_size():
    batcher = BiLMBatcher(_source(), VOCAB, 3, 4)
    next(batcher)
    state = batcher.state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        BiLMBatcher(_source(), VOCAB, 2, 4).load_state_dict(state)


# ---------------------------------------------------------------- Prefetcher


def test_prefetcher_same_batches():
    raw = list(BiLMBatcher(_source(num_epochs=2, shuffle=True), VOCAB, 3, 4))
    pre = Prefetcher(BiLMBatcher(_source(num_epochs=2, shuffle=True), VOCAB, 3, 4), size=2)
    got = list(pre)
    assert len(got) == len(raw)
    assert all(_batches_equal(a, b) for a, b in zip(got, raw))
    with pytest.raises(StopIteration):
        next(pre)
    with pytest.raises(StopIteration):
        next(pre)


def test_prefetcher_plain_iterator():
    pre = Prefetcher(iter(range(20)), size=3)
    assert pre.state_dict() is None
    assert list(pre) == list(range(20))
    assert pre.state_dict() is None


class _Failing:
    def __init__(self, n):
        self.i, self.n = 0, n

    def __iter__(self):
        return self

    def __next__(self):
        if self.i == self.n:
            raise RuntimeError("boom at item 3")
        self.i += 1
        return self.i


def test_prefetcher_propagates_exception():
    pre = Prefetcher(_Failing(3), size=2)
    assert [next(pre), next(pre), next(pre)] == [1, 2, 3]
    with pytest.raises(RuntimeError, match="boom at item 3"):
        next(pre)


class _CountingSource:
    """Wraps a source and counts sentences pulled (thread-safe enough for polling an int)."""

    def __init__(self, source):
        self.source, self.pulled = source, 0

    def __iter__(self):
        return self

    def __next__(self):
        s = next(self.source)
        self.pulled += 1
        return s

    def state_dict(self):
        return self.source.state_dict()

    def load_state_dict(self, state):
        self.source.load_state_dict(state)


@pytest.mark.parametrize("consumed", [0, 1, 3, 6])
def test_prefetcher_state_is_last_item_handed_out(consumed):
    make = lambda: _source(num_epochs=2, shuffle=True, seed=5)
    B, T = 2, 3
    full = list(BiLMBatcher(make(), VOCAB, B, T))
    assert len(full) > consumed + 4

    counting = _CountingSource(make())
    batcher = BiLMBatcher(counting, VOCAB, B, T)
    pre = Prefetcher(batcher, size=2)
    head = [next(pre) for _ in range(consumed)]
    # Sentences needed for the batches handed out so far (a fresh run, counted the same way).
    probe = _CountingSource(make())
    list(itertools.islice(BiLMBatcher(probe, VOCAB, B, T), consumed))
    needed = probe.pulled
    # Wait for the background thread to run ahead of the consumer.
    deadline = time.monotonic() + 10
    while counting.pulled <= needed and time.monotonic() < deadline:
        time.sleep(0.005)
    assert counting.pulled > needed, "prefetch thread did not run ahead"

    state = _state_round_trip(pre.state_dict())
    assert all(_batches_equal(a, b) for a, b in zip(head, full))
    fresh = BiLMBatcher(make(), VOCAB, B, T)
    fresh.load_state_dict(state)
    tail = list(fresh)
    assert len(tail) == len(full) - consumed
    assert all(_batches_equal(a, b) for a, b in zip(tail, full[consumed:]))
    # The prefetcher itself continues with the same batches.
    rest = list(pre)
    assert len(rest) == len(tail)
    assert all(_batches_equal(a, b) for a, b in zip(rest, tail))
    pre.close()


def test_prefetcher_runs_on_another_thread():
    seen = []

    class Recorder:
        def __init__(self):
            self.it = iter(range(5))

        def __iter__(self):
            return self

        def __next__(self):
            seen.append(threading.get_ident())
            return next(self.it)

    assert list(Prefetcher(Recorder(), size=1)) == list(range(5))
    assert seen and threading.get_ident() not in seen
