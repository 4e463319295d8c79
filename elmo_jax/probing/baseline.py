"""The floors beside the probes: `word_baseline`, each word type its most frequent training label
(ties: the label more frequent overall, then by name; unseen words: the majority label), and
`majority_baseline`, every token the majority label.
"""

from __future__ import annotations

import collections
from typing import Sequence


def _ranked(counts: collections.Counter, overall: collections.Counter) -> str:
    """The label of `counts` with the most tokens, ties broken by `overall`, then by name."""
    return min(counts, key=lambda label: (-counts[label], -overall[label], label))


def majority_label(labels: Sequence[str]) -> str:
    """The most frequent of `labels` (ties: the first in sorted order)."""
    counts = collections.Counter(labels)
    return _ranked(counts, counts)


def word_baseline(
    train_words: Sequence[str], train_labels: Sequence[str], test_words: Sequence[str], test_labels: Sequence[str]
) -> float:
    """Accuracy on the test tokens of each word's most frequent training label (unseen words: the
    majority label)."""
    overall = collections.Counter(train_labels)
    by_word: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for word, label in zip(train_words, train_labels, strict=True):
        by_word[word][label] += 1
    default = _ranked(overall, overall)
    guess = {word: _ranked(counts, overall) for word, counts in by_word.items()}
    correct = sum(guess.get(word, default) == label for word, label in zip(test_words, test_labels, strict=True))
    return correct / len(test_labels)


def majority_baseline(train_labels: Sequence[str], test_labels: Sequence[str]) -> float:
    """Accuracy on the test tokens of the training majority label."""
    default = majority_label(train_labels)
    return sum(label == default for label in test_labels) / len(test_labels)
