"""Static vectors as probe features against a NumPy reference written out by hand: each word's own
vector and its context bag, the lookup's spellings, OOV words with and without `<UNK>`, the OOV
record, and a result's entry of a file."""

from __future__ import annotations

import numpy as np
import pytest

from elmo_jax.probing.static_features import (
    WINDOW, by_row, context_bags, oov_record, row_dims, static_entry, static_features,
)
from elmo_jax.probing.tasks import normalize_word
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.static.vector_files import write_text

DIM = 3
FILE_WORDS = ["the", "cat", "sat", "on", "mat", "N", "3.5", "dog", "ran"]
SENTENCES = [
    "The cat sat on the mat .".split(),  # "The": lower case; ".": OOV.
    ["Dog"],  # Alone: no neighbours, a zero bag.
    "zzz qqq cat xxx".split(),  # A word whose neighbours are all OOV.
    "the dog ran on 3.5 mats and 1,000 cats sat on the mat on the cat".split(),  # Longer than the window.
]
TARGETS = [[1, 0, 2, 9]]  # cat, Dog, cat, sat.


def write_vectors(tmp_path, unknown: bool) -> StaticVectors:
    words = FILE_WORDS + (["<UNK>"] if unknown else [])
    path = tmp_path / "toy.txt"
    write_text(str(path), words, np.random.default_rng(0).normal(size=(len(words), DIM)))
    return StaticVectors.read(str(path))


def reference(vectors: StaticVectors, sentences, normalize: str) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Each token's own vector and context bag by the documented rules, a token at a time; and the OOV count."""
    table = dict(zip(vectors.words, vectors.vectors.astype(np.float64)))
    oov = 0

    def vector(word: str):
        nonlocal oov
        for form in (normalize_word(word, normalize), word, word.lower()):
            if form in table:
                return table[form]
        oov += 1
        return table.get("<UNK>")  # None: no vector.

    own, bags = [], []
    for sentence in sentences:
        found = [vector(word) for word in sentence]
        for i in range(len(sentence)):
            own.append(np.zeros(DIM) if found[i] is None else found[i])
            neighbours = [found[j] for j in range(len(sentence))
                          if j != i and abs(j - i) <= WINDOW and found[j] is not None]
            bags.append(np.mean(neighbours, axis=0) if neighbours else np.zeros(DIM))
    return own, bags, oov


@pytest.mark.parametrize("unknown", [True, False], ids=["<UNK>", "zeros"])
@pytest.mark.parametrize("normalize", ["none", "ptb"])
def test_own_vectors_and_context_bags_against_numpy(tmp_path, unknown, normalize):
    vectors = write_vectors(tmp_path, unknown)
    read = static_features(vectors, [SENTENCES[:2], SENTENCES[2:]], normalize)
    own, bags, oov = reference(vectors, SENTENCES, normalize)
    features = np.concatenate(read.splits)
    assert [len(s) for s in read.splits] == [8, 20] and features.shape == (28, 2, 2 * DIM)
    np.testing.assert_allclose(features[:, 0, :DIM], own, rtol=1e-6)
    np.testing.assert_array_equal(features[:, 0, DIM:], 0.0)  # The own vector's padding.
    np.testing.assert_allclose(features[:, 1], np.concatenate([own, bags], axis=1), rtol=1e-6, atol=1e-7)
    assert read.targets is None and int(read.tokens.oov.sum()) == oov
    # ".", "zzz", "qqq", "xxx", "mats", "and", "cats" (and "1,000" unless ptb spells it N).
    assert oov == 7 + (normalize == "none")


def test_the_features_of_target_words_only(tmp_path):
    vectors = write_vectors(tmp_path, unknown=True)
    (targets,), tokens, picked = static_features(vectors, [SENTENCES], "ptb", targets=TARGETS)
    (every,) = static_features(vectors, [SENTENCES], "ptb").splits
    offsets = np.cumsum([0] + [len(s) for s in SENTENCES])[:-1]
    np.testing.assert_array_equal(targets, every[offsets + TARGETS[0]])
    assert len(tokens.rows) == 28 and picked.rows.tolist() == tokens.rows[offsets + TARGETS[0]].tolist()
    with pytest.raises(ValueError, match="one token index for each sentence"):
        static_features(vectors, [SENTENCES], "ptb", targets=[[0]])


def test_context_bags_at_the_sentence_edges():
    vectors = np.arange(24, dtype=np.float32).reshape(12, 2)
    has = np.ones(12, bool)
    has[3] = False
    bags = context_bags(vectors, has, window=2)
    for i in range(12):
        kept = [j for j in range(max(0, i - 2), min(12, i + 3)) if j != i and has[j]]
        np.testing.assert_allclose(bags[i], vectors[kept].mean(axis=0))
    np.testing.assert_array_equal(context_bags(vectors[:1], has[:1]), [[0.0, 0.0]])


def test_the_oov_record_counts_each_spelling_that_found_a_word(tmp_path):
    vectors = write_vectors(tmp_path, unknown=False)
    lookup = vectors.lookup([("the", "The", "the"), ("n", "3.5", "3.5"), ("cAt", "cAt", "cat"), ("x", "x", "x")])
    assert oov_record(lookup) == {"tokens": 4, "oov_tokens": 1, "oov_rate": 0.25,
                                  "found_by": {"normalized": 1, "as written": 1, "lower case": 1}}


def test_a_files_entry_holds_its_lookup_and_its_scores_by_row(tmp_path):
    vectors = write_vectors(tmp_path, unknown=True)
    read = static_features(vectors, [SENTENCES], "none", targets=TARGETS)
    scores = {"rows": {"layers": [0.5, 0.75], "mix": 0.6},
              "centroid": {"accuracy": {"layers": [0.25, 1.0], "mix": 0.0}}}
    entry = static_entry(vectors, read, scores)
    assert entry["rows"] == {"own vector": 0.5, "context bag": 0.75} == by_row(scores)["rows"]
    assert entry["centroid"] == {"accuracy": {"own vector": 0.25, "context bag": 1.0}}
    assert entry["file"] == vectors.path and entry["format"] == "text" and entry["unknown_word"] == "<UNK>"
    assert (entry["words"], entry["dim"], entry["window"]) == (10, DIM, WINDOW)
    assert entry["oov"]["tokens"] == 28 and entry["target_oov"]["tokens"] == 4 and entry["target_oov"]["oov_tokens"] == 0
    assert row_dims(DIM) == [DIM, 2 * DIM]
