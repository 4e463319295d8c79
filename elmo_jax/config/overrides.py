"""Dotted keys of a config ('model.lstm.n_layers'): reading, setting and listing them."""

from __future__ import annotations

import json
from typing import Any, Mapping

import ml_collections


def get_key(config: Mapping, key: str) -> Any:
    """The value at dotted `key` (KeyError naming the missing part)."""
    node: Any = config
    for name in key.split("."):
        node = node[name]
    return node


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any], source: str = "override") -> None:
    """Sets each dotted key in place; a key the config lacks is an error naming it."""
    for key, value in overrides.items():
        *parents, leaf = key.split(".")
        node = get_key(config, ".".join(parents)) if parents else config
        if leaf not in node:
            raise KeyError(f"{source} sets unknown key {key!r}")
        node[leaf] = value


def leaves(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """{'model.lstm.dim': 16, ...}: the dotted key of every value of a nested mapping that is not one."""
    found: dict[str, Any] = {}
    for name, value in tree.items():
        if isinstance(value, Mapping):
            found.update(leaves(value, f"{prefix}{name}."))
        else:
            found[f"{prefix}{name}"] = value
    return found


def under(key: str, patterns: tuple[str, ...]) -> bool:
    """`key` is one of `patterns`, or under one that ends with a dot ('model.' holds 'model.lstm.dim')."""
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in patterns)


def as_json(value: Any) -> Any:
    """`value` as config.json stores it (tuples become lists), for comparing with a saved value."""
    return json.loads(json.dumps(value))
