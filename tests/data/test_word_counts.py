"""elmo_jax.data.word_counts: a streamed pass over a corpus, its progress bar in bytes read."""

import logging
import os

import pytest

from elmo_jax.data import word_counts


def test_progress_follows_bytes_read(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"w{i} x\n" for i in range(50)), encoding="utf-8")
    seen = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n = total, 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, k):
            self.n += k
            seen.append(self.n)

    monkeypatch.setattr(word_counts, "tqdm", Bar)
    monkeypatch.setattr(word_counts, "_PROGRESS_EVERY", 10)
    counts = word_counts.count_words(str(path))
    size = os.path.getsize(path)
    assert counts.sentences == 50
    assert seen == sorted(seen) and seen[-1] == size
    assert 0 < seen[0] < size  # A plain file advances the bar while it is read.


def test_unsegmented_text_is_warned_about_before_counting_unless_segmented(tmp_path, caplog):
    path = tmp_path / "zh.txt"
    path.write_text("他来到了网易杭研大厦\n" * 3, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        counts = word_counts.count_words(str(path), progress=False)
    assert counts.words == {"他来到了网易杭研大厦": 3}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{path} looks like Chinese or Japanese text without spaces between words")
    pytest.importorskip("jieba", reason="segmenter 'jieba' needs the jieba package (pip install 'elmo-jax[zh]')")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        counts = word_counts.count_words(str(path), progress=False, segmenter="jieba")
    assert counts.words["网易"] == 3 and counts.tokens == 18 and caplog.records == []
