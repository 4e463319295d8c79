"""`elmo-vocab build|stats`: order, limits, gzip input, statistics, errors."""

import collections
import gzip
import os
import re
import subprocess
import sys

import pytest

from elmo_jax.cli import vocab as vocab_cli
from elmo_jax.data.vocab import Vocabulary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPECIALS = ["<S>", "</S>", "<UNK>"]

# Counts: the 5, a 4, zeta/alpha/mid 2 each (a tie), cat/<UNK>/naïve 1 each; 5 sentences.
PLAIN = "the a zeta\n\n  the  mid a\nalpha the\tcat\n"
GZIPPED = "a the alpha <UNK>\nzeta mid naïve the a\n"


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "part-0.txt").write_text(PLAIN, encoding="utf-8")
    with gzip.open(tmp_path / "part-1.txt.gz", "wt", encoding="utf-8") as f:
        f.write(GZIPPED)
    return str(tmp_path / "part-*")


def _expected_counts():
    return collections.Counter((PLAIN + GZIPPED).split())


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def test_build_orders_by_count_then_word_with_specials_first(corpus, tmp_path):
    out = str(tmp_path / "vocab.txt")
    assert vocab_cli.main(["build", "--input", corpus, "--output", out, "--quiet"]) == 0
    counts = _expected_counts()
    words = sorted((w for w in counts if w not in SPECIALS), key=lambda w: (-counts[w], w))
    assert words[:6] == ["the", "a", "alpha", "mid", "zeta", "cat"]  # Ties in code-point order.
    assert _lines(out) == [f"{w}\t{counts[w]}" for w in SPECIALS + words]
    assert sorted(os.listdir(tmp_path)) == ["part-0.txt", "part-1.txt.gz", "vocab.txt"]  # No temporary file left.
    assert Vocabulary.load(out).is_frequency_sorted()


def test_build_min_count_and_max_size(corpus, tmp_path):
    out = str(tmp_path / "vocab.txt")
    vocab_cli.main(["build", "--input", corpus, "--output", out, "--min_count", "2", "--quiet"])
    assert [line.split("\t")[0] for line in _lines(out)] == SPECIALS + ["the", "a", "alpha", "mid", "zeta"]
    vocab_cli.main(["build", "--input", corpus, "--output", out, "--max_size", "6", "--quiet"])
    assert [line.split("\t")[0] for line in _lines(out)] == SPECIALS + ["the", "a", "alpha"]
    vocab_cli.main(["build", "--input", corpus, "--output", out, "--max_size", "3", "--quiet"])
    assert [line.split("\t")[0] for line in _lines(out)] == SPECIALS


def test_build_without_counts_is_plain_bilm_tf(corpus, tmp_path):
    out = str(tmp_path / "vocab.txt")
    vocab_cli.main(["build", "--input", corpus, "--output", out, "--nocounts", "--max_size", "5", "--quiet"])
    assert _lines(out) == SPECIALS + ["the", "a"]


def test_build_prints_coverage(corpus, tmp_path, capsys):
    vocab_cli.main(["build", "--input", corpus, "--output", str(tmp_path / "v.txt"), "--max_size", "5", "--quiet"])
    tokens = sum(_expected_counts().values())
    assert capsys.readouterr().out.strip() == (
        f"wrote 5 words to {tmp_path / 'v.txt'}: 2 of 8 types, covering {100 * 9 / tokens:.2f}% of {tokens} tokens"
    )


def test_stats_counts_and_oov_rates(corpus, tmp_path, capsys):
    vocab = tmp_path / "small.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\nzeta\nunused\n", encoding="utf-8")
    assert vocab_cli.main(["stats", "--input", corpus, "--vocab", str(vocab), "--quiet"]) == 0
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in capsys.readouterr().out.splitlines())
    counts = _expected_counts()
    lines = [line for line in (PLAIN + GZIPPED).split("\n") if line.strip()]
    tokens = sum(counts.values())
    oov = {w: c for w, c in counts.items() if w not in {"<S>", "</S>", "<UNK>", "the", "zeta"}}
    assert int(rows["sentences"]) == len(lines) == 5
    assert int(rows["tokens"]) == tokens == 18
    assert int(rows["types"]) == len(counts) == 8
    oov_tokens = sum(oov.values())
    assert rows["OOV tokens"] == f"{100 * oov_tokens / tokens:.2f}% ({oov_tokens} of {tokens})"
    assert rows["OOV types"] == f"{100 * len(oov) / len(counts):.2f}% ({len(oov)} of {len(counts)})"
    assert oov_tokens == 10 and len(oov) == 5


