"""How a config section is declared: `Key`s (default, allowed values, meaning) grouped in `Section`s.

Each part of the model declares its own section beside its code (the LSTM `model.lstm` in
model/lstm_stack.py, the char CNN `model.char_cnn` in model/char_cnn.py, ...); config/schema.py
assembles them with the run's sections into the whole schema. A section gives the default config
of its keys (`defaults`) and the keyword arguments of the module it configures (`options`).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, NamedTuple

import ml_collections

from elmo_jax.sections.checks import Check, ConfigError


class Key(NamedTuple):
    """One key: its default, its allowed values, what it means, the value that means "none" (`off`:
    e.g. 0 for no clipping), which the module it configures receives as None, and whether it
    changes only how the model is computed or trained, not what it computes (`how_computed`: the
    dtype, a kernel's choice, dropout; it may differ between training and evaluation, and a
    checkpoint's model record leaves it out)."""

    default: Any
    check: Check
    meaning: str
    off: Any = None
    how_computed: bool = False

    def value(self, configured: Any) -> Any:
        """The value a module receives for `configured`: None for the `off` value."""
        return None if self.off is not None and configured == self.off else configured


class Section(NamedTuple):
    """A group of keys (and sections) configuring one thing; `meaning` says what."""

    meaning: str
    keys: dict[str, "Key | Section"]

    def walk(self, prefix: str = "") -> Iterator[tuple[str, "Key | Section"]]:
        """(dotted name, item) of every key and section below this one, each section before its keys."""
        for name, item in self.keys.items():
            yield prefix + name, item
            if isinstance(item, Section):
                yield from item.walk(f"{prefix}{name}.")

    def defaults(self) -> ml_collections.ConfigDict:
        """Its keys' defaults as a config, sections nested."""
        config = ml_collections.ConfigDict()
        for name, item in self.keys.items():
            config[name] = item.defaults() if isinstance(item, Section) else item.default
        return config

    def completed(self, partial: Mapping[str, Any]) -> ml_collections.ConfigDict:
        """`partial` (nested dicts or a ConfigDict: a saved config.json, an options.json's model) with
        every key it lacks, at any depth, at its default: readers index keys instead of guessing defaults
        of their own, and a key declared after a config was saved reads as what came before it."""
        return ml_collections.ConfigDict(_merged(dict(partial), self.defaults().to_dict()))

    def check_values(self, config: Mapping[str, Any], missing: str = "") -> None:
        """ConfigError naming the first key whose value in `config` its declaration does not allow, or that
        `config` lacks (`missing`: what the message adds then)."""
        for name, declared in self.walk():
            if isinstance(declared, Section):
                continue
            node: Any = config
            try:
                for part in name.split("."):
                    node = node[part]
            except (KeyError, TypeError, AttributeError):
                raise ConfigError(f"config key {name} is missing{missing}") from None
            problem = declared.check.problem(node)
            if problem:
                raise ConfigError(f"config key {name}={node!r} {problem}")

    def default(self, name: str) -> Any:
        """The default of its key `name`: what a module's field of that key defaults to."""
        return self.keys[name].default

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Its own keys (not its sections') as keyword arguments of the function or module it
        configures: their `values` (this section of a complete config), an `off` value as None,
        lists as tuples (a module's fields are hashed)."""
        return {name: _frozen(key.value(values[name])) for name, key in self.keys.items() if isinstance(key, Key)}


def _merged(partial: dict, defaults: dict) -> dict:
    merged = dict(partial)
    for key, value in defaults.items():
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], (Mapping, ml_collections.ConfigDict)):
            merged[key] = _merged(dict(merged[key]), value)
    return merged


def _frozen(value: Any) -> Any:
    return tuple(map(_frozen, value)) if isinstance(value, (list, tuple)) else value
