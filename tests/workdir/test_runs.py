"""Reading a training workdir: its config.json must fit the checkpoint it builds a model for."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from elmo_jax.data.char_vocab import CharVocabularyError
from elmo_jax.workdir.checkpoints import CheckpointError
from elmo_jax.workdir.runs import load_run
from elmo_jax.data.vocab import VocabularyError, fingerprint_mismatch
from tests.training.helpers import make_checkpoint_workdir, swap_vocabulary_lines


def _edit_config(workdir: str, section: str, key: str, value) -> None:
    path = os.path.join(workdir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["model"][section][key] = value
    with open(path, "w") as f:
        json.dump(config, f)


@pytest.fixture(scope="module")
def transformer_workdir(tmp_path_factory):
    return make_checkpoint_workdir(tmp_path_factory.mktemp("transformer"), **{"model.contextualizer": "transformer"})


@pytest.fixture
def edited(transformer_workdir, tmp_path):
    """A copy of the transformer workdir, for a test to edit."""
    return shutil.copytree(transformer_workdir, str(tmp_path / "copy"))


def test_a_fitting_config_loads(transformer_workdir):
    run = load_run(transformer_workdir)
    assert run.step == 2 and run.config.model.transformer.norm == "pre"


def test_a_key_that_changes_no_shape_is_refused_by_the_checkpoints_record(edited):
    _edit_config(edited, "transformer", "norm", "post")
    expected = (
        f"^{edited}/config.json does not fit checkpoint 2: it sets model.transformer.norm='post', "
        "the checkpoint was trained with 'pre'$"
    )
    with pytest.raises(CheckpointError, match=expected):
        load_run(edited)


def test_a_vocabulary_with_two_lines_swapped_is_refused_by_the_checkpoints_record(edited):
    """The same size, so the softmax's row count cannot tell: the recorded fingerprint does."""
    path, trained_with, found = swap_vocabulary_lines(edited)
    with pytest.raises(VocabularyError, match=f"^{re.escape(fingerprint_mismatch(path, found, trained_with))}$"):
        load_run(edited)
    assert load_run(edited, with_vocab=False).step == 2  # Readers that need no vocabulary are not refused.


def test_a_workdir_written_before_character_vocabularies_reads_bytes(transformer_workdir):
    """No chars.txt, no 'characters' in its record (make_checkpoint_workdir writes none): bilm-tf's 262 ids."""
    assert not os.path.exists(os.path.join(transformer_workdir, "chars.txt"))
    assert load_run(transformer_workdir).characters is None


def test_a_chars_file_that_does_not_fit_the_char_table_is_refused(edited):
    """A bytes run given a chars.txt: its char table has 262 rows, not one per listed character more."""
    with open(os.path.join(edited, "chars.txt"), "w", encoding="utf-8") as f:
        f.write("北\n京\n")
    with pytest.raises(CharVocabularyError, match=r"chars.txt: 2 characters, but the checkpoint's char table has 262 rows"):
        load_run(edited)


def test_a_changed_shape_is_named_by_its_array_without_a_record(tmp_path):
    """Checkpoints written before the record: the params' shapes are still checked."""
    workdir = make_checkpoint_workdir(tmp_path, recorded=False)
    assert not os.path.exists(os.path.join(workdir, "checkpoints", "2", "model"))
    load_run(workdir)
    _, _, swapped = swap_vocabulary_lines(workdir)
    assert load_run(workdir).vocab.fingerprint() == swapped  # No fingerprint recorded: the row count is checked.
    _edit_config(workdir, "lstm", "dim", 24)
    expected = r"config.json does not fit checkpoint 2: lstm_0.B: checkpoint \(2, 64\) float32, the model of config.json"
    with pytest.raises(CheckpointError, match=expected + r" \(2, 96\) float32$"):
        load_run(workdir)


def test_a_workdir_written_before_model_width_was_named_so_loads(transformer_workdir, tmp_path):
    """config.json and the checkpoint's model record of a run trained when the width was
    model.lstm.projection_dim: read under today's name, and still checked against each other."""
    old = shutil.copytree(transformer_workdir, str(tmp_path / "old"))
    config_path = os.path.join(old, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["model"]["lstm"]["projection_dim"] = config["model"].pop("width")
    with open(config_path, "w") as f:
        json.dump(config, f)
    (record_path,) = [os.path.join(root, "metadata") for root, _, files in os.walk(os.path.join(old, "checkpoints"))
                      if root.endswith(os.sep + "model") and "metadata" in files]
    with open(record_path) as f:
        record = json.load(f)
    record["model.lstm.projection_dim"] = record.pop("model.width")
    with open(record_path, "w") as f:
        json.dump(record, f)
    run, today = load_run(old), load_run(transformer_workdir)
    assert run.config.model.width == today.config.model.width == 8
    assert run.config.to_dict() == today.config.to_dict()
    config["model"]["lstm"]["projection_dim"] = 16  # Now another width than the record's.
    with open(config_path, "w") as f:
        json.dump(config, f)
    with pytest.raises(CheckpointError, match="model.width"):
        load_run(old)
