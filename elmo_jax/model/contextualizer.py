"""The contextualizer interface: what the biLM asks of the stacks between its token encoder and softmax.

It reads both streams at once and carries a state from window to window; it shares the biLM's
scope, params and dropouts (docs/contextualizers.md, "Adding a contextualizer"). Each one declares
itself in its class: its name (`model.contextualizer`'s value), its config section `model.<name>`
(the keys of its own fields) and the checks across keys that its section needs.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.sections import Section


class Contextualizer(nn.Module):
    """Base of every contextualizer: the biLM's shared fields and the contract. `__call__`: x
    `[2, B, T, input_dim]`, mask `[2, B, T]` -> (L outputs `[2, B, T, width]`, next state);
    `initial_state(B)`: zeros, rows on axis 1; `flops_per_token()`: forward matmul FLOPs per token
    and direction. Subclasses add their config section's keys as fields."""

    config_name: ClassVar[str]  # Its value of `model.contextualizer`, and its section's name under `model`.
    summary: ClassVar[str]  # What it is, in a few words: its entry in `model.contextualizer`'s meaning.
    section: ClassVar[Section]  # Its config section: the keys of its own fields (n_layers among them).
    bilm_tf_format: ClassVar[bool] = False  # bilm-tf's options.json and hdf5 weights can hold it.

    n_layers: int = 2
    width: int = 512  # P (model.width): every layer's output width.
    input_dim: int = 512  # F: the token embeddings' width.
    dropout: float = 0.1  # Before the layers after the first, and on the top layer (the biLM's).
    token_dropout: float = 0.1  # On the token embeddings, the first layer's input.
    remat: bool = False
    dtype: Any = jnp.float32
    init_range: float = 0.0  # > 0: every weight from U(-init_range, init_range).

    @classmethod
    def check_config(cls, model: Mapping[str, Any], input_dim: int) -> None:
        """ConfigError for values of its section that do not fit together or with `config.model`'s
        other keys (complete: defaults filled in), its inputs `input_dim` wide; none by default."""

    def setup(self) -> None:
        self.drop = nn.Dropout(self.dropout)
        self.token_drop = nn.Dropout(self.token_dropout)

    def __call__(self, x: jax.Array, mask: jax.Array, state: Any, train: bool = False) -> tuple[list[jax.Array], Any]:
        raise NotImplementedError

    def initial_state(self, batch_size: int) -> Any:
        raise NotImplementedError

    def flops_per_token(self) -> int:
        raise NotImplementedError
