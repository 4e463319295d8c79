"""An ELMoForManyLangs model directory as elmo-jax's biLM (`bilm_from_manylangs`): the embedder's
layers of every fixture model (tests/interop/manylangs/, made with ELMoForManyLangs itself) equal
its `Embedder.sents2elmo` (first batch, zero LSTM state) to 1e-5 for every output_layer."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from elmo_jax.config import schema, validate
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.interop.manylangs import ManyLangsError, read_model
from elmo_jax.interop.manylangs_params import manylangs_inputs, manylangs_params
from elmo_jax.model.manylangs_encoder import ManyLangsTokens
from elmo_jax.model.token_encoder_registry import TOKEN_ENCODERS, token_encoder_class
from elmo_jax.pretrained import bilm_from_manylangs
from tests.reference.manylangs_numpy import select_output_layer
from elmo_jax.sections import ConfigError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manylangs")
MODELS = ("cnn_chars", "cnn_words", "words_only")
OUTPUT_LAYERS = (0, 1, 2, -1, -2)

with open(os.path.join(FIXTURES, "sentences.json"), encoding="utf-8") as _f:
    SENTENCES = json.load(_f)


def expected(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(FIXTURES, name, "expected.npz")) as f:
        return dict(f)


@pytest.mark.parametrize("engine", ["xla", "auto"])
@pytest.mark.parametrize("name", MODELS)
def test_the_embedders_layers_are_elmoformanylangs_to_1e_5(name, engine):
    want = expected(name)
    embedder = ElmoEmbedder.from_pretrained(bilm_from_manylangs(os.path.join(FIXTURES, name)), stateful=False,
                                            engine=engine, batch_size=4)
    layers = [s.elmo_layers() for s in embedder.embed_sentence_layers(SENTENCES)]
    assert len(layers) == len(SENTENCES)
    for i, sentence_layers in enumerate(layers):
        for k in OUTPUT_LAYERS:
            got, ref = select_output_layer(sentence_layers, k), want[f"output_layer_{k}_sentence_{i}"]
            assert got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5, err_msg=f"{name} output_layer {k}, sentence {i}")
    assert [x.shape for x in embedder.embed_sentences([[]])] == [want["empty_sentence_output_layer_-2"].shape]


def test_the_boundaries_are_elmoformanylangs_and_a_word_is_cut_as_it_cuts_it():
    model = read_model(os.path.join(FIXTURES, "cnn_words"))
    ids = manylangs_inputs(model).token_ids(["<S>", "</S>", "<eos>", "extraordinary", "extrao"])
    assert ids.shape == (5, 1 + model.config.max_chars)
    assert (ids[0] != ids[1]).any() and np.array_equal(ids[1], ids[2])  # </S> is '<eos>', as a word '<eos>' is.
    assert np.array_equal(ids[3], ids[4])  # Cut to max_chars - 2 characters, its word id too.
    assert ids[0, 1] == model.chars["<eow>"] + 1  # The marks swapped, as ELMoForManyLangs spells words.


def test_the_token_encoder_is_imported_and_only_init_manylangs_sets_it():
    assert token_encoder_class("manylangs") is ManyLangsTokens and "manylangs" not in TOKEN_ENCODERS
    config = schema.get_config()
    config.model.token_encoder = "manylangs"
    with pytest.raises(ConfigError, match=r"model.token_encoder='manylangs' .* only init.manylangs"):
        validate(config)


def test_a_model_without_an_lstm_projection_in_elmo_jax_is_one_error():
    model = read_model(os.path.join(FIXTURES, "cnn_chars"))
    model = dataclasses.replace(model, config=dataclasses.replace(model.config, cell_dim=model.config.projection_dim))
    with pytest.raises(ManyLangsError, match=r"projection_dim 6 == dim 6: elmo-jax's LSTM has no projection"):
        manylangs_params(model)
