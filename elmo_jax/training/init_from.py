"""Continue training a bilm-tf/AllenNLP model (domain adaptation, as bilm-tf's `bin/restart.py`):
its shape from `config.init.options`; with `config.init.softmax_weights` the words its vocabulary
has keep their softmax rows; the rest, and the optimizer, start fresh. Or an ELMoForManyLangs model
directory (`config.init.manylangs`): its shape, token encoder and weights, its char.dic/word.dic
spelling the words (data/manylangs_inputs.py), a fresh softmax (none is released) and optimizer.
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections
import numpy as np

from elmo_jax.config import schema
from elmo_jax.config.overrides import apply_overrides, as_json, get_key
from elmo_jax.data.manylangs_inputs import ManyLangsInputs
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.interop.bilm_hdf5 import load_weights, options_shape
from elmo_jax.interop.manylangs import read_model
from elmo_jax.interop.manylangs_params import config_keys, manylangs_inputs, manylangs_params
from elmo_jax.interop.softmax_hdf5 import load_softmax


def _with_shape(config: ml_collections.ConfigDict, shape: Mapping[str, Any], source: str) -> ml_collections.ConfigDict:
    """`config` with the dotted keys `shape` of the model `source` names; ValueError naming a shape key
    that `config` sets to another value than the schema's default and the model's."""
    defaults = schema.get_config()
    for key, wanted in shape.items():
        given = as_json(get_key(config, key))
        if given != as_json(get_key(defaults, key)) and given != as_json(wanted):
            raise ValueError(
                f"{key}={given!r} disagrees with {source} ({as_json(wanted)!r}): continued training "
                "takes the model's shape from it, drop the key"
            )
    updated = ml_collections.ConfigDict(config.to_dict())
    apply_overrides(updated, dict(shape), source=source)
    return updated


def config_with_init_model(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """`config` with the shape of the model `config.init.options` describes (`_with_shape`)."""
    if not config.init.weights:
        raise ValueError("config.init.options needs config.init.weights (the model's hdf5 weights)")
    if bool(config.init.softmax_weights) != bool(config.init.vocab_file):
        raise ValueError("config.init.softmax_weights and config.init.vocab_file go together (line i = softmax row i)")
    return _with_shape(config, options_shape(config.init.options), config.init.options)


def config_with_manylangs_model(config: ml_collections.ConfigDict) -> tuple[ml_collections.ConfigDict, ManyLangsInputs]:
    """(`config` with the shape and token encoder of the ELMoForManyLangs model directory
    `config.init.manylangs` (`_with_shape`), its token inputs); ManyLangsError naming a file of it that
    cannot be read."""
    model = read_model(config.init.manylangs)
    return _with_shape(config, config_keys(model), config.init.manylangs), manylangs_inputs(model)


def manylangs_init_params(config: ml_collections.ConfigDict, fresh: dict) -> dict:
    """Params for training: the ELMoForManyLangs model's (`config.init.manylangs`), with `fresh`'s
    softmax (the freshly initialised params' `{W: [V, P], b: [V]}`: the model releases none)."""
    params = manylangs_params(read_model(config.init.manylangs))
    params["softmax"] = {name: np.array(value) for name, value in fresh["softmax"].items()}
    return params


def init_params(config: ml_collections.ConfigDict, vocab: Vocabulary, fresh: dict) -> dict:
    """Params for training on `vocab`: the model's weights, with `fresh`'s softmax (the freshly
    initialised params' `softmax` `{W: [V, P], b: [V]}`) where the model's softmax has no row."""
    params = load_weights(config, config.init.weights)
    softmax = {name: np.array(value) for name, value in fresh["softmax"].items()}
    if config.init.softmax_weights:
        source_vocab = Vocabulary.load(config.init.vocab_file)
        source = load_softmax(config.init.softmax_weights, len(source_vocab), softmax["W"].shape[1])
        source_rows = {word: row for row, word in enumerate(source_vocab.words)}
        pairs = [(row, source_rows[word]) for row, word in enumerate(vocab.words) if word in source_rows]
        if pairs:
            target, src = (np.array(a) for a in zip(*pairs))
            softmax["W"][target] = source["W"][src]
            softmax["b"][target] = source["b"][src]
    params["softmax"] = softmax
    return params
