"""Dotted-key overrides of a config, e.g. {'model.lstm.n_layers': 1}."""

import ml_collections


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict, source: str = "override") -> None:
    """Sets each dotted key in place; a key the config lacks is an error naming it."""
    for key, value in overrides.items():
        node = config
        *parents, leaf = key.split(".")
        for name in parents:
            node = node[name]
        if leaf not in node:
            raise KeyError(f"{source} sets unknown key {key!r}")
        node[leaf] = value
