"""Cut tokens' layers pooled onto gold words, against a character-by-character reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from elmo_jax.probing.realign import overlap_weights, pooled_features


def random_cut(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, len(text) - 1)))
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


def reference(features: np.ndarray, gold: list[str], cut: list[str]) -> np.ndarray:
    """Each gold word: the mean of the cut tokens that hold any of its characters."""
    owner = [i for i, word in enumerate(cut) for _ in word]  # Character -> its cut token.
    rows, start = [], 0
    for word in gold:
        tokens = sorted(set(owner[start : start + len(word)]))
        rows.append(features[tokens].mean(axis=0))
        start += len(word)
    return np.stack(rows)


def test_pooled_features_equal_the_characters_reference_on_random_cuts():
    rng = np.random.default_rng(0)
    chooser = random.Random(0)
    gold, cut = [], []
    for _ in range(30):
        text = "".join(chooser.choice("苹果公司发布了新手机") for _ in range(chooser.randint(1, 12)))
        gold.append(random_cut(text, chooser))
        cut.append(random_cut(text, chooser))
    features = rng.normal(size=(sum(map(len, cut)), 3, 4)).astype(np.float32)
    expected, start = [], 0
    for g, c in zip(gold, cut):
        expected.append(reference(features[start : start + len(c)], g, c))
        start += len(c)
    np.testing.assert_allclose(pooled_features(features, gold, cut), np.concatenate(expected), rtol=1e-5, atol=1e-6)


def test_a_gold_word_split_in_two_reads_both_halves_and_two_inside_one_token_read_it():
    weights = overlap_weights(["苹果公司", "发布"], ["苹果", "公司发", "布"])
    np.testing.assert_allclose(weights, [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    np.testing.assert_allclose(overlap_weights(["新", "手机"], ["新手机"]), [[1.0], [1.0]])


def test_cuts_of_other_text_or_other_counts_are_refused():
    with pytest.raises(ValueError, match="does not spell the gold words"):
        overlap_weights(["苹果"], ["苹", "里"])
    with pytest.raises(ValueError, match="2 feature rows for 3 cut tokens"):
        pooled_features(np.zeros((2, 1, 1)), [["苹果公司"]], [["苹果", "公", "司"]])
