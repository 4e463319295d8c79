"""A task model over an ELMoForManyLangs model's layers (`inputs.elmo.manylangs`): the layers it stores
(run='once') and computes in the step (every_step, fine_tune) are the fixture's `sents2elmo` layers
(tests/interop/manylangs/cnn_words, made with ELMoForManyLangs itself); each run mode trains one epoch,
writes results.json, and its workdir scores a file again; the biLM sources are exclusive."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.elmo import word_layers
from elmo_jax.sections import ConfigError
from elmo_jax.tasks import features, loop, schema
from elmo_jax.tasks.trained import TrainedTask
from tests.interop.test_manylangs_bilm import FIXTURES, SENTENCES, expected
from tests.tasks.test_loop import tiny_config

MODEL = os.path.join(FIXTURES, "cnn_words")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The fixture's sentences as one CoNLL-U file (UPOS: whether a word is longer than 3 characters)
    for every split."""
    path = tmp_path_factory.mktemp("manylangs_task") / "sentences.conllu"
    with open(path, "w", encoding="utf-8") as f:
        for sentence in SENTENCES:
            for i, word in enumerate(sentence, 1):
                f.write(f"{i}\t{word}\t_\t{'NOUN' if len(word) > 3 else 'X'}\t_\t_\t{i - 1}\tdep\t_\t_\n")
            f.write("\n")
    return {split: str(path) for split in ("train", "dev", "test")}


def manylangs_config(files, run: str):
    return tiny_config(files, **{"inputs.word.dim": 0, "inputs.elmo.manylangs": MODEL, "inputs.elmo.run": run,
                                 "encoder.dim": 8, "train.epochs": 1})


def sents2elmo(i: int) -> np.ndarray:
    """The fixture's three layers of sentence i as the task models hold them, `[n_tokens, 3, 2P]`."""
    return expected("cnn_words")[f"output_layer_-2_sentence_{i}"].transpose(1, 0, 2)


def test_the_stored_and_the_in_step_layers_are_sents2elmo(files):
    data = loop.TaskData(manylangs_config(files, "once"), progress=False)
    assert data.examples["train"].words == SENTENCES
    stored = data.inputs["train"]
    for i in range(len(SENTENCES)):
        np.testing.assert_allclose(stored.elmo[stored.offsets[i] : stored.offsets[i + 1]], sents2elmo(i),
                                   rtol=0, atol=1e-5, err_msg=f"sentence {i}")
    config = manylangs_config(files, "every_step")
    data = loop.TaskData(config, progress=False)
    model_config = loop.model_config(config, data.kind, data.labels, data.bilm, None, 0)
    batch = features.make_batch(data.inputs["train"], np.arange(len(SENTENCES)))
    layers = np.asarray(word_layers(model_config.bilm, jnp.asarray(model_config.bilm_boundaries), data.bilm.params,
                                    jnp.asarray(batch["bilm_char_ids"])))
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(layers[i, : len(sentence)], sents2elmo(i), rtol=0, atol=1e-5,
                                   err_msg=f"sentence {i}")
        assert not np.any(layers[i, len(sentence) :])


@pytest.mark.parametrize("run", schema.RUNS)
def test_each_run_mode_trains_and_its_workdir_scores_again(files, run, tmp_path):
    workdir = str(tmp_path / run)
    results = loop.train_task(manylangs_config(files, run), workdir, progress=False)
    assert os.path.exists(os.path.join(workdir, loop.RESULTS)) and results["epochs"] == 1
    assert TrainedTask(workdir).evaluate(files["test"]) == results["test"]


def test_a_manylangs_model_is_one_biLM_source(files):
    schema.validate(manylangs_config(files, "once"))  # No other input needed.
    for others, named in (({"inputs.elmo.workdir": "runs/w"}, "workdir"),
                          ({"inputs.elmo.options": "o.json", "inputs.elmo.weights": "w.hdf5"}, "options/weights")):
        config = tiny_config(files, **{"inputs.elmo.manylangs": MODEL, **others})
        with pytest.raises(ConfigError, match=rf"^config keys inputs.elmo.{named} and inputs.elmo.manylangs both name "
                                              r"a biLM: set one$"):
            schema.validate(config)
