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
