"""Continued training of an ELMoForManyLangs model (config.init.manylangs, the cnn_words fixture: word
embedding + char CNN): the run takes its shape and token encoder, starts from its weights with a fresh
softmax, spells the words with its char.dic/word.dic, and leaves a workdir that evaluates, embeds
(as the model itself at learning rate 0) and resumes."""

from __future__ import annotations

import os
import shutil

import jax
import numpy as np
import pytest

from elmo_jax.config import schema
from elmo_jax.config.model_record import CHARACTERS
from elmo_jax.data.manylangs_inputs import ManyLangsInputs, ManyLangsInputsError
from elmo_jax.evaluation.saved_models import evaluate_checkpoint
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.interop.bilm_hdf5 import export_checkpoint
from elmo_jax.interop.manylangs import ManyLangsError, read_model
from elmo_jax.interop.manylangs_params import manylangs_inputs, manylangs_params
from elmo_jax.pretrained import bilm_from_manylangs
from elmo_jax.training.init_from import config_with_manylangs_model
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.workdir.checkpoints import checkpoint_directory, restore_params
from elmo_jax.workdir.runs import load_run
from elmo_jax.workdir.saved_config import saved_config
from tests.training.helpers import tiny_config, write_corpus

MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop", "manylangs", "cnn_words")
SENTENCES = [["the", "cat", "sat"], ["a", "dog", "extraordinary", "mat"], ["日本", "ok"]]


def manylangs_config(corpus_glob: str, **overrides):
    """The tiny run's config continuing MODEL, its shape keys left to the model (the schema's defaults)."""
    config = tiny_config(**{
        "init.manylangs": MODEL, "data.source": "text", "data.train_files": corpus_glob,
        "data.eval_files": corpus_glob, **overrides,
    })
    defaults = schema.get_config()
    config.model.char_cnn, config.model.lstm, config.model.width = (
        defaults.model.char_cnn, defaults.model.lstm, defaults.model.width)
    config.data.max_chars_per_token = defaults.data.max_chars_per_token
    config.model.softmax.sampled = False
    return config


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """One step at learning rate 0: the checkpoint holds the model's params as converted."""
    root = tmp_path_factory.mktemp("manylangs_run")
    corpus_glob = write_corpus(str(root / "corpus"), 16, seed=3)
    config = manylangs_config(corpus_glob, **{"train.num_steps": 1, "train.optimizer.learning_rate": 0.0})
    workdir = str(root / "run")
    result = train_and_evaluate(config, workdir)
    return {"workdir": workdir, "corpus": corpus_glob, "config": config, "result": result}


def test_the_shape_and_token_encoder_come_from_the_model(run):
    config, inputs = config_with_manylangs_model(run["config"])
    model = read_model(MODEL)
    assert config.model.token_encoder == "manylangs" and config.model.width == model.config.projection_dim
    assert config.model.lstm.dim == model.config.cell_dim and config.model.lstm.cell_clip == model.config.cell_clip
    assert config.model.manylangs.word_dim == model.config.word_dim
    assert config.data.max_chars_per_token == model.config.max_chars
    assert inputs == manylangs_inputs(model)


def test_a_shape_key_that_disagrees_with_the_model_is_one_error(run):
    config = manylangs_config(run["corpus"])
    config.model.width = 16
    with pytest.raises(ValueError, match=r"^model.width=16 disagrees with .*cnn_words \(8\): continued training"):
        config_with_manylangs_model(config)


def test_the_run_starts_from_the_models_weights_with_a_fresh_softmax(run):
    checkpoint = restore_params(checkpoint_directory(run["workdir"]))
    converted = manylangs_params(read_model(MODEL))
    trained = {k: v for k, v in checkpoint.params.items() if k != "softmax"}
    assert jax.tree.structure(trained) == jax.tree.structure(converted)
    jax.tree.map(lambda got, want: np.testing.assert_array_equal(np.asarray(got), want), trained, converted)
    assert checkpoint.params["softmax"]["W"].shape[1] == read_model(MODEL).config.projection_dim
    assert checkpoint.record[CHARACTERS] == manylangs_inputs(read_model(MODEL)).fingerprint()


def test_the_workdir_keeps_the_models_inputs_and_evaluates(run):
    workdir = run["workdir"]
    assert ManyLangsInputs.load(os.path.join(workdir, "manylangs_inputs.json")) == manylangs_inputs(read_model(MODEL))
    assert load_run(workdir).characters == manylangs_inputs(read_model(MODEL))
    assert saved_config(workdir).model.token_encoder == "manylangs"
    result = evaluate_checkpoint(workdir)
    assert result["perplexity"] == pytest.approx(run["result"]["perplexity"], rel=1e-5)


def test_the_workdirs_biLM_embeds_as_the_model(run):
    got = ElmoEmbedder.from_workdir(run["workdir"], stateful=False).embed_sentences(SENTENCES)
    want = ElmoEmbedder.from_pretrained(bilm_from_manylangs(MODEL), stateful=False).embed_sentences(SENTENCES)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)


def test_a_workdir_without_its_inputs_file_is_one_error(run, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(run["workdir"], copy)
    os.remove(os.path.join(copy, "manylangs_inputs.json"))
    with pytest.raises(ManyLangsInputsError, match=r"manylangs_inputs.json: not found, but the checkpoint"):
        load_run(copy)


def test_a_resumed_run_trains_the_model(run, tmp_path):
    workdir = str(tmp_path / "resumed")
    shutil.copytree(run["workdir"], workdir)
    config = manylangs_config(run["corpus"], **{"train.num_steps": 3})
    result = train_and_evaluate(config, workdir)
    assert np.isfinite(result["perplexity"])
    checkpoint = restore_params(checkpoint_directory(workdir))
    assert checkpoint.step == 3
    converted = manylangs_params(read_model(MODEL))
    moved = np.asarray(checkpoint.params["lstm_0"]["W_input"]) - converted["lstm_0"]["W_input"]
    assert np.abs(moved).max() > 0


def test_exporting_the_workdir_of_a_model_with_word_embeddings_is_one_error(run, tmp_path):
    with pytest.raises(ManyLangsError, match=r"run \(continuing .*cnn_words\): an ELMoForManyLangs model bilm-tf "
                                             r"files cannot hold: its word embedding \(word_dim 6\)"):
        export_checkpoint(run["workdir"], str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5"))
    assert not os.listdir(tmp_path)
