"""Static word vectors as probe features beside the biLM's layers (docs/probing.md, "Static
baselines"): two rows of a vector file, which the layers' classifiers read as two more layers.

- `own vector`: the word's vector, the same for every occurrence, as a static model gives it;
- `context bag`: [own vector; the mean of the vectors of the words within WINDOW tokens of it in
  its sentence, itself excluded]. Concatenated, not averaged: a linear probe weighs the word and
  its context apart (an average would tie their weights), and a word's sense needs the context
  half while its part of speech mostly needs the word.

A word is looked up as `--normalize` spells it (as the biLM reads it), then as written, then in
lower case (SPELLINGS); a word none of them finds is out of vocabulary (OOV) and takes the file's
unknown-word vector, or zeros without one (elmo_jax/static/lookup.py). Neighbours without a vector
are left out of the mean, which is zeros when none has one.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from elmo_jax.evaluation.report import STATIC_ROWS
from elmo_jax.probing.tasks import normalize_word
from elmo_jax.static.lookup import NO_ROW, Lookup, StaticVectors

WINDOW = 5  # The context bag's neighbours: up to this many tokens on each side.
SPELLINGS = ("normalized", "as written", "lower case")  # The spellings tried, in order.


def row_dims(dim: int) -> list[int]:
    """The width of each row's features for vectors of `dim`: the own vector, then it and the bag."""
    return [dim, 2 * dim]


def spellings(word: str, normalize: str) -> tuple[str, ...]:
    """The spellings of `word` (as written in the data) looked up, in SPELLINGS' order."""
    return normalize_word(word, normalize), word, word.lower()


def context_bags(vectors: np.ndarray, has_vector: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """For each token of a sentence (`vectors` `[n, dim]`, `has_vector` `[n]` bool), the mean `[n,
    dim]` of the vectors of the tokens with one within `window` of it, itself excluded (zeros when
    there are none); by running sums in float64."""
    n = len(vectors)
    kept = np.where(has_vector[:, None], vectors, 0.0).astype(np.float64)
    sums = np.concatenate([np.zeros((1, vectors.shape[1])), np.cumsum(kept, axis=0)])
    counts = np.concatenate([[0], np.cumsum(has_vector)])
    low, high = np.maximum(np.arange(n) - window, 0), np.minimum(np.arange(n) + window + 1, n)
    total = sums[high] - sums[low] - kept
    count = counts[high] - counts[low] - has_vector
    return (total / np.maximum(count, 1)[:, None]).astype(np.float32)


class StaticFeatures(NamedTuple):
    """What `static_features` read: each split's features `[n, 2, 2 dim]` (STATIC_ROWS' order, the
    own vector's padding zero), the lookup of every token of the sentences read, and of the targets
    only (None without targets)."""

    splits: list[np.ndarray]
    tokens: Lookup
    targets: Lookup | None


def static_features(
    vectors: StaticVectors, splits: Sequence[Sequence[Sequence[str]]], normalize: str,
    targets: Sequence[Sequence[int]] | None = None,
) -> StaticFeatures:
    """For each split (sentences of words as written), the STATIC_ROWS of each token `[n_tokens, 2, 2 dim]`
    in order; with `targets` (a token index into each sentence of each split), of those tokens only,
    `[n_sentences, 2, 2 dim]` (the module's docstring)."""
    if targets is not None and [len(t) for t in targets] != [len(s) for s in splits]:
        raise ValueError("targets must give one token index for each sentence of each split")
    words = [word for sentences in splits for sentence in sentences for word in sentence]
    lookup = vectors.lookup([spellings(word, normalize) for word in words])
    own = vectors.rows_vectors(lookup.rows)
    dim, start, chosen, features = vectors.dim, 0, [], []
    for i, sentences in enumerate(splits):
        rows = []
        for n, sentence in enumerate(sentences):
            span = slice(start, start + len(sentence))
            kept = slice(None) if targets is None else slice(targets[i][n], targets[i][n] + 1)
            bags = context_bags(own[span], lookup.rows[span] != NO_ROW)[kept]
            rows.append(np.concatenate([own[span][kept], bags], axis=1))
            chosen += [] if targets is None else [start + targets[i][n]]
            start += len(sentence)
        both = np.concatenate(rows) if rows else np.zeros((0, 2 * dim), np.float32)
        split = np.zeros((len(both), 2, 2 * dim), np.float32)
        split[:, 0, :dim], split[:, 1] = both[:, :dim], both
        features.append(split)
    picked = None if targets is None else Lookup(lookup.rows[chosen], lookup.found_by[chosen])
    return StaticFeatures(features, lookup, picked)


def oov_record(lookup: Lookup) -> dict[str, Any]:
    """How many words were looked up, how many are OOV and their rate, and how many each of SPELLINGS found."""
    n, oov = len(lookup.rows), int(lookup.oov.sum())
    return {"tokens": n, "oov_tokens": oov, "oov_rate": oov / n if n else 0.0,
            "found_by": {name: int(np.sum(lookup.found_by == i)) for i, name in enumerate(SPELLINGS)}}


def by_row(scores: Any) -> Any:
    """`scores` with each {`layers`: [own, bag], ...} of the classifiers as {STATIC_ROWS[0]: own,
    STATIC_ROWS[1]: bag} (a mix of the two rows is left out: it is no row of a vector file)."""
    if not isinstance(scores, dict):
        return scores
    return dict(zip(STATIC_ROWS, scores["layers"])) if "layers" in scores else {k: by_row(v) for k, v in scores.items()}


def static_entry(vectors: StaticVectors, read: StaticFeatures, scores: dict[str, Any]) -> dict[str, Any]:
    """A vector file's entry of a result's `static`: the file, its lookup's OOV records, and `scores`
    by row (`by_row`; its `rows` the headline score of each row, the measure of the result's `layers`)."""
    entry = {
        "file": vectors.path, "format": "binary" if vectors.binary else "text", "words": len(vectors.words),
        "dim": vectors.dim, "unknown_word": vectors.unknown_word, "window": WINDOW, "oov": oov_record(read.tokens),
    }
    if read.targets is not None:
        entry["target_oov"] = oov_record(read.targets)
    return {**entry, **by_row(scores)}
