"""The parameter tree of every shipped recipe (and of the other contextualizers' variants) is the
recorded one: checkpoints, the bilm-tf export, the C++ and Pallas kernels read these names
(`lstm_{i}` at the top level, `gated_cnn`, `transformer`), so a refactor of the modules must keep
them. tests/model/fixtures/param_trees.json holds every path's shape and dtype; rewrite it with
`python -m tests.model.test_param_trees` only where a tree is meant to change."""

import json
import pathlib

import jax
import pytest

from elmo_jax.config.overrides import apply_overrides
from elmo_jax.config.recipes import recipe_module
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import param_shapes

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "param_trees.json"
RECIPES = [
    "default", "demo", "elmo_small", "elmo_medium", "elmo_original", "tests/tiny", "tests/no_projection",
    "ptb_char_small", "ptb_char_small_cpu", "ptb_char_large", "ptb_word_small", "ptb_word_medium",
    "ptb_char_small_gated_cnn", "ptb_char_small_transformer",
]
VARIANTS = {  # tests/tiny with each contextualizer's options that change the tree.
    "tiny_gated_cnn": {"model.contextualizer": "gated_cnn", "model.gated_cnn.n_layers": 3},
    "tiny_transformer_learned_shared": {
        "model.contextualizer": "transformer", "model.transformer.positions": "learned",
        "model.transformer.shared_directions": True, "model.transformer.n_heads": 2,
    },
    "tiny_word_transformer_post": {
        "model.contextualizer": "transformer", "model.token_encoder": "word", "model.transformer.norm": "post",
        "model.transformer.n_heads": 2,
    },
    "tiny_lstm_no_skip_3_layers": {"model.lstm.n_layers": 3, "model.lstm.use_skip_connections": False},
}
VOCAB = 1000


def _config(name: str):
    if name in VARIANTS:
        config = recipe_module("tests/tiny").get_config()
        apply_overrides(config, VARIANTS[name])
        return config
    return recipe_module(name).get_config()


def tree(name: str) -> dict[str, list]:
    """'path/to/array' -> [shape, dtype] of the params the recipe's biLM initialises."""
    config = _config(name)
    shapes = param_shapes(bilm_from_config(config.model, VOCAB), config.data.max_chars_per_token)
    return {
        "/".join(str(k.key) for k in path): [list(leaf.shape), str(leaf.dtype)]
        for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]
    }


@pytest.mark.parametrize("name", RECIPES + list(VARIANTS))
def test_param_tree_is_the_recorded_one(name: str) -> None:
    assert tree(name) == json.loads(FIXTURE.read_text())[name]


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({name: tree(name) for name in RECIPES + list(VARIANTS)}, indent=0, sort_keys=True) + "\n")
