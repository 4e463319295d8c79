"""The registry of contextualizers: `model.contextualizer`'s name -> its class (model/contextualizer.py).

Registering a name also declares its config section in the schema (`schema.declare_contextualizer`).
"""

from __future__ import annotations

from typing import Any, Mapping

from elmo_jax.config import schema
from elmo_jax.config.checks import ConfigError
from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.gated_cnn import GatedCNNContextualizer
from elmo_jax.model.lstm_stack import LSTMContextualizer
from elmo_jax.model.transformer import TransformerContextualizer

CONTEXTUALIZERS: dict[str, type[Contextualizer]] = {
    "lstm": LSTMContextualizer,
    "gated_cnn": GatedCNNContextualizer,
    "transformer": TransformerContextualizer,
}  # Their sections are declared in the schema (schema.CONTEXTUALIZER_NAMES).


def register_contextualizer(name: str, cls: type[Contextualizer], section: schema.Section) -> None:
    """Makes `model.contextualizer=name` build `cls`, its fields from the config section
    `model.<name>` that `section` declares."""
    CONTEXTUALIZERS[name] = cls
    schema.declare_contextualizer(name, section)


def contextualizer_class(name: str) -> type[Contextualizer]:
    """The class registered as `name`; ConfigError naming the key and the registered names if none is."""
    if name not in CONTEXTUALIZERS:
        allowed = ", ".join(repr(n) for n in CONTEXTUALIZERS)
        raise ConfigError(f"config key model.contextualizer={name!r} is not one of {allowed}")
    return CONTEXTUALIZERS[name]


def contextualizer_options(model: Mapping[str, Any]) -> dict[str, Any]:
    """The contextualizer's own fields from `config.model`: its section, whole."""
    name = model["contextualizer"]
    contextualizer_class(name)  # ConfigError for a name not registered.
    return schema.section_options(model[name], f"model.{name}")


def contextualizer_from_config(model: Mapping[str, Any], input_dim: int) -> Contextualizer:
    """The (unbound) contextualizer `config.model` names, `input_dim` wide inputs: what it costs and holds."""
    cls = contextualizer_class(model["contextualizer"])
    return cls(width=model["width"], input_dim=input_dim, **contextualizer_options(model), parent=None)
