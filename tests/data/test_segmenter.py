"""Segmenters: whitespace, jieba's words (deterministic, quiet, whitespace kept as a boundary), and
one-line errors for an unknown or missing one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from elmo_jax.config import schema
from elmo_jax.data import segmenter

# Skipped only where the zh extra is not installed; requirements-dev.txt installs it.
jieba = pytest.importorskip("jieba", reason="segmenter 'jieba' needs the jieba package (pip install 'elmo-jax[zh]')")


def test_jieba_cuts_a_known_sentence_into_its_words():
    split = segmenter.splitter("jieba")
    assert split("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert split("他来到了网易杭研大厦") == ["他", "来到", "了", "网易", "杭研", "大厦"]  # 杭研: the HMM's word.


def test_jieba_keeps_whitespace_as_a_boundary_and_yields_no_blank_token():
    split = segmenter.splitter("jieba")
    assert split("  iPhone 发布会\t在北京 \r\n") == ["iPhone", "发布会", "在", "北京"]
    assert split(" \r\n") == []


def test_none_splits_on_whitespace_only():
    assert list(segmenter.segment(["我爱北京天安门 ok\r\n", ""], "none")) == [["我爱北京天安门", "ok"], []]


def test_segment_cuts_each_line():
    assert list(segmenter.segment(["我爱北京天安门", "iPhone"], "jieba")) == [["我", "爱", "北京", "天安门"], ["iPhone"]]


def test_the_segmenters_are_the_config_keys_values():
    assert schema.keys()["data.segmenter"].check.problem("jieba") is None
    assert schema.keys()["data.segmenter"].check.problem("mecab") is not None
    with pytest.raises(segmenter.SegmenterError, match=r"^unknown segmenter 'mecab'; expected one of"):
        segmenter.splitter("mecab")


def test_loading_jieba_prints_nothing():
    """jieba logs "Building prefix dict ..." to stderr on its first load unless silenced."""
    code = "from elmo_jax.data.segmenter import splitter; print(splitter('jieba')('北京'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "['北京']\n" and done.stderr == ""


def test_a_missing_jieba_is_a_one_line_error_saying_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # `import jieba` then raises ImportError.
    segmenter._jieba_cut.cache_clear()
    try:
        with pytest.raises(segmenter.SegmenterError, match=r"pip install 'elmo-jax\[zh\]'"):
            segmenter.splitter("jieba")
    finally:
        segmenter._jieba_cut.cache_clear()


def test_known_pieces_cut_a_word_outside_the_vocabulary_into_its_words():
    vocabulary = {"苹果", "公司", "新", "手机", "发布", "了", "近", "苹果公"}
    assert segmenter.known_pieces("苹果", vocabulary) == ["苹果"]
    assert segmenter.known_pieces("苹果公司", vocabulary) == ["苹果", "公司"]  # Not 苹果公 司: 司 is unknown.
    assert segmenter.known_pieces("新手机", vocabulary) == ["新", "手机"]
    assert segmenter.known_pieces("苹果公司X", vocabulary) == ["苹果公司X"]  # No cut of known words: whole.
    assert segmenter.known_pieces("习近平", vocabulary) == ["习近平"]
    assert segmenter.known_pieces("手机手机", {"手机", "手", "机"}) == ["手机", "手机"]  # The fewest pieces.
    assert segmenter.known_pieces("abc", {"a", "bc", "ab", "c"}) == ["ab", "c"]  # A tie: the longer first word.


def test_known_pieces_against_every_cut(seed=0):
    """Of all 2^(n-1) cuts of a word, the fewest pieces among those of vocabulary words only, else the word."""
    import itertools
    import random
    rng = random.Random(seed)
    for _ in range(300):
        word = "".join(rng.choice("abc") for _ in range(rng.randint(1, 7)))
        vocabulary = {"".join(rng.choice("abc") for _ in range(rng.randint(1, 3))) for _ in range(5)}
        known_cuts = []
        for cuts in itertools.product([False, True], repeat=len(word) - 1):
            bounds = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [len(word)]
            pieces = [word[a:b] for a, b in zip(bounds, bounds[1:])]
            if all(p in vocabulary for p in pieces):
                known_cuts.append(pieces)
        got = segmenter.known_pieces(word, vocabulary)
        assert "".join(got) == word
        if word in vocabulary or not known_cuts:
            assert got == [word]
        else:
            assert all(p in vocabulary for p in got) and len(got) == min(map(len, known_cuts)), (word, vocabulary)


def test_jieba_vocabulary_cuts_jiebas_words_and_needs_a_vocabulary():
    split = segmenter.splitter("jieba_vocabulary", {"苹果", "公司", "发布", "了", "新", "手机"})
    assert split("苹果公司发布了新手机") == ["苹果", "公司", "发布", "了", "新", "手机"]
    with pytest.raises(segmenter.SegmenterError, match="needs the biLM's vocabulary"):
        segmenter.splitter("jieba_vocabulary")
    assert schema.keys()["data.segmenter"].check.problem("jieba_vocabulary") is not None  # Not to train with.
