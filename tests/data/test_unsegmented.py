"""The warning for text without spaces between CJK words: one, naming the file, for unsegmented
Chinese; none for segmented Chinese, English, or CoNLL-U."""

from __future__ import annotations

import gzip
import logging

from elmo_jax.data import unsegmented

SEGMENTED = ["迈向 充满 希望 的 新 世纪 —— 一九九八年 新年 讲话", "中国 经济 发展 迅速 。", "１９９７年 ， 是 重要 的 一 年"]
UNSEGMENTED = [line.replace(" ", "") for line in SEGMENTED]


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_unsegmented_chinese_is_warned_about_once_naming_the_file(tmp_path, caplog):
    (tmp_path / "a.txt").write_text("\n".join(SEGMENTED * 50) + "\n", encoding="utf-8")
    for name in ("b.txt", "c.txt"):
        (tmp_path / name).write_text("\n".join(UNSEGMENTED * 50) + "\n", encoding="utf-8")
    paths = [str(tmp_path / name) for name in ("a.txt", "b.txt", "c.txt")]
    with caplog.at_level(logging.WARNING):
        assert unsegmented.warn_if_unsegmented(paths) == paths[1]
    (warning,) = _warnings(caplog)
    assert warning.startswith(f"{paths[1]} looks like Chinese or Japanese text without spaces between words")
    assert "out-of-vocabulary" in warning and "data.segmenter='jieba'" in warning and "CoNLL-U" in warning


def test_segmented_chinese_english_and_conllu_are_not_warned_about(tmp_path, caplog):
    english = "the quick brown fox jumps over the lazy dog\nsupercalifragilisticexpialidocious antidisestablishment\n"
    (tmp_path / "en.txt").write_text(english * 100, encoding="utf-8")
    (tmp_path / "zh.txt").write_text("\n".join(SEGMENTED * 50) + "\n", encoding="utf-8")
    (tmp_path / "zh.conllu").write_text("1\t" + UNSEGMENTED[0] + "\t_\tX\t_\t_\t0\troot\t_\t_\n", encoding="utf-8")
    paths = [str(tmp_path / name) for name in ("en.txt", "zh.txt", "zh.conllu")]
    with caplog.at_level(logging.WARNING):
        assert unsegmented.warn_if_unsegmented(paths) is None
    assert _warnings(caplog) == []


def test_the_rule_counts_long_cjk_tokens_among_cjk_tokens():
    assert unsegmented.long_cjk_tokens(["一二三四五六七八九 一二三四五六七八 abcdefghijklmnop 北京"]) == (1, 3)
    assert unsegmented.long_cjk_tokens(["ひらがなとカタカナもかぞえる"]) == (1, 1)  # Japanese kana count too.
    assert not unsegmented.looks_unsegmented(["一二三四五六七八九 北 京 上"])  # 1 of 4: at the 25% share, not over.
    assert unsegmented.looks_unsegmented(["一二三四五六七八九 北 京"])
    assert not unsegmented.looks_unsegmented([])


def test_only_the_first_lines_of_a_gzip_file_are_sampled(tmp_path):
    path = tmp_path / "a.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(SEGMENTED * (unsegmented.SAMPLE_LINES // 3 + 1)) + "\n" + "\n".join(UNSEGMENTED * 1000))
    assert unsegmented.warn_if_unsegmented([str(path)]) is None
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(UNSEGMENTED) + "\n")
    assert unsegmented.warn_if_unsegmented([str(path)]) == str(path)


def test_the_watch_over_token_lists_warns_once_as_they_come(caplog):
    """An embedder's input, read once: 我爱吃苹果。/ 苹果公司发布了新手机。 as one token each were embedded
    without a word of warning."""
    watch = unsegmented.UnsegmentedWatch("the sentences embedded")
    with caplog.at_level(logging.WARNING):
        watch.see([["我爱吃苹果。"], ["苹果公司发布了新手机。"]])
        watch.see([[line] for line in UNSEGMENTED])
    (warning,) = _warnings(caplog)
    assert warning.startswith("the sentences embedded look like Chinese or Japanese text without spaces between "
                              "words (1 of their 2 CJK tokens hold more than 8 characters)")
    assert "--segmenter jieba" in warning


def test_the_watch_stays_quiet_on_words_and_stops_looking_after_its_sample(caplog):
    watch = unsegmented.UnsegmentedWatch("the sentences embedded")
    with caplog.at_level(logging.WARNING):
        watch.see([line.split() for line in SEGMENTED] * (unsegmented.SAMPLE_LINES // 3 + 1))
        assert watch.done
        watch.see([[line] for line in UNSEGMENTED] * 10)  # Past the sample: not looked at.
    assert _warnings(caplog) == []
