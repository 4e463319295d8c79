"""The character vocabulary: ids of listed characters after bilm-tf's, other characters as their
bytes, no cut inside a character, the file's round trip and its one-line errors, cut words counted."""

from __future__ import annotations

import numpy as np
import pytest

from elmo_jax.data.char_vocab import (
    FIRST_ID, CharVocabulary, CharVocabularyError, checkpoint_characters, count_characters, count_cut, n_char_ids,
)
from elmo_jax.data.chars import BOW_CHAR, EOW_CHAR, ID_SHIFT, N_CHARACTERS, PAD_CHAR, CharIdCache, CharIdTable
from elmo_jax.data.chars import words_to_char_ids

CHARACTERS = CharVocabulary(["北", "京", "é", "😀"])


def spelled(word: str, max_chars: int, characters: CharVocabulary | None = CHARACTERS) -> list[int]:
    """The unshifted ids between BOW and EOW of `word` (a plain-Python reading of the ids)."""
    ids = (words_to_char_ids([word], max_chars, characters)[0] - ID_SHIFT).tolist()
    assert ids[0] == BOW_CHAR
    end = ids.index(EOW_CHAR)
    assert set(ids[end + 1 :]) <= {PAD_CHAR}
    return ids[1:end]


def test_listed_characters_take_the_ids_after_bilm_tfs():
    assert spelled("北京", 10) == [FIRST_ID, FIRST_ID + 1]
    assert spelled("é😀", 10) == [FIRST_ID + 2, FIRST_ID + 3]
    assert CHARACTERS.n_ids == N_CHARACTERS + 4 == n_char_ids(CHARACTERS)
    assert n_char_ids(None) == N_CHARACTERS


def test_unlisted_characters_are_their_utf8_bytes():
    assert spelled("上海", 12) == list("上海".encode("utf-8"))
    assert spelled("北上", 12) == [FIRST_ID, *"上".encode("utf-8")]


@pytest.mark.parametrize("word", ["the", "cat's", "<UNK>", "naïve", "x" * 60, "<S>", "</S>", ""])
def test_words_without_listed_characters_are_spelled_as_bytes(word):
    """ASCII and every unlisted character: the ids of bilm-tf, bit for bit (ï is not listed)."""
    np.testing.assert_array_equal(
        words_to_char_ids([word], 50, CHARACTERS), words_to_char_ids([word], 50)
    )


@pytest.mark.parametrize("max_chars", [3, 4, 5, 6, 7, 8])
def test_a_word_is_never_cut_inside_a_character(max_chars):
    word = "ab上北x"  # Units: a, b, 3 bytes of 上, 北, x.
    units = spelled(word, max_chars)
    whole = [ord("a"), ord("b"), *"上".encode("utf-8"), FIRST_ID, ord("x")]
    assert units == whole[: len(units)]
    boundaries = {0, 1, 2, 5, 6, 7}  # Unit counts that end between characters.
    assert len(units) in boundaries
    assert len(units) == max(b for b in boundaries if b <= max_chars - 2)
    assert CHARACTERS.spell(word, max_chars - 2) == (units, len(units) < len(whole))


def test_bytes_still_cut_inside_a_character_as_bilm_tf():
    """Without a character vocabulary nothing changes: bilm-tf keeps the first bytes, whatever they are."""
    assert spelled("ab斯", 5, None) == [ord("a"), ord("b"), "斯".encode("utf-8")[0]]


def test_count_cut_counts_words_longer_than_the_units():
    words = ["北京", "北京北京北", "上海", "abc"]
    assert count_cut(words, 6, CHARACTERS) == (2, "北京北京北")  # 5 units > 4; 上海 is 6 bytes > 4.
    assert count_cut(words, 6, None) == (3, "北京")  # 6 bytes > 4.
    assert count_cut(["abcd"], 6, None) == (0, None)


def test_build_lists_non_ascii_characters_by_count():
    counts = {"北京": 3, "京": 2, "é": 1, "abc": 100, "上 海": 5}
    built = CharVocabulary.build(counts)
    assert built.characters == ("上", "京", "海", "北", "é")  # 5 (ties by code point), 5, 5, 3, 1.
    assert built.counts == (5, 5, 5, 3, 1)
    assert CharVocabulary.build(counts, min_count=4).characters == ("上", "京", "海")


