"""Character ids: bilm-tf/AllenNLP layout, every id shifted by +1 (DESIGN.md, model contract)."""

import numpy as np
import pytest

from elmo_jax.data import chars
from elmo_jax.data.chars import CharIdCache, CharIdTable, word_to_char_ids, words_to_char_ids

# Shifted (+1) ids, written out by hand rather than taken from the module.
BOS = 257  # 256 + 1
EOS = 258  # 257 + 1
BOW = 259  # 258 + 1
EOW = 260  # 259 + 1
PAD = 261  # 260 + 1


def _expected(core, max_chars=50):
    """`core` is the full list of shifted ids before padding."""
    return np.array(core + [PAD] * (max_chars - len(core)), dtype=np.int32)


def test_constants_match_design():
    assert (chars.BOS_CHAR, chars.EOS_CHAR, chars.BOW_CHAR, chars.EOW_CHAR, chars.PAD_CHAR) == (
        256, 257, 258, 259, 260)
    assert chars.ID_SHIFT == 1
    assert chars.N_CHARACTERS == 262
    assert (chars.BOS_TOKEN, chars.EOS_TOKEN, chars.UNK_TOKEN) == ("<S>", "</S>", "<UNK>")


def test_ascii_word():
    ids = word_to_char_ids("cat")
    # 'c' = 99, 'a' = 97, 't' = 116; shifted by one.
    expected = _expected([BOW, 100, 98, 117, EOW])
    assert ids.dtype == np.int32
    assert ids.shape == (50,)
    np.testing.assert_array_equal(ids, expected)


def test_single_char_and_digits_and_punct():
    np.testing.assert_array_equal(word_to_char_ids("A"), _expected([BOW, 66, EOW]))
    np.testing.assert_array_equal(word_to_char_ids("0."), _expected([BOW, 49, 47, EOW]))


def test_no_zero_ids_for_real_words():
    # 0 is reserved for "no token": a real word never contains it, even for byte 0x00.
    ids = word_to_char_ids("a\x00b")
    np.testing.assert_array_equal(ids, _expected([BOW, 98, 1, 99, EOW]))
    assert ids.min() >= 1


def test_special_tokens():
    np.testing.assert_array_equal(word_to_char_ids("<S>"), _expected([BOW, BOS, EOW]))
    np.testing.assert_array_equal(word_to_char_ids("</S>"), _expected([BOW, EOS, EOW]))
    # Only the exact tokens are special; <UNK> and look-alikes are plain bytes.
    # '<' = 60, 'S' = 83, '>' = 62
    np.testing.assert_array_equal(word_to_char_ids("<S"), _expected([BOW, 61, 84, EOW]))
    unk = word_to_char_ids("<UNK>")
    np.testing.assert_array_equal(unk, _expected([BOW, 61, 86, 79, 76, 63, EOW]))


def test_special_tokens_other_max_chars():
    np.testing.assert_array_equal(word_to_char_ids("<S>", max_chars=5), [BOW, BOS, EOW, PAD, PAD])
    np.testing.assert_array_equal(word_to_char_ids("</S>", max_chars=3), [BOW, EOS, EOW])


def test_multibyte_utf8_word():
    # 'é' = C3 A9, '€' = E2 82 AC, '😀' = F0 9F 98 80.
    ids = word_to_char_ids("é€😀")
    expected = _expected([BOW, 0xC3 + 1, 0xA9 + 1, 0xE2 + 1, 0x82 + 1, 0xAC + 1,
                          0xF0 + 1, 0x9F + 1, 0x98 + 1, 0x80 + 1, EOW])
    np.testing.assert_array_equal(ids, expected)


def test_truncation_to_48_bytes():
    word = "abcdefghij" * 6  # 60 bytes
    ids = word_to_char_ids(word, max_chars=50)
    expected = np.array([BOW] + [ord(c) + 1 for c in word[:48]] + [EOW], dtype=np.int32)
    assert expected.shape == (50,)
    np.testing.assert_array_equal(ids, expected)
    # No padding remains; the 48th byte is the last one kept, bytes 49..60 are dropped.
    assert PAD not in ids
    assert ids[-1] == EOW and ids[-2] == ord(word[47]) + 1


