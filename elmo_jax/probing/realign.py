"""A sentence's layers read at other word boundaries: the tokens of a segmenter's cut pooled onto the
gold words of the same characters, so that a probe labelled on gold words measures text the biLM read
segmented another way (jieba's words, a vocabulary-aware cut).

Gold word i reads the mean of the cut tokens whose characters overlap its own: a gold word inside one
cut token reads that token, a gold word cut in two reads the mean of both halves.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _starts(words: Sequence[str]) -> np.ndarray:
    """`[len(words) + 1]`: each word's first character offset, then the sentence's length."""
    return np.concatenate([[0], np.cumsum([len(word) for word in words])]).astype(np.int64)


def overlap_weights(gold: Sequence[str], cut: Sequence[str]) -> np.ndarray:
    """`[len(gold), len(cut)]` float32: row i averages the cut tokens overlapping gold word i.
    ValueError when the two do not spell the same characters, or a word is empty."""
    if "".join(gold) != "".join(cut):
        raise ValueError(f"the cut {''.join(cut)!r} does not spell the gold words {''.join(gold)!r}")
    if not all(gold) or not all(cut):
        raise ValueError("an empty word has no characters to align")
    gold_starts, cut_starts = _starts(gold), _starts(cut)
    overlaps = (gold_starts[:-1, None] < cut_starts[None, 1:]) & (cut_starts[None, :-1] < gold_starts[1:, None])
    return (overlaps / overlaps.sum(axis=1, keepdims=True)).astype(np.float32)


def pooled_features(features: np.ndarray, gold: Sequence[Sequence[str]], cut: Sequence[Sequence[str]]) -> np.ndarray:
    """`features` `[cut tokens, K, D]` of the sentences `cut`, in order, read at the words of `gold`
    (the same sentences, segmented otherwise): `[gold tokens, K, D]`."""
    if len(gold) != len(cut):
        raise ValueError(f"{len(gold)} gold sentences against {len(cut)} cut ones")
    if features.shape[0] != sum(map(len, cut)):
        raise ValueError(f"{features.shape[0]} feature rows for {sum(map(len, cut))} cut tokens")
    out = np.empty((sum(map(len, gold)),) + features.shape[1:], np.float32)
    read = written = 0
    for gold_words, cut_words in zip(gold, cut):
        weights = overlap_weights(gold_words, cut_words)
        rows = features[read : read + len(cut_words)]
        out[written : written + len(gold_words)] = np.tensordot(weights, rows, axes=1)
        read, written = read + len(cut_words), written + len(gold_words)
    return out
