"""AllenNLP's ELMo fixture files, made here: a small random biLM of the shapes of AllenNLP's
`tests/fixtures/elmo/options.json` (2 layers, projection 16, so vectors of 32), written as bilm-tf
files by elmo-jax's own export, with its NumPy reference (tests/reference/bilm_numpy.py).

Shared by the ported AllenNLP tests and the test of docs/coming_from_allennlp.md; each test module
makes its own module-scoped fixture with `write_elmo_files(tmp_path_factory.mktemp(...))`.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import jax
import numpy as np

from elmo_jax.interop.bilm_hdf5 import load_options, save_options, save_weights
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import init_params
from tests.reference.bilm_numpy import ReferenceBiLM

# The shapes of AllenNLP's tests/fixtures/elmo/options.json.
ALLENNLP_OPTIONS = {
    "lstm": {"cell_clip": 3, "use_skip_connections": True, "n_layers": 2, "proj_clip": 3, "projection_dim": 16,
             "dim": 64},
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], "n_highway": 2,
                 "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"},
}


class ElmoFiles(NamedTuple):
    """AllenNLP's `ElmoTestCase` attributes, and the NumPy reference of the files."""

    options_file: str
    weight_file: str
    reference: ReferenceBiLM


def write_elmo_files(directory, seed: int = 7) -> ElmoFiles:
    """A random biLM of AllenNLP's fixture shapes as bilm-tf files in `directory` (a pathlib.Path).

    Weights N(0, 0.1): activations about 1 and LSTMs that forget, so float32 keeps AllenNLP's
    6 decimals of the float64 reference, stateful batches included."""
    with open(directory / "allennlp_options.json", "w") as f:
        json.dump(ALLENNLP_OPTIONS, f)
    config = load_options(str(directory / "allennlp_options.json"))
    model = bilm_from_config(config.model, vocab_size=1)
    shapes = jax.eval_shape(lambda: init_params(model, jax.random.key(0), config.data.max_chars_per_token))
    rng = np.random.default_rng(seed)
    params = jax.tree.map(lambda s: rng.normal(0.0, 0.1, s.shape).astype(s.dtype), shapes)
    options_file, weight_file = str(directory / "options.json"), str(directory / "lm_weights.hdf5")
    save_options(config, options_file)
    save_weights(params, config, weight_file)
    return ElmoFiles(options_file, weight_file, ReferenceBiLM.from_files(options_file, weight_file))