def test_characters_counted_once_serve_every_threshold():
    """`elmo-vocab chars` counts the characters once for its vocabulary and its totals."""
    counts = {"北京": 3, "京": 2, "é": 1, "abc": 100, "上 海": 5}
    seen = count_characters(counts)
    assert seen == {"上": 5, "京": 5, "海": 5, "北": 3, "é": 1}  # Not ASCII, not whitespace.
    for min_count in (1, 4, 6):
        from_counts = CharVocabulary.from_character_counts(seen, min_count)
        built = CharVocabulary.build(counts, min_count)
        assert (from_counts.characters, from_counts.counts) == (built.characters, built.counts)


@pytest.mark.parametrize("with_counts", [True, False])
def test_save_and_load_round_trip(tmp_path, with_counts):
    path = str(tmp_path / "chars.txt")
    counts = [9, 5, 5, 1] if with_counts else None
    CharVocabulary(CHARACTERS.characters, counts).save(path)
    loaded = CharVocabulary.load(path)
    assert loaded == CHARACTERS
    assert loaded.counts == (tuple(counts) if counts else None)
    assert loaded.fingerprint() == CHARACTERS.fingerprint() != CharVocabulary(["京", "北"]).fingerprint()


def test_crlf_lines_are_read(tmp_path):
    path = tmp_path / "chars.txt"
    path.write_bytes("北\t3\r\n京\t2\r\n".encode("utf-8"))
    assert CharVocabulary.load(str(path)).characters == ("北", "京")


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("北\na\n", 2, "'a' is ASCII"),
        ("北\n京京\n", 2, "is not one character"),
        ("北\n\n", 2, "is not one character"),
        ("北\n\u3000\n", 2, "is whitespace"),
        ("北\t3\n京\n", 2, "no count, unlike line 1"),
        ("北\n京\t3\n", 2, "a count, unlike line 1"),
        ("北\tmany\n", 1, "count 'many' is not an integer"),
        ("北\t1\t2\n", 1, "expected `character` or `character<TAB>count`"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "chars.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CharVocabularyError, match=rf"^{path}:{line}: .*{message}"):
        CharVocabulary.load(str(path))


def test_duplicates_invalid_utf8_and_empty_files_are_refused(tmp_path):
    path = tmp_path / "chars.txt"
    path.write_text("北\n京\n北\n", encoding="utf-8")
    with pytest.raises(CharVocabularyError, match=rf"^{path}: duplicate character '北' at lines 1 and 3"):
        CharVocabulary.load(str(path))
    path.write_bytes(b"\xe5\x8c\n")
    with pytest.raises(CharVocabularyError, match=rf"^{path}:1: not valid UTF-8"):
        CharVocabulary.load(str(path))
    path.write_text("", encoding="utf-8")
    with pytest.raises(CharVocabularyError, match="no characters"):
        CharVocabulary.load(str(path))
    with pytest.raises(CharVocabularyError, match="not found"):
        CharVocabulary.load(str(tmp_path / "missing.txt"))


def test_checkpoint_characters_must_fit_the_char_table_and_the_record(tmp_path):
    path = str(tmp_path / "chars.txt")
    CHARACTERS.save(path)
    assert checkpoint_characters(path, CHARACTERS.n_ids, CHARACTERS.fingerprint()) == CHARACTERS
    with pytest.raises(CharVocabularyError, match=r"4 characters, but the checkpoint's char table has 267 rows"):
        checkpoint_characters(path, CHARACTERS.n_ids + 1, None)
    swapped = CharVocabulary(["京", "北", "é", "😀"])
    with pytest.raises(CharVocabularyError, match="not the character vocabulary the checkpoint was trained with"):
        checkpoint_characters(path, CHARACTERS.n_ids, swapped.fingerprint())


def test_the_caches_and_tables_spell_with_the_characters():
    words = ["北京", "上海", "the"]
    expected = words_to_char_ids(words, 8, CHARACTERS)
    np.testing.assert_array_equal(CharIdCache(8, characters=CHARACTERS).encode(words), expected)
    vocab_words = ["<S>", "</S>", "<UNK>", "北京", "the"]
    table = CharIdTable(vocab_words, 2, 8, characters=CHARACTERS)
    rows = table.rows(words, np.array([3, 2, 4]))  # 上海 is out of the vocabulary: a row of its own.
    np.testing.assert_array_equal(table.lookup(rows), expected)
    assert expected.max() >= N_CHARACTERS  # A listed character's id survives the tables' uint16.
