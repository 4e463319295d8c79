"""`compute_features` against the biLM's own layers (`BiLM.apply` on each sentence alone), for a
biLM whose token layer is wider than its LSTM layers and for one with ELMo layers."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN, words_to_char_ids
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.probing.features import compute_features, feature_shape, layer_dims, target_features
from tests.probing.helpers import CHARS, tiny_bilm

SENTENCES = [["the", "cat", "sat"], ["a"], ["naïve", "dogs", "ran", "under", "the", "big", "red", "mat", "."]]


def model_layers(pretrained: PretrainedBiLM, sentence: list[str]) -> list[np.ndarray]:
    """Each layer `[n, width]` of `sentence` as `BiLM.__call__` computes it: the forward stream
    `<S> w1 .. wn </S>` and the backward stream its reverse, from zero states, boundaries removed."""
    model, n = pretrained.model, len(sentence)
    words = [BOS_TOKEN, *sentence, EOS_TOKEN]
    chars = np.stack([words_to_char_ids(words, CHARS), words_to_char_ids(words[::-1], CHARS)])[:, None]
    inputs = {"char_ids": chars, "token_ids": np.zeros((2, 1, n + 2), np.int32), "mask": np.ones((2, 1, n + 2), bool)}
    layers, _, _ = model.apply({"params": pretrained.params}, inputs, model.initial_state(1))
    forward = [np.asarray(layer[0, 0, 1 : n + 1]) for layer in layers]
    backward = [np.asarray(layer[1, 0, 1 : n + 1][::-1]) for layer in layers]  # The reversed stream's w_n .. w_1.
    np.testing.assert_array_equal(forward[0], backward[0])  # The token layer has no direction.
    return [forward[0]] + [np.concatenate([f, b], axis=-1) for f, b in zip(forward[1:], backward[1:])]


def test_features_without_token_projection_are_the_models_own_layers():
    """Layer 0: the char CNN's 20 outputs once; layers 1-2: [forward; backward] (2 x 8), zero-padded
    to 20; each sentence alone from zero states, though batched two at a time."""
    pretrained = tiny_bilm(projection=False)
    assert layer_dims(pretrained.model) == [20, 16, 16]
    assert feature_shape(pretrained, 7) == (7, 3, 20)
    (features,) = compute_features(pretrained, [SENTENCES], batch_size=2, progress=False)
    want = [model_layers(pretrained, sentence) for sentence in SENTENCES]
    assert features.shape == (sum(map(len, SENTENCES)), 3, 20)
    for k, width in enumerate([20, 16, 16]):
        np.testing.assert_allclose(features[:, k, :width], np.concatenate([w[k] for w in want]), rtol=1e-5, atol=2e-6)
        np.testing.assert_array_equal(features[:, k, width:], 0.0)


@pytest.mark.parametrize("engine", ["auto", "xla"])
def test_features_with_token_projection_are_elmo_layers(engine):
    """A projected biLM keeps ELMo's layers: layer 0 [x; x], one width (2 x 8) for all."""
    pretrained = tiny_bilm(projection=True)
    assert layer_dims(pretrained.model) == [16, 16, 16]
    (features,) = compute_features(pretrained, [SENTENCES], batch_size=2, engine=engine, progress=False)
    want = [model_layers(pretrained, sentence) for sentence in SENTENCES]
    token = np.concatenate([w[0] for w in want])
    np.testing.assert_allclose(features[:, 0], np.concatenate([token, token], axis=-1), rtol=1e-5, atol=2e-6)
    for k in (1, 2):
        np.testing.assert_allclose(features[:, k], np.concatenate([w[k] for w in want]), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("projection", [False, True])
def test_target_features_are_the_rows_of_the_targets_among_all_tokens(projection):
    """With `targets`, each split keeps one row per sentence: the target token's layers, as computed
    with all tokens kept (the sentence is read whole)."""
    pretrained = tiny_bilm(projection=projection)
    splits = [SENTENCES, SENTENCES[::-1]]
    targets = [[2, 0, 4], [8, 0, 1]]
    every = compute_features(pretrained, splits, batch_size=2, progress=False)
    kept = compute_features(pretrained, splits, batch_size=2, progress=False, targets=targets)
    for split, all_rows, rows, positions in zip(splits, every, kept, targets):
        starts = np.cumsum([0] + [len(s) for s in split[:-1]])
        assert rows.shape == (len(split),) + all_rows.shape[1:]
        np.testing.assert_allclose(rows, all_rows[starts + positions], rtol=1e-5, atol=2e-6)
    with pytest.raises(ValueError, match="one token index for each sentence"):
        compute_features(pretrained, splits, progress=False, targets=[[0, 0, 0]])


def test_elmo_methods_still_refuse_a_biLM_without_token_projection():
    """`any_token_width` opens `embed_sentence_layers` only; ELMo layers are still refused, and the C++
    kernels (engine 'cpu') with a message."""
    pretrained = tiny_bilm(projection=False)
    with pytest.raises(ValueError, match="ELMo layers need one width"):
        ElmoEmbedder.from_pretrained(pretrained)
    embedder = ElmoEmbedder.from_pretrained(pretrained, stateful=False, any_token_width=True)
    with pytest.raises(ValueError, match="ELMo layers need one width"):
        embedder.embed_batch([["a"]])
    with pytest.raises(ValueError, match="ELMo layers need one width"):
        next(embedder.embed_sentences([["a"]]))
    with pytest.raises(ValueError, match="need a token projection"):
        ElmoEmbedder.from_pretrained(pretrained, any_token_width=True, engine="cpu")


def test_unsegmented_probe_sentences_warn_once_saying_to_cut_the_files(caplog):
    """The senses and WiC files index their targets' words: an unsegmented Chinese file is one
    warning saying to segment the files themselves (the embedder's own advice, a segmenter flag,
    would shift the indices), and the embedder underneath stays quiet."""
    pretrained = tiny_bilm(projection=True)
    unsegmented = [(["苹果公司发布了新的手机和电脑"], 0), (["他在街上看见了一个很大的苹果"], 0)]
    with caplog.at_level(logging.WARNING):
        target_features(pretrained, [unsegmented], batch_size=2, progress=False)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("the probes' sentences look like Chinese or Japanese text without spaces")
    assert "segment the files themselves" in warning and "--segmenter" not in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        target_features(pretrained, [[(["苹果", "公司", "发布", "了", "新", "手机"], 0)]], progress=False)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
