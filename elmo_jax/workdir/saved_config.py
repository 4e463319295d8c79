"""The config a training workdir was trained with (WORKDIR/config.json): the only one that builds
its model, and the base of a run's further commands (`--config=workdir:WORKDIR`, configs/workdir.py)."""

from __future__ import annotations

import json
import os

import ml_collections

from elmo_jax.config import ConfigError, schema, validate
from elmo_jax.config.migration import migrated_config
from elmo_jax.runtime import workdir_files


def saved_config(workdir: str) -> ml_collections.ConfigDict:
    """`workdir`'s config.json, migrated to today's keys, completed with the schema's defaults and
    validated. FileNotFoundError, ValueError (not a JSON object) or ConfigError naming the file."""
    config_path = os.path.join(workdir, workdir_files.CONFIG)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{workdir}: no config.json (is this an elmo-jax training workdir?)")
    with open(config_path, encoding="utf-8") as f:
        try:
            saved = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{config_path}: not valid JSON ({e})") from e
    if not isinstance(saved, dict):
        raise ValueError(f"{config_path}: not a JSON object of config sections")
    config = schema.with_defaults(migrated_config(saved, config_path))
    try:
        validate(config)
    except ConfigError as e:
        raise ConfigError(f"{config_path}: {e}") from None
    return config
