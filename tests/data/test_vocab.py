"""Vocabulary: build order, file format (bilm-tf), error messages, encoding."""

import collections
import hashlib
import os

import numpy as np
import pytest

from elmo_jax.data.vocab import SPECIAL_TOKENS, Vocabulary, VocabularyError, read_words

SENTENCES = [
    ["b", "a", "c", "a"],
    ["d", "b", "a", "e"],
    ["c", "f", "b", "a"],
    ["e", "g"],
]
# counts: a=4, b=3, c=2, e=2, d=1, f=1, g=1


def test_special_tokens():
    assert SPECIAL_TOKENS == ("<S>", "</S>", "<UNK>")


def test_build_order_and_tie_break():
    vocab = Vocabulary.build(SENTENCES)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c", "e", "d", "f", "g"]
    assert vocab.counts == [0, 0, 0, 4, 3, 2, 2, 1, 1, 1]
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
    assert len(vocab) == 10
    assert vocab.is_frequency_sorted()


def test_build_is_deterministic_regardless_of_input_order():
    v1 = Vocabulary.build(SENTENCES)
    v2 = Vocabulary.build([list(reversed(s)) for s in reversed(SENTENCES)])
    assert v1.words == v2.words
    assert v1.counts == v2.counts


def test_min_count():
    vocab = Vocabulary.build(SENTENCES, min_count=2)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c", "e"]
    vocab = Vocabulary.build(SENTENCES, min_count=4)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a"]
    vocab = Vocabulary.build(SENTENCES, min_count=5)
    assert vocab.words == ["<S>", "</S>", "<UNK>"]


def test_max_size_includes_special_tokens():
    vocab = Vocabulary.build(SENTENCES, max_size=5)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b"]
    vocab = Vocabulary.build(SENTENCES, max_size=7)
    # c and e tie at 2; both kept
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c", "e"]
    vocab = Vocabulary.build(SENTENCES, max_size=6)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c"]
    vocab = Vocabulary.build(SENTENCES, max_size=3)
    assert vocab.words == ["<S>", "</S>", "<UNK>"]


def test_min_count_and_max_size_together():
    vocab = Vocabulary.build(SENTENCES, min_count=2, max_size=100)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "a", "b", "c", "e"]


def test_special_tokens_in_text_not_duplicated():
    sentences = [["<UNK>", "x", "<UNK>", "<S>"], ["</S>", "x", "y", "<UNK>"]]
    vocab = Vocabulary.build(sentences)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "x", "y"]
    assert len(set(vocab.words)) == len(vocab.words)
    # Their counts are recorded at the special positions.
    assert vocab.counts == [1, 1, 3, 2, 1]
    assert vocab.is_frequency_sorted()


def test_from_counts():
    vocab = Vocabulary.from_counts(collections.Counter({"q": 5, "p": 5, "r": 9}))
    assert vocab.words == ["<S>", "</S>", "<UNK>", "r", "p", "q"]


def test_save_load_round_trip_with_counts(tmp_path):
    vocab = Vocabulary.build(SENTENCES + [["naïve", "€"]])
    path = str(tmp_path / "vocab.txt")
    vocab.save(path)
    lines = open(path, encoding="utf-8").read().split("\n")
    assert lines[0] == "<S>\t0"
    assert lines[3] == "a\t4"
    assert lines[-1] == ""  # trailing newline
    loaded = Vocabulary.load(path)
    assert loaded.words == vocab.words
    assert loaded.counts == vocab.counts
    assert loaded.is_frequency_sorted()
    # No stray temporary file left behind.
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_save_load_round_trip_without_counts(tmp_path):
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "a"])
    path = str(tmp_path / "v.txt")
    vocab.save(path)
    assert open(path).read() == "<S>\n</S>\n<UNK>\nthe\na\n"
    loaded = Vocabulary.load(path)
    assert loaded.words == vocab.words
    assert loaded.counts is None
    assert not loaded.is_frequency_sorted()


