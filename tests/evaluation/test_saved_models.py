"""The config a saved workdir is evaluated under: its config.json with the evaluation keys given."""

import json

import pytest

from elmo_jax.config import schema
from elmo_jax.config.overrides import leaves
from elmo_jax.evaluation.saved_models import ConfigMismatchError, evaluation_config, key_group
from elmo_jax.workdir.saved_config import saved_config
from tests.training.helpers import tiny_config


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
           "data.segmenter": "jieba", "train.batch_size": 64, "seed": 7}
    )
    config = evaluation_config(workdir, given)
    assert (config.eval.batch_size, config.data.eval_split) == (2, "test")  # Evaluation keys: given.
    assert config.data.segmenter == "jieba"  # How the evaluated text is cut (it was ignored).
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


@pytest.mark.parametrize(
    "overrides, names",
    [((), "--config=my_recipe.py sets"), (("model.lstm.use_skip_connections",), "--config sets")],
)
def test_a_differing_model_key_is_named_as_the_recipe_or_the_override_that_set_it(tmp_path, overrides, names):
    """A recipe of another model (evaluate.py --config=my_recipe.py) is not an override to drop."""
    workdir = _saved_workdir(tmp_path)
    given = tiny_config(**{"model.lstm.use_skip_connections": False})
    with pytest.raises(ConfigMismatchError) as error:
        evaluation_config(workdir, given, recipe="my_recipe.py", overrides=overrides)
    advice = "drop the override" if overrides else "give no --config (or the recipe it was trained with)"
    assert str(error.value) == (
        f"{names} model.lstm.use_skip_connections=False, but the model in {workdir} was trained with "
        f"model.lstm.use_skip_connections=True (its config.json): evaluation always builds the trained model, {advice}"
    )


def test_every_key_of_the_schema_is_in_exactly_one_group():
    """Applied, checked against the trained model, or not read (an override refused): none ignored."""
    groups = {key: key_group(key) for key in leaves(schema.get_config().to_dict())}
    assert set(groups.values()) == {"evaluation", "model", "training"}
    assert groups["data.segmenter"] == "evaluation" and groups["eval.every_steps"] == "training"
    with pytest.raises(KeyError, match="'data.no_such_key' is in 0 of evaluation's key groups"):
        key_group("data.no_such_key")


def test_an_override_of_a_training_key_is_refused_and_a_recipes_is_left_alone(tmp_path):
    workdir = _saved_workdir(tmp_path)
    given = tiny_config(**{"train.num_steps": 5, "data.shuffle": False})
    assert evaluation_config(workdir, given, recipe="my_recipe.py").train.num_steps == saved_config(workdir).train.num_steps
    same = tiny_config(**{"train.num_steps": saved_config(workdir).train.num_steps})
    evaluation_config(workdir, same, overrides=("train.num_steps",))  # The training command line, given again.
    with pytest.raises(ConfigMismatchError) as error:
        evaluation_config(workdir, given, recipe="my_recipe.py", overrides=("eval.batch_size", "train.num_steps"))
    assert str(error.value).startswith(
        "--config.train.num_steps is a training key, which evaluation does not read: drop the override"
    )