def test_exactly_48_and_49_bytes():
    w48 = "x" * 48
    np.testing.assert_array_equal(word_to_char_ids(w48), [BOW] + [ord("x") + 1] * 48 + [EOW])
    w47 = "x" * 47
    np.testing.assert_array_equal(word_to_char_ids(w47), [BOW] + [ord("x") + 1] * 47 + [EOW, PAD])
    w49 = "y" * 49
    np.testing.assert_array_equal(word_to_char_ids(w49), [BOW] + [ord("y") + 1] * 48 + [EOW])


def test_truncation_counts_bytes_not_characters():
    # 30 two-byte characters = 60 bytes; only the first 48 bytes (24 characters) survive.
    word = "é" * 30
    ids = word_to_char_ids(word)
    np.testing.assert_array_equal(ids, [BOW] + [0xC4, 0xAA] * 24 + [EOW])


def test_small_max_chars():
    np.testing.assert_array_equal(word_to_char_ids("hello", max_chars=4), [BOW, 105, 102, EOW])
    with pytest.raises(ValueError):
        word_to_char_ids("hello", max_chars=2)


def test_cache_returns_same_arrays():
    cache = CharIdCache(max_chars=50)
    for word in ["the", "<S>", "</S>", "naïve", "z" * 60, "the"]:
        np.testing.assert_array_equal(cache(word), word_to_char_ids(word, 50))
    # Memoised: the second lookup returns the cached object.
    assert cache("the") is cache("the")


def test_cache_encode():
    cache = CharIdCache(max_chars=50)
    words = ["<S>", "a", "bb", "</S>"]
    enc = cache.encode(words)
    assert enc.shape == (4, 50)
    assert enc.dtype == np.int32
    np.testing.assert_array_equal(enc, np.stack([word_to_char_ids(w) for w in words]))
    empty = cache.encode([])
    assert empty.shape == (0, 50)
    assert empty.dtype == np.int32
    assert CharIdCache(max_chars=7).encode([]).shape == (0, 7)
    assert CharIdCache(max_chars=7).encode(["ab"]).shape == (1, 7)


def test_cache_max_entries_bounded_but_correct():
    cache = CharIdCache(max_chars=50, max_entries=2)
    words = ["a", "b", "c", "d"]
    for w in words:
        np.testing.assert_array_equal(cache(w), word_to_char_ids(w))
    assert len(cache._cache) == 2
    np.testing.assert_array_equal(cache("d"), word_to_char_ids("d"))


def test_cache_encode_mixes_cached_new_and_repeated_words_within_its_bound():
    cache = CharIdCache(max_chars=12, max_entries=3)
    cache("old")
    words = ["new", "old", "</S>", "new", "over", "naïve", "x" * 20, "over"]
    np.testing.assert_array_equal(cache.encode(words), np.stack([word_to_char_ids(w, 12) for w in words]))
    assert set(cache._cache) == {"old", "new", "</S>"}  # The first new words, up to max_entries.


TABLE_VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "naïve"]


def test_table_rows_and_lookup_match_word_to_char_ids():
    table = CharIdTable(TABLE_VOCAB, unk_id=2, max_chars=12)
    words = ["the", "<S>", "dog", "</S>", "<UNK>", "naïve", "dog", "zebra" * 4]
    ids = np.array([TABLE_VOCAB.index(w) if w in TABLE_VOCAB else 2 for w in words], np.int32)
    rows = table.rows(words, ids)
    assert rows.dtype == np.int32
    # Vocabulary words use row id + 1 (the literal <UNK> included); unknown words get rows after.
    np.testing.assert_array_equal(rows[[0, 1, 3, 4, 5]], ids[[0, 1, 3, 4, 5]] + 1)
    assert rows[2] == rows[6] == 7 and rows[7] == 8
    got = table.lookup(np.stack([rows, np.zeros_like(rows)]))
    assert got.shape == (2, len(words), 12) and got.dtype == np.int32
    for i, w in enumerate(words):
        np.testing.assert_array_equal(got[0, i], word_to_char_ids(w, 12))
    assert not got[1].any()  # Row 0: "no token".


