"""The registry of contextualizers: `model.contextualizer`'s name -> its class (model/contextualizer.py).

The biLM and the FLOPs count ask this registry, and the config's validation allows its names (it
sits a layer below, so registering tells it: `allow_contextualizer`). A new contextualizer is one
module (a `Contextualizer` subclass), its config section (`model.<name>`) and one
`register_contextualizer` call.
"""

from __future__ import annotations

from typing import Any, Mapping

from elmo_jax.config.validation import ConfigError, allow_contextualizer
from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.gated_cnn import GatedCNNContextualizer
from elmo_jax.model.lstm_stack import LSTMContextualizer
from elmo_jax.model.transformer import TransformerContextualizer

CONTEXTUALIZERS: dict[str, type[Contextualizer]] = {
    "lstm": LSTMContextualizer,
    "gated_cnn": GatedCNNContextualizer,
    "transformer": TransformerContextualizer,
}  # Their names are validation.CONTEXTUALIZER_NAMES' first ones.


def register_contextualizer(name: str, cls: type[Contextualizer]) -> None:
    """Makes `model.contextualizer=name` build `cls` (its options from `config.model[name]`) and
    a config naming it valid."""
    CONTEXTUALIZERS[name] = cls
    allow_contextualizer(name)


def contextualizer_class(name: str) -> type[Contextualizer]:
    """The class registered as `name`; ConfigError naming the key and the registered names if none is."""
    if name not in CONTEXTUALIZERS:
        allowed = ", ".join(repr(n) for n in CONTEXTUALIZERS)
        raise ConfigError(f"config key model.contextualizer={name!r} is not one of {allowed}")
    return CONTEXTUALIZERS[name]


def contextualizer_from_config(model: Mapping[str, Any], input_dim: int) -> Contextualizer:
    """The (unbound) contextualizer `config.model` names, `input_dim` wide inputs: what it costs and holds."""
    cls = contextualizer_class(model["contextualizer"])
    options = cls.options_from_config(model)
    return cls(width=model["lstm"]["projection_dim"], input_dim=input_dim, **options, parent=None)
