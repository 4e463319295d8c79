"""A task's sentences read from each kind of file, the labels a model predicts, and the nested
training subsets of learning curves."""

from __future__ import annotations

import numpy as np
import pytest

from elmo_jax.tasks.datasets import label_names, read_examples, training_subset
from tests.tasks.test_loop import write_conllu


def test_each_kind_reads_its_labels(tmp_path):
    path = write_conllu(tmp_path / "x.conllu", 5, seed=0)
    tags, trees = read_examples("tag", path), read_examples("parse", path)
    assert tags.words == trees.words and tags.heads is None
    assert all(h == list(range(len(w))) for h, w in zip(trees.heads, trees.words))  # Each word's head: the one before.
    assert {label for labels in trees.labels for label in labels} == {"root", "dep"}
    assert label_names("tag", tags) == sorted({t for labels in tags.labels for t in labels})
    entities = tmp_path / "x.iob2"
    entities.write_text("1\tAnn\tB-PER\t-\t-\n2\tran\tO\t-\t-\n\n1\tParis\tB-LOC\t-\t-\n2\tsat\tI-LOC\t-\t-\n")
    ner = read_examples("ner", str(entities))
    assert ner.labels == [["B-PER", "O"], ["B-LOC", "I-LOC"]]
    assert label_names("ner", ner) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]  # Both tags of every type.
    with pytest.raises(ValueError, match="unknown task kind 'srl'"):
        read_examples("srl", path)


def test_training_subsets_are_nested_and_seeded():
    small, large, every = (training_subset(1000, share, seed=4) for share in (0.05, 0.25, 1.0))
    assert len(small) == 50 and len(large) == 250 and every.tolist() == list(range(1000))
    assert set(small) <= set(large)
    assert not np.array_equal(training_subset(1000, 0.05, seed=5), small)
    assert len(training_subset(10, 0.01, seed=0)) == 1  # At least one sentence.
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        training_subset(10, 0.0, seed=0)
