"""The host cache of token embeddings: each word encoded once, trimmed char ids, capacity; the
table lookup of word-input biLMs."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from elmo_jax.data.chars import ID_SHIFT, PAD_CHAR, words_to_char_ids
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.inference.token_cache import TOKEN_CHUNK, TokenEmbeddingCache, WordTokenEmbeddings, bucket, needed_chars

PAD_ID = PAD_CHAR + ID_SHIFT


class CountingEncoder:
    """A stand-in char CNN: [sum of non-padding ids, their count, first id]; counts the words it encodes."""

    def __init__(self):
        self.encoded: list[int] = []
        self.shapes: list[tuple[int, int]] = []

    def __call__(self, char_ids: np.ndarray) -> np.ndarray:
        real = np.where(char_ids == PAD_ID, 0, char_ids)
        self.encoded.append(int((char_ids[:, 0] != 0).sum()))
        self.shapes.append(char_ids.shape)
        return np.stack([real.sum(1), (real != 0).sum(1), char_ids[:, 0]], axis=1).astype(np.float32)


def expected(words: list[str], max_chars: int = 50) -> np.ndarray:
    return CountingEncoder()(words_to_char_ids(words, max_chars))


def make_cache(capacity: int = 100) -> tuple[TokenEmbeddingCache, CountingEncoder]:
    encoder = CountingEncoder()
    return TokenEmbeddingCache(encoder, dim=3, max_chars=50, widest_filter=7, capacity=capacity), encoder


def test_bucket_doubles_so_a_range_of_sizes_meets_few_shapes():
    sizes = {bucket(n, 64) for n in range(0, 5000)}
    assert sorted(sizes) == [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    for n in range(65, 5000):
        assert n <= bucket(n, 64) < 2 * n
    assert [bucket(n, 1) for n in range(1, 10)] == [1, 2, 4, 4, 8, 8, 8, 8, 16]
    assert [bucket(n, 16) for n in (1, 16, 17, 32, 33)] == [16, 16, 32, 32, 64]


def _pooled(table: np.ndarray, kernels: list[np.ndarray], ids: np.ndarray) -> np.ndarray:
    """A NumPy char CNN: ids `[N, C]` -> the embedding `table`'s rows, valid convolutions by `kernels`
    (`[width, dim, channels]` each), the max over positions, concatenated `[N, sum(channels)]`."""
    x = table[ids]
    return np.concatenate(
        [np.stack([np.einsum("nkd,kdo->no", x[:, p : p + k.shape[0]], k) for p in range(ids.shape[1] - k.shape[0] + 1)]).max(0)
         for k in kernels], axis=1,
    )


@pytest.mark.parametrize("widths", [(1, 2, 3), (1, 7), (4,)])
def test_trimmed_char_ids_keep_every_max_over_positions(widths):
    """A NumPy char CNN (embedding, valid convolutions, max over positions) on the full and the
    trimmed ids agrees, for words short and long enough to fill all 50 characters."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(262, 3))
    kernels = [rng.normal(size=(w, 3, 4)) for w in widths]
    pooled = functools.partial(_pooled, table, kernels)

    def trimmed_char_ids(ids: np.ndarray, widest_filter: int) -> np.ndarray:  # Cut to the most any word needs.
        return ids[:, : int(needed_chars(ids, widest_filter).max())]

    for words in (["a", "cat", "<S>"], ["word", "x" * 30], ["y" * 60, "b"]):
        ids = words_to_char_ids(words, 50)
        trimmed = trimmed_char_ids(ids, max(widths))
        assert trimmed.shape[1] in (16, 32, 50)
        np.testing.assert_allclose(pooled(trimmed), pooled(ids), rtol=1e-12)
    assert trimmed_char_ids(words_to_char_ids(["a", "cat"], 50), 7).shape[1] == 16  # 5 chars + 7, rounded up
    assert trimmed_char_ids(words_to_char_ids(["y" * 60], 50), 7).shape[1] == 50


@pytest.mark.parametrize("widths", [(1, 2, 3), (1, 7), (4,)])
def test_trimmed_rows_of_a_word_id_and_char_ids_keep_every_max_over_positions(widths):
    """ELMoForManyLangs' rows `[word id, <bow> chars <eow> pad...]`, its pad any id: the word id is
    kept, and the NumPy char CNN of the columns after it agrees on the full and the trimmed rows."""
    rng = np.random.default_rng(1)
    table = rng.normal(size=(40, 3))
    kernels = [rng.normal(size=(w, 3, 4)) for w in widths]
    pooled = functools.partial(_pooled, table, kernels)

    pad, bow, eow = 5, 1, 2
    rows = np.full((4, 51), pad)
    for row, (word_id, n_chars) in enumerate([(7, 1), (pad, 4), (30, 12), (9, 48)]):  # A word id equal to pad, too.
        rows[row, 0], rows[row, 1], rows[row, 2 + n_chars] = word_id, bow, eow
        rows[row, 2 : 2 + n_chars] = rng.integers(10, 40, n_chars)
    needed = needed_chars(rows, max(widths))
    assert needed.tolist() == [min(51, bucket(4 + max(widths), 16)), min(51, bucket(7 + max(widths), 16)),
                               min(51, bucket(15 + max(widths), 16)), 51]
    for row, n in enumerate(needed):
        np.testing.assert_allclose(pooled(rows[row : row + 1, 1:n]), pooled(rows[row : row + 1, 1:]), rtol=1e-12)