def test_load_plain_bilm_tf_file_specials_anywhere(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("</S>\n<S>\nthe\n<UNK>\n", encoding="utf-8")
    vocab = Vocabulary.load(str(path))
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (1, 0, 3)
    assert vocab.word_to_id("the") == 2


def test_load_missing_file(tmp_path):
    path = str(tmp_path / "nope.txt")
    with pytest.raises(VocabularyError, match="not found") as e:
        Vocabulary.load(path)
    assert path in str(e.value)


def test_load_duplicate_token_names_both_lines(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nthe\n", encoding="utf-8")
    with pytest.raises(VocabularyError) as e:
        Vocabulary.load(str(path))
    msg = str(e.value)
    assert "'the'" in msg
    assert "4" in msg and "6" in msg
    assert "lines 4 and 6" in msg
    assert str(path) in msg


def test_load_missing_special(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("<S>\n</S>\nthe\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="<UNK>") as e:
        Vocabulary.load(str(path))
    assert str(path) in str(e.value)


def test_load_bad_count_names_file_and_line(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("<S>\t0\n</S>\t0\n<UNK>\t0\nthe\t12\ncat\tmany\n", encoding="utf-8")
    with pytest.raises(VocabularyError) as e:
        Vocabulary.load(str(path))
    msg = str(e.value)
    assert f"{path}:5" in msg
    assert "many" in msg


def test_constructor_errors():
    with pytest.raises(VocabularyError, match="duplicate"):
        Vocabulary(["<S>", "</S>", "<UNK>", "x", "x"])
    for special in SPECIAL_TOKENS:
        words = [w for w in SPECIAL_TOKENS if w != special] + ["x"]
        with pytest.raises(VocabularyError, match=special):
            Vocabulary(words)


def test_encode_unknown_to_unk():
    vocab = Vocabulary.build(SENTENCES)
    ids = vocab.encode(["a", "zzz", "g", "<S>", "</S>", "A"])
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, [3, 2, 9, 0, 1, 2])
    assert vocab.encode([]).shape == (0,)
    assert vocab.word_to_id("zzz") == vocab.unk_id
    assert vocab.word_to_id("b") == 4
    assert "b" in vocab and "zzz" not in vocab
    # Generators are accepted.
    np.testing.assert_array_equal(vocab.encode(w for w in ["c", "e"]), [5, 6])


def test_is_frequency_sorted():
    assert Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"], [0, 0, 0, 5, 5]).is_frequency_sorted()
    assert not Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"], [0, 0, 0, 1, 5]).is_frequency_sorted()
    # Special tokens are ignored wherever they are and whatever their counts.
    assert Vocabulary(["a", "<S>", "b", "</S>", "<UNK>"], [5, 100, 3, 0, 7]).is_frequency_sorted()
    assert not Vocabulary(["<S>", "</S>", "<UNK>", "a"]).is_frequency_sorted()


@pytest.mark.parametrize(
    "content, line, message",
    [
        (b"<S>\n</S>\n<UNK>\nca\xfft\n", 4, "not valid UTF-8"),
        (b"<S>\n</S>\n<UNK>\nthe cat\n", 4, "token 'the cat' contains whitespace"),
        (b"<S>\t0\n</S>\t0\n<UNK>\t0\nthe\t3\t1\n", 4, "expected `word` or `word<TAB>count`"),
        (b"<S>\t0\n</S>\t0\n<UNK>\nthe\t3\n", 3, "no count, unlike line 1"),
        (b"<S>\n</S>\t0\n<UNK>\n", 2, "a count, unlike line 1"),
        (b"<S>\n\n</S>\n<UNK>\n", 2, "empty token"),
    ],
)
def test_load_malformed_lines_name_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "v.txt"
    path.write_bytes(content)
    with pytest.raises(VocabularyError) as e:
        Vocabulary.load(str(path))
    assert str(e.value).startswith(f"{path}:{line}: {message}")


def test_load_windows_line_endings(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"<S>\t0\r\n</S>\t0\r\n<UNK>\t0\r\nthe\t3\r\n")
    vocab = Vocabulary.load(str(path))
    assert vocab.words == ["<S>", "</S>", "<UNK>", "the"] and vocab.counts == [0, 0, 0, 3]


def test_crlf_files_with_full_width_digits_read_the_words_of_their_lf_twins(tmp_path):
    words = ["<S>", "</S>", "<UNK>", "１９９７年", "北京"]
    for name, text in [("plain", "\n".join(words) + "\n"), ("counted", "".join(f"{w}\t1\n" for w in words))]:
        (tmp_path / f"{name}-lf.txt").write_text(text, encoding="utf-8")
        (tmp_path / f"{name}-crlf.txt").write_bytes(text.replace("\n", "\r\n").encode())
        for read in (lambda path: Vocabulary.load(path).words, read_words):
            assert read(str(tmp_path / f"{name}-crlf.txt")) == read(str(tmp_path / f"{name}-lf.txt")) == words, name


def test_save_without_counts_and_failed_save_leaves_nothing(tmp_path, monkeypatch):
    vocab = Vocabulary.build(SENTENCES)
    path = tmp_path / "v.txt"
    vocab.save(str(path), with_counts=False)
    assert path.read_text(encoding="utf-8").split("\n")[:4] == ["<S>", "</S>", "<UNK>", "a"]

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        vocab.save(str(path))
    assert os.listdir(tmp_path) == ["v.txt"]
    assert path.read_text(encoding="utf-8").startswith("<S>\n")


def test_the_fingerprint_is_the_sha256_of_the_words_in_order_whatever_their_counts():
    words = list(SPECIAL_TOKENS) + ["the", "cat"]
    fingerprint = Vocabulary(words, [0, 0, 0, 5, 3]).fingerprint()
    assert fingerprint == "sha256:" + hashlib.sha256("\n".join(words).encode()).hexdigest()
    assert Vocabulary(words).fingerprint() == fingerprint
    assert Vocabulary(list(SPECIAL_TOKENS) + ["cat", "the"]).fingerprint() != fingerprint
