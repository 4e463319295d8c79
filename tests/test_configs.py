"""Every shipped config builds a model; ablation presets change what they say."""

import importlib

import jax
import pytest

from configs import ablations
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training.state import dummy_inputs

CONFIGS = ["default", "demo", "elmo_small", "elmo_medium", "elmo_original", "tests.tiny"]


def _n_params(config, vocab_size=1000):
    model = bilm_from_config(config.model, vocab_size)
    shapes = jax.eval_shape(
        lambda: model.init(jax.random.key(0), dummy_inputs(model, 1, 1, config.data.max_chars_per_token), model.initial_state(1))
    )
    return sum(x.size for k, v in shapes["params"].items() if k != "softmax" for x in jax.tree.leaves(v))


@pytest.mark.parametrize("name", CONFIGS)
def test_config_builds(name):
    config = importlib.import_module(f"configs.{name}").get_config()
    assert _n_params(config) > 0


@pytest.mark.parametrize("name,millions", [("elmo_small", 13.6), ("elmo_medium", 28.0), ("elmo_original", 93.6)])
def test_released_shapes_have_allennlp_parameter_counts(name, millions):
    config = importlib.import_module(f"configs.{name}").get_config()
    assert _n_params(config) / 1e6 == pytest.approx(millions, abs=0.05)


@pytest.mark.parametrize("preset", sorted(ablations.PRESETS))
def test_ablation_presets(preset):
    config = ablations.get_config(preset)
    base = ablations.get_config("baseline")
    assert _n_params(config) > 0
    changed = {k for k in ablations.PRESETS[preset]}
    for key in changed:
        node_c, node_b = config, base
        for part in key.split("."):
            node_c, node_b = node_c[part], node_b[part]
        assert node_c == ablations.PRESETS[preset][key]


def test_unknown_ablation_is_an_error():
    with pytest.raises(ValueError, match="unknown ablation 'no_such'"):
        ablations.get_config("no_such")
