"""Continued training of a bilm-tf/AllenNLP model: its shape, its weights and softmax rows mapped
onto the training vocabulary, and a run that starts where the model is."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from elmo_jax.config import schema
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation.saved_models import BilmFiles, evaluate_bilm_files
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights
from elmo_jax.cli.export import main as export_main
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.workdir.runs import load_params
from elmo_jax.training.init_from import config_with_init_model, init_params
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.model.initial_params import init_params as fresh_params
from tests.training.helpers import make_checkpoint_workdir, tiny_config, write_corpus


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A checkpoint exported as bilm-tf files: (BilmFiles, workdir, the corpus glob it was built on)."""
    root = tmp_path_factory.mktemp("init_from")
    workdir = make_checkpoint_workdir(root)
    out = {name: str(root / name) for name in ("options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt")}
    assert export_main([
        "--workdir", workdir, "--options", out["options.json"], "--weights", out["weights.hdf5"],
        "--softmax_weights", out["softmax.hdf5"], "--vocab", out["vocab.txt"],
    ]) == 0
    files = BilmFiles(out["options.json"], out["weights.hdf5"], out["softmax.hdf5"], out["vocab.txt"])
    return files, workdir, str(root / "corpus" / "part-*.txt")


def init_overrides(files: BilmFiles, softmax: bool = True) -> dict:
    return {
        "init.options": files.options, "init.weights": files.weights,
        "init.softmax_weights": files.softmax_weights if softmax else "",
        "init.vocab_file": files.vocab if softmax else "",
    }


def test_the_shape_comes_from_options(source):
    files, _, _ = source
    given = tiny_config(**init_overrides(files))
    given.model = schema.get_config().model  # No shape key set: all come from options.json.
    given.data.max_chars_per_token = schema.get_config().data.max_chars_per_token
    config = config_with_init_model(given)
    wanted = load_options(files.options)
    for key, value in wanted.model.lstm.items():
        assert config.model.lstm[key] == value, key
    assert config.model.char_cnn.filters == wanted.model.char_cnn.filters
    assert config.data.max_chars_per_token == wanted.data.max_chars_per_token


def test_a_shape_key_the_config_sets_otherwise_is_an_error_naming_it(source, tmp_path):
    files, _, _ = source
    # A config file's keys count as set too: configs/tests/tiny.py's n_layers + 1 disagrees.
    other = load_options(files.options)
    config = tiny_config(**init_overrides(files), **{"model.lstm.n_layers": other.model.lstm.n_layers + 1})
    with pytest.raises(ValueError, match=r"^model.lstm.n_layers=\d+ disagrees with .*options.json \(\d+\): continued"):
        config_with_init_model(config)
    with pytest.raises(ValueError, match="config.init.softmax_weights and config.init.vocab_file go together"):
        config_with_init_model(tiny_config(**{**init_overrides(files), "init.vocab_file": ""}))


def test_shared_words_keep_their_softmax_rows_new_words_fresh_ones(source):
    files, workdir, _ = source
    _, trained = load_params(workdir)
    source_vocab = Vocabulary.load(files.vocab)
    new_words = source_vocab.words[:3] + ["zebra", "quokka"] + source_vocab.words[5:]
    vocab = Vocabulary(new_words)
    config = config_with_init_model(tiny_config(**init_overrides(files)))
    model = bilm_from_config(config.model, len(vocab))
    fresh = fresh_params(model, jax.random.key(1), config.data.max_chars_per_token)
    params = init_params(config, vocab, fresh)
    w, b = params["softmax"]["W"], params["softmax"]["b"]
    source_w, source_b = np.asarray(trained["softmax"]["W"]), np.asarray(trained["softmax"]["b"])
    for row, word in enumerate(new_words):
        if word in ("zebra", "quokka"):
            np.testing.assert_array_equal(w[row], np.asarray(fresh["softmax"]["W"])[row])
            np.testing.assert_array_equal(b[row], np.asarray(fresh["softmax"]["b"])[row])
        else:
            source_row = source_vocab.words.index(word)
            np.testing.assert_array_equal(w[row], source_w[source_row])
            assert b[row] == source_b[source_row]
    # Everything but the softmax is the model's.
    loaded = load_weights(config, files.weights)
    jax.tree.map(np.testing.assert_array_equal, {k: v for k, v in params.items() if k != "softmax"}, loaded)
    assert jax.tree.structure(params) == jax.tree.structure(fresh)


def test_without_a_softmax_file_the_softmax_starts_fresh(source):
    files, _, _ = source
    vocab = Vocabulary.load(files.vocab)
    config = config_with_init_model(tiny_config(**init_overrides(files, softmax=False)))
    model = bilm_from_config(config.model, len(vocab))
    fresh = fresh_params(model, jax.random.key(1), config.data.max_chars_per_token)
    params = init_params(config, vocab, fresh)
    np.testing.assert_array_equal(params["softmax"]["W"], np.asarray(fresh["softmax"]["W"]))


def test_a_run_at_learning_rate_0_evaluates_to_the_models_perplexity(source, tmp_path):
    files, _, corpus_glob = source
    overrides = {
        **init_overrides(files), "data.source": "text", "data.train_files": corpus_glob,
        "data.eval_files": corpus_glob, "data.vocab_file": files.vocab, "train.num_steps": 2,
        "train.optimizer.learning_rate": 0.0, "train.optimizer.warmup_steps": 0,
    }
    config = tiny_config(**overrides)
    result = train_and_evaluate(config, str(tmp_path / "run"))
    expected = evaluate_bilm_files(files, corpus_glob, config_with_init_model(config))
    for key in ("forward_perplexity", "backward_perplexity", "perplexity"):
        assert result[key] == pytest.approx(expected[key], rel=1e-5), key


@pytest.mark.slow
def test_continued_training_lowers_perplexity_on_the_new_text(source, tmp_path):
    """Trained on one part of a new corpus, the model's perplexity on the held-out other part drops."""
    files, _, _ = source
    new_text = write_corpus(str(tmp_path / "new"), 48, seed=5)
    train_part, held_out = new_text.replace("*", "0"), new_text.replace("*", "1")
    overrides = {
        **init_overrides(files), "data.source": "text", "data.train_files": train_part,
        "data.eval_files": held_out, "data.vocab_file": files.vocab, "train.optimizer.warmup_steps": 0,
    }
    before = train_and_evaluate(tiny_config(**overrides, **{"train.num_steps": 1, "train.optimizer.learning_rate": 0.0}),
                                str(tmp_path / "before"))
    after = train_and_evaluate(tiny_config(**overrides, **{"train.num_steps": 60}), str(tmp_path / "after"))
    assert after["tokens"] == before["tokens"] > 0
    assert after["perplexity"] < 0.8 * before["perplexity"]
