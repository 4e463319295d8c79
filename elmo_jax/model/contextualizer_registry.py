"""The registry of contextualizers: `model.contextualizer`'s values, each the class that declares it
(model/contextualizer.py: its name, its config section, its checks) and builds it.

config/schema.py reads the registry for `model.contextualizer`'s allowed values and the sections
`model.<name>`; the biLM, flops and validation ask the registered class.
"""

from __future__ import annotations

from typing import Any, Mapping

from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.gated_cnn import GatedCNNContextualizer
from elmo_jax.model.lstm_stack import LSTMContextualizer
from elmo_jax.model.transformer import TransformerContextualizer
from elmo_jax.sections import ConfigError

CONTEXTUALIZERS: dict[str, type[Contextualizer]] = {
    cls.config_name: cls for cls in (LSTMContextualizer, GatedCNNContextualizer, TransformerContextualizer)
}


def register_contextualizer(cls: type[Contextualizer]) -> None:
    """Makes `model.contextualizer=cls.config_name` build `cls`, its fields from its section `model.<name>`."""
    CONTEXTUALIZERS[cls.config_name] = cls


def contextualizer_class(name: str) -> type[Contextualizer]:
    """The class registered as `name`; ConfigError naming the key and the registered names if none is."""
    if name not in CONTEXTUALIZERS:
        allowed = ", ".join(repr(n) for n in CONTEXTUALIZERS)
        raise ConfigError(f"config key model.contextualizer={name!r} is not one of {allowed}")
    return CONTEXTUALIZERS[name]


def contextualizer_options(model: Mapping[str, Any]) -> dict[str, Any]:
    """The contextualizer's own fields from `config.model`: its section, whole."""
    name = model["contextualizer"]
    return contextualizer_class(name).section.options(model[name])


def contextualizer_from_config(model: Mapping[str, Any], input_dim: int) -> Contextualizer:
    """The (unbound) contextualizer `config.model` names, `input_dim` wide inputs: what it costs and holds."""
    cls = contextualizer_class(model["contextualizer"])
    return cls(width=model["width"], input_dim=input_dim, **contextualizer_options(model), parent=None)
