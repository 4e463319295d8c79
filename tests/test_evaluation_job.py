"""Restoring a training workdir's checkpoint with the config it was trained with."""

import jax
import numpy as np
import pytest

from elmo_jax.evaluation_job import restore_checkpoint
from elmo_jax.training.checkpoint import CheckpointError
from tests.training.helpers import make_checkpoint_workdir


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