def test_glob_matching_nothing_is_an_error(tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    assert vocab_cli.main(["build", "--input", str(tmp_path / "none-*.txt"), "--output", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err.strip() == f"error: no file matches {str(tmp_path / 'none-*.txt')!r}"
    assert not out.exists()
    assert vocab_cli.main(["stats", "--input", str(tmp_path / "none-*.txt"), "--quiet"]) == 1


def test_bad_vocabulary_for_stats_is_an_error(corpus, tmp_path, capsys):
    vocab = tmp_path / "bad.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\nthe\n", encoding="utf-8")
    assert vocab_cli.main(["stats", "--input", corpus, "--vocab", str(vocab), "--quiet"]) == 1
    assert f"error: {vocab}: duplicate token 'the' at lines 4 and 5" in capsys.readouterr().err


def test_failed_write_keeps_the_previous_file(corpus, tmp_path, monkeypatch):
    out = tmp_path / "vocab.txt"
    out.write_text("previous\n", encoding="utf-8")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    assert vocab_cli.main(["build", "--input", corpus, "--output", str(out), "--quiet"]) == 1
    assert out.read_text(encoding="utf-8") == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["part-0.txt", "part-1.txt.gz", "vocab.txt"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["build", "--input", "x"], "required: --output"),
        (["build", "--input", "x", "--output", "v", "--min_count", "0"], "--min_count must be >= 1"),
        (["build", "--input", "x", "--output", "v", "--max_size", "2"], "--max_size must be 0 or >= 3"),
        (["stats"], "required: --input"),
        (["stats", "--input", "x", "--output", "v"], "Unknown command line flag 'output'"),  # A flag of build.
        ([], "required: command (build, stats, chars)"),
        (["count", "--input", "x"], "invalid command 'count' (choose from build, stats, chars)"),
    ],
)
def test_usage_errors_are_one_line_exit_1(argv, message, capsys):
    assert vocab_cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_each_call_starts_from_the_defaults(corpus, tmp_path, capsys):
    """Flags given to one call of main() do not carry over to the next."""
    out = str(tmp_path / "vocab.txt")
    assert vocab_cli.main(["build", "--input", corpus, "--output", out, "--nocounts", "--max_size", "5", "--quiet"]) == 0
    assert vocab_cli.main(["build", "--input", corpus, "--output", out, "--quiet"]) == 0
    assert _lines(out)[3] == "the\t5"  # With its count,
    assert len(_lines(out)) == len(set(_expected_counts()) | set(SPECIALS))  # and every word (no --max_size).
    capsys.readouterr()
    assert vocab_cli.main(["stats", "--input", corpus, "--vocab", out, "--quiet"]) == 0
    assert vocab_cli.main(["stats", "--input", corpus, "--quiet"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == ["sentences", "tokens", "types", "OOV", "OOV"] + ["sentences", "tokens", "types"]


def test_help_lists_the_commands_and_each_commands_flags(capsys):
    assert vocab_cli.main(["--help"]) == 0
    assert "commands: build, stats" in capsys.readouterr().out
    assert vocab_cli.main(["build", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--[no]counts" in out and "--min_count" in out and "--vocab" not in out


def test_module_entry_point_in_a_subprocess(corpus, tmp_path):
    out = tmp_path / "vocab.txt"
    argv = ["build", "--input", corpus, "--output", str(out), "--min_count", "2"]
    run = subprocess.run([sys.executable, "-m", "elmo_jax.cli.vocab", *argv], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "reading: 100%" in run.stderr  # The progress bar.
    assert [line.split("\t")[0] for line in _lines(out)] == SPECIALS + ["the", "a", "alpha", "mid", "zeta"]


@pytest.mark.parametrize("output", ["./part-0.txt", "link.txt"])
def test_build_refuses_to_overwrite_its_input(corpus, tmp_path, monkeypatch, capsys, output):
    monkeypatch.chdir(tmp_path)
    os.symlink("part-0.txt", tmp_path / "link.txt")
    assert vocab_cli.main(["build", "--input", corpus, "--output", output, "--quiet"]) == 1
    assert capsys.readouterr().err == (f"error: --output {output} is --input {tmp_path / 'part-0.txt'}: "
                                       "refusing to overwrite an input\n")
    assert (tmp_path / "part-0.txt").read_text(encoding="utf-8") == PLAIN


def test_segmenter_jieba_counts_the_words_of_raw_chinese(tmp_path, capsys):
    pytest.importorskip("jieba", reason="--segmenter jieba needs the jieba package (pip install 'elmo-jax[zh]')")
    (tmp_path / "zh.txt").write_text("我爱北京天安门\r\n北京\r\n", encoding="utf-8")
    out = str(tmp_path / "vocab.txt")
    assert vocab_cli.main(["build", "--input", str(tmp_path / "zh.txt"), "--output", out, "--quiet",
                           "--segmenter", "jieba"]) == 0
    assert _lines(out)[3:] == ["北京\t2", "天安门\t1", "我\t1", "爱\t1"]
    capsys.readouterr()
    assert vocab_cli.main(["stats", "--input", str(tmp_path / "zh.txt"), "--quiet", "--segmenter", "jieba"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["tokens", "5"]


def test_chars_lists_the_non_ascii_characters_seen_min_count_times(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("北京 是 首都\r\n北京 人 café\nthe 京 é\n", encoding="utf-8")
    out = str(tmp_path / "chars.txt")
    assert vocab_cli.main(["chars", "--input", str(tmp_path / "train.txt"), "--output", out, "--quiet"]) == 0
    assert _lines(out) == ["京\t3", "é\t2", "北\t2"]  # Ties by code point; 是, 首, 都, 人 once: bytes.
    assert capsys.readouterr().out == (
        f"wrote 3 characters to {out}: 3 of 7 non-ASCII characters, covering 63.64% of their 11 occurrences "
        "(265 char ids)\n"
    )
    argv = ["chars", "--input", str(tmp_path / "train.txt"), "--output", out, "--min_count", "4", "--quiet"]
    assert vocab_cli.main(argv) == 1
    assert capsys.readouterr().err == (
        "error: --input: no non-ASCII character is seen 4 times or more: bytes spell the text as it is\n"
    )
    assert _lines(out) == ["京\t3", "é\t2", "北\t2"]  # Kept.
