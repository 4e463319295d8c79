"""A task's inputs: the stored biLM layers give the task model the loss it has on layers computed by
the biLM itself, batches pad without mixing sentences, an epoch's order is a function of (seed, epoch),
the static table keeps trained rows first, and the word table counts training words only."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from elmo_jax.static.lookup import StaticVectors
from elmo_jax.tasks import features
from elmo_jax.tasks.model import TaskModel, TaskModelConfig
from tests.probing.helpers import tiny_bilm
from tests.probing.test_features import SENTENCES, model_layers


def test_stored_layers_give_the_loss_of_the_layers_the_bilm_computes():
    """The trainer's path (every token's layers computed once, gathered into batches) against the
    biLM applied to each sentence alone: the same task loss, with dropout on the mix too."""
    pretrained = tiny_bilm(projection=True)
    (stored,) = features.elmo_layers(pretrained, [SENTENCES], max_bytes=1 << 30, progress=False)
    inputs = features.split_inputs(SENTENCES, elmo=stored)
    tags = [np.arange(len(s), dtype=np.int32) % 3 for s in SENTENCES]
    batch = features.make_batch(inputs, range(len(SENTENCES)), tags, rows=4)
    direct = np.zeros_like(batch["elmo"])
    for row, sentence in enumerate(SENTENCES):
        token, *lstm = model_layers(pretrained, sentence)  # ELMo's layer 0 is the token embedding twice.
        direct[row, : len(sentence)] = np.stack([np.concatenate([token, token], axis=-1), *lstm], axis=1)
    model = TaskModel(TaskModelConfig(head="crf", num_labels=3, elmo_layers=stored.shape[1], elmo_dim=stored.shape[2],
                                      lstm_layers=1, lstm_dim=4))
    params = model.init({"params": jax.random.PRNGKey(0)}, batch, deterministic=True)
    key = {"dropout": jax.random.PRNGKey(1)}
    loss, _ = model.apply(params, batch, deterministic=False, rngs=key)
    direct_loss, _ = model.apply(params, {**batch, "elmo": direct}, deterministic=False, rngs=key)
    np.testing.assert_allclose(batch["elmo"], direct, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(loss, direct_loss, rtol=1e-5)


def test_a_batch_pads_each_sentence_alone_and_to_few_lengths():
    inputs = features.split_inputs([["a", "b"], ["c"], list("defghijkl")], word_index={"a": 2, "c": 3}, max_chars=5)
    batch = features.make_batch(inputs, [2, 0], [np.array([7, 8]), np.array([5]), np.arange(9)], rows=3)
    assert batch["mask"].shape == (3, 16) and batch["mask"].sum(axis=1).tolist() == [9, 2, 0]
    assert batch["word_ids"][1, :3].tolist() == [2, 1, 0]  # a, b (unknown: 1), padding.
    assert batch["tags"][1, :3].tolist() == [7, 8, 0] and batch["char_ids"].shape == (3, 16, 5)
    assert not batch["char_ids"][2].any() and not batch["char_ids"][1, 2:].any()
    assert sorted({features.padded_length(n) for n in range(1, 200)}) == [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]


def test_an_epochs_batches_are_a_function_of_seed_and_epoch_and_cover_every_sentence():
    lengths = np.random.default_rng(0).integers(1, 40, 530)
    first = features.epoch_batches(lengths, 8, seed=3, epoch=2)
    again = features.epoch_batches(lengths, 8, seed=3, epoch=2)
    assert all(np.array_equal(a, b) for a, b in zip(first, again)) and len(first) == len(again)
    assert sorted(np.concatenate(first).tolist()) == list(range(530))
    other = features.epoch_batches(lengths, 8, seed=3, epoch=3)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_the_static_table_keeps_its_rows_and_grows_by_new_words(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("4 2\nthe 1 2\ncat 3 4\nDog 5 6\n<UNK> 7 8\n", encoding="utf-8")
    vectors = StaticVectors.read(str(path))
    words, rows = features.static_rows(vectors, [[["The", "cat"], ["emu"]]])
    assert words == ["The", "cat"] and rows.tolist() == [[1, 2], [3, 4]]  # The: found in lower case; emu: OOV.
    assert features.static_table(vectors, rows).tolist() == [[0, 0], [7, 8], [1, 2], [3, 4]]  # Padding, <UNK>.
    inputs = features.split_inputs([["emu", "cat"]], static_index=features.static_index(words))
    assert inputs.static_ids[0].tolist() == [features.STATIC_UNKNOWN_ROW, 3]
    new, more = features.static_rows(vectors, [[["Dog", "cat"]]], known=words)
    assert new == ["Dog"] and more.tolist() == [[5, 6]]
    assert features.oov_record([["The", "cat", "emu"]], words) == {"tokens": 3, "oov": 1, "oov_rate": pytest.approx(1 / 3)}


def test_the_word_table_has_padding_unknown_then_training_words_by_count():
    assert features.word_table([["b", "a", "b"], ["c", "a", "b"]], min_count=2) == ["<pad>", "<unk>", "b", "a"]
