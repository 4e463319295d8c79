"""Word segmentation of text written without spaces between words (Chinese): `data.segmenter` and
`elmo-embed --segmenter`.

'none' splits a line on whitespace, as every text file is read. 'jieba' also cuts each
whitespace-separated chunk into jieba's words: jieba 0.42's default dictionary, precise mode
(`cut_all=False`) with its HMM for words outside the dictionary on. Whitespace stays a boundary,
so text already segmented, or Latin words between spaces, keep their splits. A biLM sees at use
what it saw at training only if both are cut by the same segmenter and jieba version
(docs/chinese.md).
"""

from __future__ import annotations

import functools
import logging
from typing import Callable, Iterable, Iterator

# data.segmenter's values: what cuts a line of a text file into words.
SEGMENTERS = ("none", "jieba")


class SegmenterError(ValueError):
    """A segmenter that is unknown or not installed."""


def splitter(name: str) -> Callable[[str], list[str]]:
    """What cuts a line of text into its tokens under segmenter `name` (SEGMENTERS); jieba is
    loaded now, so that a missing install fails before any long work."""
    if name == "none":
        return str.split
    if name == "jieba":
        cut = _jieba_cut()
        return lambda line: [word for chunk in line.split() for word in cut(chunk, cut_all=False, HMM=True)]
    raise SegmenterError(f"unknown segmenter {name!r}; expected one of {SEGMENTERS}")


def segment(lines: Iterable[str], name: str) -> Iterator[list[str]]:
    """The tokens of each of `lines` under segmenter `name`: raw sentences for
    `ElmoEmbedder.embed_sentences`, cut as the biLM's training text was (data.segmenter)."""
    split = splitter(name)
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
