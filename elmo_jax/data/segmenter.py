"""Word segmentation of text written without spaces between words (Chinese): `data.segmenter` and
`elmo-embed --segmenter`.

'none' splits a line on whitespace, as every text file is read. 'jieba' also cuts each
whitespace-separated chunk into jieba's words: jieba 0.42's default dictionary, precise mode
(`cut_all=False`) with its HMM for words outside the dictionary on. Whitespace stays a boundary,
so text already segmented, or Latin words between spaces, keep their splits. A biLM sees at use
what it saw at training only if both are cut by the same segmenter and jieba version
(docs/chinese.md). The tools also take 'jieba_vocabulary': jieba's words, those outside the biLM's
vocabulary cut into words of it.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable, Container, Iterable, Iterator

# data.segmenter's values: what cuts a line of a text file into words.
SEGMENTERS = ("none", "jieba")
# The tools' further value, which needs a trained biLM's vocabulary (so not one to train with): jieba's
# words, each one outside the vocabulary cut into the fewest words of it (`known_pieces`).
VOCABULARY_SEGMENTER = "jieba_vocabulary"
TOOL_SEGMENTERS = (*SEGMENTERS, VOCABULARY_SEGMENTER)


class SegmenterError(ValueError):
    """A segmenter that is unknown or not installed."""


def splitter(name: str, vocabulary: Container[str] | None = None) -> Callable[[str], list[str]]:
    """What cuts a line of text into its tokens under segmenter `name` (TOOL_SEGMENTERS; 'jieba_vocabulary'
    needs the biLM's `vocabulary`); jieba is loaded now, so that a missing install fails before any long work."""
    if name == "none":
        return str.split
    if name in ("jieba", VOCABULARY_SEGMENTER):
        cut = _jieba_cut()

        def jieba_words(line: str) -> list[str]:
            return [word for chunk in line.split() for word in cut(chunk, cut_all=False, HMM=True)]

        if name == "jieba":
            return jieba_words
        if vocabulary is None:
            raise SegmenterError(f"segmenter {VOCABULARY_SEGMENTER!r} needs the biLM's vocabulary (a workdir's)")
        return lambda line: [piece for word in jieba_words(line) for piece in known_pieces(word, vocabulary)]
    raise SegmenterError(f"unknown segmenter {name!r}; expected one of {TOOL_SEGMENTERS}")


def known_pieces(word: str, vocabulary: Container[str], longest: int = 16) -> list[str]:
    """`word` itself when `vocabulary` has it or no cut of it into vocabulary words (of up to `longest`
    characters) exists, else such a cut into the fewest words, the longer first word on a tie.
    jieba's 苹果公司 and 新手机 are 苹果 公司 and 新 手机 for a biLM trained on gold segmentation,
    which has those words and not the compounds; a name none of whose cuts is known stays whole."""
    if word in vocabulary:
        return [word]
    n = len(word)
    # fewest[i]: (pieces, end of the first piece) of the fewest-word cut of word[i:]; None when there is none.
    fewest: list[tuple[int, int] | None] = [None] * n + [(0, n)]
    for i in range(n - 1, -1, -1):
        cuts = [(fewest[j][0] + 1, j) for j in range(min(n, i + longest), i, -1)  # Longer first: min keeps it.
                if fewest[j] is not None and word[i:j] in vocabulary]
        fewest[i] = min(cuts, key=lambda cut: cut[0]) if cuts else None
    if fewest[0] is None:
        return [word]
    pieces, i = [], 0
    while i < n:
        j = fewest[i][1]
        pieces.append(word[i:j])
        i = j
    return pieces


def segment(lines: Iterable[str], name: str, vocabulary: Container[str] | None = None) -> Iterator[list[str]]:
    """The tokens of each of `lines` under segmenter `name`: raw sentences for
    `ElmoEmbedder.embed_sentences`, cut as the biLM's training text was (data.segmenter)."""
    split = splitter(name, vocabulary)
    return (split(line) for line in lines)


@functools.cache
def _jieba_cut() -> Callable[..., list[str]]:
    """`lcut` of a jieba tokenizer with its dictionary loaded; jieba's own log lines ("Building prefix
    dict ...", on stderr) silenced, its warnings kept."""
    try:
        import jieba
    except ImportError:
        raise SegmenterError("segmenter 'jieba' needs jieba: pip install 'elmo-jax[zh]' (or jieba)") from None
    logging.getLogger("jieba").setLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer.lcut