def test_each_word_is_encoded_once():
    cache, encoder = make_cache()
    words = ["the", "cat", "the", "<S>"]
    np.testing.assert_array_equal(cache.lookup(words), expected(words))
    assert sum(encoder.encoded) == 3 and len(cache) == 3
    again = ["cat", "dog", "the"]
    np.testing.assert_array_equal(cache.lookup(again), expected(again))
    assert sum(encoder.encoded) == 4  # only "dog" is new


def test_words_beyond_capacity_are_encoded_each_time():
    cache, encoder = make_cache(capacity=2)
    words = ["a", "b", "c", "d", "c"]
    np.testing.assert_array_equal(cache.lookup(words), expected(words))
    assert len(cache) == 2
    np.testing.assert_array_equal(cache.lookup(["d", "a"]), expected(["d", "a"]))
    assert sum(encoder.encoded) == 4 + 1  # "d" again, "a" held


def test_vocabulary_is_held_beyond_capacity():
    cache, encoder = make_cache(capacity=1)
    cache.add(["the", "cat", "the", "sat"])
    assert len(cache) == 3 and sum(encoder.encoded) == 3
    np.testing.assert_array_equal(cache.lookup(["sat", "new", "cat"]), expected(["sat", "new", "cat"]))
    assert len(cache) == 4 and sum(encoder.encoded) == 4  # one more word fits: the capacity


def test_encode_pads_to_few_shapes_and_chunks():
    cache, encoder = make_cache()
    words = [f"w{i}" for i in range(5000)]
    np.testing.assert_array_equal(cache.encode(words), expected(words))
    # 19 calls of 256 words and 136 padded to 256; the characters trimmed to the longest word
    # (w4999: 5 + BOW/EOW) + the widest filter (7), rounded up to 16.
    assert TOKEN_CHUNK == 256 and encoder.encoded == [256] * 19 + [136] and len(cache) == 0
    assert encoder.shapes == [(256, 16)] * 20


def test_encode_groups_words_by_trimmed_length():
    """Short words are not padded to the longest word's characters: one call per trimmed length
    (16, 32, 64, ..., at most max_chars), the output in the words' order."""
    cache, encoder = make_cache()
    words = ["a", "y" * 20, "cat", "z" * 60, "<S>", "y" * 12]
    np.testing.assert_array_equal(cache.encode(words), expected(words))
    # 1 + 2 + 7 -> 16 (a, cat, <S>); 12 + 2 + 7 and 20 + 2 + 7 -> 32; the 48-byte cut + 2 -> 64, cut to 50.
    assert sorted(encoder.shapes) == [(256, 16), (256, 32), (256, 50)]
    assert sorted(encoder.encoded) == [1, 2, 3]
    assert cache.encode([]).shape == (0, 3)


def test_an_encoder_that_trims_itself_gets_every_word_at_once_untrimmed():
    encoder = CountingEncoder()
    cache = TokenEmbeddingCache(encoder, dim=3, max_chars=50, widest_filter=7, by_length=False)
    words = ["a", "y" * 20, "cat", "z" * 60, "<S>"]
    np.testing.assert_array_equal(cache.lookup(words), expected(words))
    np.testing.assert_array_equal(cache.lookup(["cat", "b"]), expected(["cat", "b"]))
    assert encoder.shapes == [(5, 50), (1, 50)] and encoder.encoded == [5, 1]  # New words only, unpadded.
    assert cache.encode([]).shape == (0, 3)


def test_negative_capacity_is_an_error():
    with pytest.raises(ValueError, match="capacity"):
        make_cache(capacity=-1)


def test_word_token_embeddings_are_rows_by_vocabulary_id():
    """Unknown words take <UNK>'s row; ids go to the table padded to few shapes."""
    table = np.arange(6 * 2, dtype=np.float32).reshape(6, 2)
    calls: list[int] = []

    def embed(ids: np.ndarray) -> np.ndarray:
        calls.append(len(ids))
        return table[ids]

    tokens = WordTokenEmbeddings(embed, Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat", "sat"]))
    words = ["the", "dog", "<S>", "cat", "the", "</S>"]
    np.testing.assert_array_equal(tokens.lookup(words), table[[3, 2, 0, 4, 3, 1]])
    np.testing.assert_array_equal(tokens.encode([]), np.zeros((0, 2)))
    assert tokens.encode([f"w{i}" for i in range(100)]).shape == (100, 2)
    assert calls == [64, 64, 128]

