"""What a checkpoint records of the model that wrote it: the config keys that define what the model
computes, so that a reader can refuse a config.json that builds another model from its params.

A changed shape (a wider LSTM) shows in the params, but many keys change the computation and no
shape: the Transformer's norm placement, the positions, the activation, the clips, skip
connections. Each checkpoint stores `model_record(config)` beside its arrays; readers and resumed
runs compare it with their config (`record_difference`).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import ml_collections

from elmo_jax.config import schema
from elmo_jax.config.overrides import as_json, leaves, under

# Keys that define the model's function: its inputs (chars per token) and every module, but the
# keys declared `how_computed` (the dtype, the kernels, dropout, ...: they may change between
# training and evaluation).
RECORDED = ("model.", "data.max_chars_per_token")


# The record's key for the fingerprint of the run's vocabulary (`Vocabulary.fingerprint`): the
# softmax's rows are its words in its order, which no shape shows (two lines swapped, the same size).
VOCABULARY = "vocabulary"
# The record's key for the char ids the char table's rows stand for: BYTES (bilm-tf's), or the
# fingerprint of the run's character vocabulary (`CharVocabulary.fingerprint`). Checkpoints written
# before it read bytes.
CHARACTERS = "characters"
BYTES = "bytes"


def model_record(
    config: ml_collections.ConfigDict, vocabulary: str | None = None, characters: str | None = None
) -> dict[str, Any]:
    """{'model.transformer.norm': 'pre', ...}: the recorded keys of `config` and their JSON values,
    with `vocabulary` (a fingerprint) the run's vocabulary under VOCABULARY, and with `characters`
    (BYTES or a fingerprint) its char ids under CHARACTERS."""
    how_computed = {name for name, key in schema.keys().items() if key.how_computed}
    record = {
        key: as_json(value)
        for key, value in sorted(leaves(config.to_dict()).items())
        if under(key, RECORDED) and key not in how_computed
    }
    if vocabulary is not None:
        record[VOCABULARY] = vocabulary
    if characters is not None:
        record[CHARACTERS] = characters
    return record


class Difference(NamedTuple):
    key: str
    configured: Any
    recorded: Any


def record_difference(configured: Mapping[str, Any], recorded: Mapping[str, Any]) -> Difference | None:
    """The first key whose value in the record of a config differs from a checkpoint's, or None.

    Keys only one side knows are skipped: a key added to the schema since the checkpoint was
    written takes its default, the behaviour of the code that trained it; a key dropped since
    no longer builds anything.
    """
    for key in sorted(configured.keys() & recorded.keys()):
        if configured[key] != recorded[key]:
            return Difference(key, configured[key], recorded[key])
    return None
