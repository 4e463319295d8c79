"""Configs and checkpoint records written by earlier elmo-jax, read with today's key names.

`RENAMED` maps each key renamed since to its name today (the width of every layer was
`model.lstm.projection_dim`, and the LSTM's unroll and kernel keys sat under `model`, while the LSTM
was the only contextualizer). Readers of a saved
config.json (workdir/saved_config.py) and of a checkpoint's model record (workdir/checkpoints.py)
move the old keys before anything reads them.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from elmo_jax.config.overrides import leaves

RENAMED = {
    "model.lstm.projection_dim": "model.width",
    # The LSTM's own keys, in its section since the other contextualizers came.
    "model.unroll": "model.lstm.unroll",
    "model.lstm_kernel": "model.lstm.kernel",
}


def migrated_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A flat {dotted key: value} record with each old key under its name of today."""
    return {RENAMED.get(key, key): value for key, value in record.items()}


def migrated_config(saved: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A nested config (a saved config.json) with each old key moved to its name of today.
    ValueError naming `source` and both keys when it holds an old key and its new name with
    different values."""
    flat = leaves(saved)
    config = copy.deepcopy(dict(saved))
    for old, new in RENAMED.items():
        if old not in flat:
            continue
        if new in flat and flat[new] != flat[old]:
            raise ValueError(f"{source}: {old}={flat[old]!r} and {new}={flat[new]!r} disagree ({old} is now {new})")
        *old_parents, old_leaf = old.split(".")
        value = _section(config, old_parents).pop(old_leaf)
        *new_parents, new_leaf = new.split(".")
        _section(config, new_parents)[new_leaf] = value
    return config


def _section(config: dict[str, Any], path: list[str]) -> dict[str, Any]:
    for name in path:
        config = config.setdefault(name, {})
    return config
