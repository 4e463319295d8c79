"""A warning for training text that looks like Chinese or Japanese written without spaces between
words: read a line a sentence, split on whitespace, each line would be one out-of-vocabulary word.

The rule, on the first SAMPLE_LINES lines (at most SAMPLE_BYTES) of a text file: of its tokens
holding CJK characters (Han, hiragana, katakana), more than LONG_SHARE hold more than LONG_CHARS
of them. SIGHAN 2005's segmented MSR and PKU test sets have 0.3% and 0.003% such tokens, the same
lines without their spaces 94% and 86%; text without CJK characters (English) has none.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import re
import zlib
from typing import Iterable, Sequence

from elmo_jax.data.conllu import is_conllu_file

SAMPLE_LINES = 1000
SAMPLE_BYTES = 1 << 20
LONG_CHARS = 8
LONG_SHARE = 0.25
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def long_cjk_tokens(lines: Iterable[str]) -> tuple[int, int]:
    """(tokens with more than LONG_CHARS CJK characters, tokens with any) of whitespace-split `lines`."""
    long = cjk = 0
    for line in lines:
        for token in line.split():
            n = len(_CJK.findall(token))
            cjk += n > 0
            long += n > LONG_CHARS
    return long, cjk


def looks_unsegmented(lines: Iterable[str]) -> bool:
    """Whether `lines` (a file's sample) look like CJK text without spaces between words (the rule above)."""
    long, cjk = long_cjk_tokens(lines)
    return long > LONG_SHARE * cjk


def _sample(path: str) -> list[str]:
    """The first SAMPLE_LINES lines of the file at `path`, within its first SAMPLE_BYTES (uncompressed);
    [] for a file that cannot be read (reading it for training reports that)."""
    lines: list[str] = []
    budget = SAMPLE_BYTES
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
            while len(lines) < SAMPLE_LINES and budget > 0 and (raw := f.readline(budget)):
                budget -= len(raw)
                lines.append(raw.decode("utf-8", errors="replace"))
    except (OSError, EOFError, zlib.error):
        return []
    return lines


def warn_if_unsegmented(paths: Sequence[str]) -> str | None:
    """Logs one warning naming the first text file of `paths` (CoNLL-U files are words already)
    whose sample looks unsegmented, and returns it; None when none does."""
    for path in paths:
        if not is_conllu_file(path) and looks_unsegmented(_sample(path)):
            logging.warning(
                "%s looks like Chinese or Japanese text without spaces between words (over %d%% of the CJK tokens "
                "of its first lines hold more than %d characters): each line would be one out-of-vocabulary word; "
                "segment it (Chinese: data.segmenter='jieba', docs/chinese.md) or train from CoNLL-U files",
                path, round(100 * LONG_SHARE), LONG_CHARS,
            )
            return path
    return None


# What the embedder's warning tells a user to do: its input is cut as they choose.
EMBEDDING_ADVICE = ("cut them as its training text was (elmo-embed --segmenter jieba, "
                    "embed_file(..., segmenter='jieba'), or jieba.lcut per sentence)")
# What the probes' warning says: their files index words, so the files themselves are to be cut.
INDEXED_ADVICE = ("these files give each target as a word index, so segment the files themselves (and their "
                  "indices) as the biLM's training text was, e.g. with jieba, before probing")


class UnsegmentedWatch:
    """The same rule on the first SAMPLE_LINES sentences (token lists) handed to `see`, as they
    come (an embedder's input, read once): one warning, naming `what` and ending with `advice`,
    once they look unsegmented."""

    def __init__(self, what: str, advice: str = EMBEDDING_ADVICE) -> None:
        self.what = what
        self.advice = advice
        self.long = self.cjk = self.seen = 0
        self.done = False

    def see(self, sentences: Iterable[Sequence[str]]) -> None:
        if self.done:
            return
        for sentence in itertools.islice(sentences, SAMPLE_LINES - self.seen):
            long, cjk = long_cjk_tokens([" ".join(sentence)])
            self.long, self.cjk, self.seen = self.long + long, self.cjk + cjk, self.seen + 1
        if self.long > LONG_SHARE * self.cjk:
            logging.warning(
                "%s look like Chinese or Japanese text without spaces between words (%d of their %d CJK tokens hold "
                "more than %d characters): each such token is one word the biLM never saw; %s",
                self.what, self.long, self.cjk, LONG_CHARS, self.advice,
            )
            self.done = True
        self.done = self.done or self.seen >= SAMPLE_LINES
