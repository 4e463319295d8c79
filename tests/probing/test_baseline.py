"""The word-type and majority baselines."""

from __future__ import annotations

import pytest

from elmo_jax.probing.baseline import majority_baseline, majority_label, word_baseline


def test_word_baseline_takes_each_words_most_frequent_tag_and_the_majority_for_unseen_words():
    train_words = ["run", "run", "run", "the", "dog", "dog", "dog"]
    train_tags = ["VERB", "VERB", "NOUN", "DET", "NOUN", "NOUN", "NOUN"]
    test_words = ["run", "run", "the", "cat", "dog"]
    test_tags = ["VERB", "NOUN", "DET", "NOUN", "VERB"]
    # run -> VERB (right, wrong), the -> DET (right), cat unseen -> NOUN (right), dog -> NOUN (wrong).
    assert word_baseline(train_words, train_tags, test_words, test_tags) == pytest.approx(3 / 5)


def test_ties_go_to_the_label_more_frequent_overall_then_by_name():
    train_words = ["a", "b", "b", "b", "c", "c"]
    train_tags = ["X", "Y", "Y", "Z", "X", "Z"]  # Overall Y 2, X 2, Z 2; word c: X 1, Z 1.
    assert word_baseline(train_words, train_tags, ["c"], ["X"]) == 1.0
    assert majority_label(["Z", "Y", "Y", "Z"]) == "Y"
    assert word_baseline(["a", "a", "b"], ["P", "Q", "Q"], ["a"], ["Q"]) == 1.0  # a: P 1, Q 1; Q more frequent overall.


def test_majority_baseline():
    assert majority_baseline(["N", "N", "V"], ["N", "V", "V", "N"]) == 0.5
