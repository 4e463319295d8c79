"""The model record a checkpoint keeps: the keys that define what the model computes."""

from __future__ import annotations

from elmo_jax.config import schema
from elmo_jax.config.model_record import VOCABULARY, Difference, model_record, record_difference


def test_the_record_holds_the_keys_that_change_the_computation_and_leaves_out_how_it_is_run():
    record = model_record(schema.get_config())
    for key in ("model.transformer.norm", "model.transformer.positions", "model.char_cnn.activation",
                "model.lstm.cell_clip", "model.lstm.use_skip_connections", "model.lstm.dim",
                "data.max_chars_per_token"):
        assert key in record, key
    for key in ("model.dtype", "model.lstm.kernel", "model.lstm.unroll", "model.dropout", "model.softmax.sampled",
                "model.lstm.initializer", "train.batch_size", "data.train_files", "eval.batch_size"):
        assert key not in record, key


def test_the_first_differing_key_is_named_and_keys_only_one_side_knows_are_skipped():
    config = schema.get_config()
    recorded = model_record(config)
    config.model.transformer.norm = "post"
    config.model.lstm.cell_clip = 1.0
    configured = model_record(config)
    assert record_difference(configured, recorded) == Difference("model.lstm.cell_clip", 1.0, 3.0)
    del recorded["model.lstm.cell_clip"]  # A key added to the schema since the checkpoint was written.
    recorded["model.retired_key"] = 1  # A key dropped since.
    assert record_difference(configured, recorded) == Difference("model.transformer.norm", "post", "pre")
    assert record_difference(recorded, recorded) is None


def test_values_compare_as_config_json_stores_them():
    config = schema.get_config()
    config.model.char_cnn.filters = ((1, 32), (2, 32))  # Tuples, as a recipe may write them.
    saved = model_record(config)
    assert saved["model.char_cnn.filters"] == [[1, 32], [2, 32]]
    assert record_difference(model_record(config), saved) is None


def test_a_vocabulary_fingerprint_is_recorded_beside_the_keys_and_compared_as_one():
    config = schema.get_config()
    recorded = model_record(config, "sha256:aa")
    assert recorded == {**model_record(config), VOCABULARY: "sha256:aa"}
    assert record_difference(model_record(config, "sha256:bb"), recorded) == Difference(VOCABULARY, "sha256:bb", "sha256:aa")
    assert record_difference(model_record(config), recorded) is None  # A reader of the config alone skips it.
