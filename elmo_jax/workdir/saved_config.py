"""The config a training workdir was trained with (WORKDIR/config.json): the only one that builds
its model, and the base of a run's further commands (`--config=workdir:WORKDIR`, configs/workdir.py)."""

from __future__ import annotations

import glob
import json
import logging
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


# The config keys of file patterns (comma-separated globs) that a workdir's later commands read.
DATA_PATH_KEYS = ("train_files", "eval_files")


def start_directory(workdir: str) -> str | None:
    """The directory the run's latest start ran in (run_info.json), None when it is not recorded."""
    try:
        with open(os.path.join(workdir, workdir_files.RUN_INFO), encoding="utf-8") as f:
            directory = json.load(f)["starts"][-1].get("directory")
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return directory if isinstance(directory, str) else None


def _from_start(pattern: str, started: str) -> str:
    """`pattern` joined to `started` when it is relative and matches files there but none here."""
    if os.path.isabs(pattern) or glob.glob(pattern):
        return pattern
    joined = os.path.join(started, pattern)
    return joined if glob.glob(joined) else pattern


def with_paths_from_start(config: ml_collections.ConfigDict, workdir: str) -> ml_collections.ConfigDict:
    """`config` (the workdir's) with each relative pattern of DATA_PATH_KEYS that matches no file
    from here, but does from the directory the run was trained in, read from there (one log line
    says so): `evaluate.py --workdir=/abs/run` works from any directory."""
    started = start_directory(workdir)
    if started is None:
        return config
    for key in DATA_PATH_KEYS:
        patterns = [p.strip() for p in config.data[key].split(",") if p.strip()]
        moved = [_from_start(pattern, started) for pattern in patterns]
        if moved != patterns:
            logging.info("data.%s of %s: relative paths read from %s, where the run was trained", key, workdir, started)
            config.data[key] = ",".join(moved)
    return config
