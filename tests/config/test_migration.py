"""Keys renamed since a run was trained are read under their names of today."""

import pytest

from elmo_jax.config.migration import RENAMED, migrated_config, migrated_record


def test_an_old_key_moves_to_its_new_name_and_the_rest_is_kept():
    saved = {"model": {"lstm": {"dim": 16, "projection_dim": 8}, "dropout": 0.1}, "seed": 3}
    migrated = migrated_config(saved, "config.json")
    assert migrated == {"model": {"lstm": {"dim": 16}, "dropout": 0.1, "width": 8}, "seed": 3}
    assert saved["model"]["lstm"]["projection_dim"] == 8  # The caller's dict is left alone.


def test_a_config_already_of_today_is_unchanged():
    saved = {"model": {"lstm": {"dim": 16}, "width": 8}}
    assert migrated_config(saved, "config.json") == saved


def test_an_old_and_a_new_key_that_disagree_are_one_error_naming_both():
    saved = {"model": {"lstm": {"projection_dim": 8}, "width": 16}}
    with pytest.raises(ValueError, match=r"^w/config.json: model.lstm.projection_dim=8 and model.width=16 disagree"):
        migrated_config(saved, "w/config.json")


def test_a_checkpoints_record_is_migrated_key_by_key():
    record = {"model.lstm.projection_dim": 8, "model.lstm.dim": 16}
    assert migrated_record(record) == {"model.width": 8, "model.lstm.dim": 16}
    assert set(RENAMED) == {"model.lstm.projection_dim", "model.unroll", "model.lstm_kernel"}


def test_the_lstms_own_keys_move_into_its_section():
    """model.unroll and model.lstm_kernel were the LSTM's keys outside its section."""
    saved = {"model": {"unroll": 2, "lstm_kernel": "pallas", "lstm": {"dim": 16}, "remat": True}}
    assert migrated_config(saved, "config.json") == {
        "model": {"lstm": {"dim": 16, "unroll": 2, "kernel": "pallas"}, "remat": True}
    }
