"""Restoring a training workdir's checkpoint with the config it was trained with, and the config
that evaluates it."""

import json

import jax
import numpy as np
import pytest

from elmo_jax.evaluation_job import ConfigMismatchError, evaluation_config, restore_checkpoint, saved_config
from elmo_jax.training.checkpoint import CheckpointError
from tests.training.helpers import make_checkpoint_workdir, tiny_config


def test_restore_checkpoint_uses_the_workdirs_config_and_returns_host_params(tmp_path):
    workdir = make_checkpoint_workdir(tmp_path)
    config, params = restore_checkpoint(workdir)
    assert config.data.source == "text" and config.model.lstm.dim == 16
    leaves = jax.tree.leaves(params)
    assert leaves and all(isinstance(x, np.ndarray) for x in leaves)
    assert params["lstm_0"]["B"].shape == (2, 4 * 16)
    assert jax.tree.all(jax.tree.map(np.array_equal, restore_checkpoint(workdir, step=2)[1], params))
    with pytest.raises(CheckpointError, match=r"no checkpoint for step 3 \(have \[2\]\)"):
        restore_checkpoint(workdir, step=3)


def test_restore_checkpoint_needs_config_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        restore_checkpoint(str(tmp_path))


def _saved_workdir(tmp_path, **overrides) -> str:
    """A workdir holding only the config.json of tiny_config(**overrides)."""
    with open(tmp_path / "config.json", "w") as f:
        json.dump(tiny_config(**overrides).to_dict(), f)
    return str(tmp_path)


def test_evaluation_config_is_the_saved_one_with_the_given_evaluation_keys(tmp_path):
    workdir = _saved_workdir(tmp_path, **{"model.lstm.use_skip_connections": False})
    assert evaluation_config(workdir).to_dict() == saved_config(workdir).to_dict()
    given = tiny_config(
        **{"model.lstm.use_skip_connections": False, "eval.batch_size": 2, "data.eval_split": "test",
           "train.batch_size": 64, "seed": 7}
    )
    config = evaluation_config(workdir, given)
    assert (config.eval.batch_size, config.data.eval_split) == (2, "test")  # Evaluation keys: given.
    assert (config.train.batch_size, config.seed) == (4, 0)  # Training keys: the trained run's.
    assert config.model.lstm.use_skip_connections is False


@pytest.mark.parametrize(
    "key, given, saved",
    [("model.lstm.use_skip_connections", False, True), ("data.max_chars_per_token", 50, 12),
     ("model.char_cnn.filters", [[1, 4]], [[1, 4], [2, 8], [3, 8]])],
)
def test_a_given_model_key_that_differs_is_an_error_naming_it(tmp_path, key, given, saved):
    workdir = _saved_workdir(tmp_path)
    with pytest.raises(ConfigMismatchError) as error:
        evaluation_config(workdir, tiny_config(**{key: given}))
    assert str(error.value) == (
        f"--config sets {key}={given!r}, but the model in {workdir} was trained with {key}={saved!r} "
        "(its config.json): evaluation always builds the trained model, drop the override"
    )