def test_table_forgets_other_words_when_full():
    table = CharIdTable(TABLE_VOCAB, unk_id=2, max_chars=10, max_other_words=2)
    rows = table.rows(["a", "b"], np.array([2, 2], np.int32))
    assert table.other_words_full
    table.forget_other_words()
    assert not table.other_words_full
    rows = table.rows(["c", "the", "d"], np.array([2, 3, 2], np.int32))
    np.testing.assert_array_equal(rows, [7, 4, 8])  # Recycled rows.
    got = table.lookup(rows)
    for i, w in enumerate(["c", "the", "d"]):
        np.testing.assert_array_equal(got[i], word_to_char_ids(w, 10))
    # Beyond its first capacity the out-of-vocabulary table grows.
    many = [f"w{i}" for i in range(3000)]
    rows = table.rows(many, np.full(3000, 2, np.int32))
    np.testing.assert_array_equal(table.lookup(rows)[2999], word_to_char_ids("w2999", 10))


def test_words_to_char_ids_many_at_once():
    words = ["cat", "<S>", "", "é€😀", "x" * 60, "</S>", "A", "a\ud800b", "<UNK>"]
    got = words_to_char_ids(words, 10)
    assert got.shape == (len(words), 10) and got.dtype == np.int32
    # Written out by hand for a few, so that no word's bytes leak into its neighbours.
    np.testing.assert_array_equal(got[0], _expected([BOW, 100, 98, 117, EOW], 10))
    np.testing.assert_array_equal(got[1], _expected([BOW, BOS, EOW], 10))
    np.testing.assert_array_equal(got[2], _expected([BOW, EOW], 10))
    np.testing.assert_array_equal(got[4], [BOW] + [ord("x") + 1] * 8 + [EOW])
    np.testing.assert_array_equal(got[5], _expected([BOW, EOS, EOW], 10))
    np.testing.assert_array_equal(got[6], _expected([BOW, 66, EOW], 10))
    np.testing.assert_array_equal(got[7], _expected([BOW, 98, 99, EOW], 10))  # Lone surrogate dropped.
    for i, w in enumerate(words):
        np.testing.assert_array_equal(got[i], word_to_char_ids(w, 10))
    assert words_to_char_ids([], 7).shape == (0, 7)


NARROWED_WORDS = ["a", "the", "<S>", "</S>", "<UNK>", "abcdefghijklmnopqr", "abcdefghijklmnopqrs",
                  "a" * 60, "naïve-café-übermäßig-größer", "日本語のとても長い単語です", ""]


@pytest.mark.parametrize("max_chars", [3, 4, 12, 20, 49, 50])
def test_narrowed_ids_spell_every_word_as_its_own_width(max_chars):
    wide = words_to_char_ids(NARROWED_WORDS, 50)
    np.testing.assert_array_equal(chars.narrow_char_ids(wide, max_chars), words_to_char_ids(NARROWED_WORDS, max_chars))


def test_narrowed_ids_keep_padding_tokens_and_leading_shape():
    wide = np.zeros((2, 3, 50), np.int32)
    wide[0, :2] = words_to_char_ids(["ab", "a" * 30], 50)
    narrow = chars.narrow_char_ids(wide, 20)
    want = np.zeros((2, 3, 20), np.int32)
    want[0, :2] = words_to_char_ids(["ab", "a" * 30], 20)
    np.testing.assert_array_equal(narrow, want)


def test_narrowed_ids_of_jax_arrays_under_jit():
    import jax

    wide = words_to_char_ids(NARROWED_WORDS, 50)
    narrow = jax.jit(chars.narrow_char_ids, static_argnums=1)(wide, 20)
    np.testing.assert_array_equal(narrow, words_to_char_ids(NARROWED_WORDS, 20))
