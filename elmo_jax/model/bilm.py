"""The bidirectional language model: shared token encoder, a contextualizer per direction, shared softmax.

Inputs carry a leading direction axis of size 2 (0 = forward, 1 = the reversed sentences), so one
encoder call and one contextualizer call (model/contextualizer_registry.py) serve both directions.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.linen as nn
from flax.core import FrozenDict
import jax
import jax.numpy as jnp

from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.model import model_section
from elmo_jax.model.char_cnn import SECTION as CHAR_CNN_SECTION
from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.contextualizer_registry import contextualizer_class, contextualizer_options
from elmo_jax.model.distinct_rows import distinct_rows
from elmo_jax.model.lstm import LSTMState
from elmo_jax.model.lstm_stack import LSTMContextualizer
from elmo_jax.model.precision import DTYPES
from elmo_jax.model.softmax import SoftmaxWeights
from elmo_jax.model.token_encoder import TokenEncoder
from elmo_jax.model.token_encoder_registry import token_encoder_class

CHAR_CNN_DEFAULTS = FrozenDict(CHAR_CNN_SECTION.options(CHAR_CNN_SECTION.defaults()))


class BiLM(nn.Module):
    """ELMo biLM: inputs `{'token_ids' [2,B,T], 'char_ids' [2,B,T,C], 'mask' [2,B,T]}`, state
    (`initial_state`) -> (layers `[token embedding, layer 1, ..., layer L]`, each `[2, B, T, P]`
    (the token embedding F wide), top: the last layer after dropout, the new state).
    `char_cnn`: `CharCNNEncoder`'s fields; `contextualizer_fields`: the contextualizer's own."""

    vocab_size: int
    token_encoder: str = model_section.DEFAULT_TOKEN_ENCODER  # A name of model/token_encoder_registry.py.
    char_cnn: Mapping[str, Any] = CHAR_CNN_DEFAULTS
    width: int = 512  # P: the token embeddings', each layer's and the softmax input's width.
    init_range: float = 0.0  # > 0: every weight from U(-init_range, init_range).
    dropout: float = 0.1
    token_dropout: float | None = None  # Dropout on the token embeddings (None = `dropout`).
    remat: bool = False
    dtype: Any = jnp.float32
    conv_block: int = 0  # Char CNN convolutions (conv_pool.resolve_block).
    conv_kernel: str = "auto"  # Their forward pass (conv_pool.resolve_fused).
    distinct_fraction: float = 0.0  # > 0: encode each distinct word once (see embed_tokens).
    contextualizer: str = model_section.DEFAULT_CONTEXTUALIZER  # A name of model/contextualizer_registry.py.
    contextualizer_fields: Mapping[str, Any] = FrozenDict()  # The section model.<contextualizer>, as fields.
    n_characters: int = N_CHARACTERS  # Char ids: bilm-tf's 262, or a character vocabulary's `n_ids`.
    # An imported token encoder's own fields beyond `char_cnn` (model/manylangs_encoder.py's: model.manylangs).
    token_encoder_fields: Mapping[str, Any] = FrozenDict()

    def setup(self) -> None:
        self.encoder = self.token_encoder_class.module(self)
        self.stack = self._contextualizer()
        nn.share_scope(self, self.stack)  # Its params and dropouts directly under the biLM's.
        self.softmax = SoftmaxWeights(self.vocab_size, self.width, self.init_range)

    def _contextualizer(self, **module_args: Any) -> Contextualizer:
        """The registered contextualizer of this biLM's fields."""
        token_rate = self.dropout if self.token_dropout is None else self.token_dropout
        return contextualizer_class(self.contextualizer)(
            width=self.width, input_dim=self.token_dim, dropout=self.dropout, token_dropout=token_rate,
            remat=self.remat, dtype=self.dtype, init_range=self.init_range, **self.contextualizer_fields, **module_args,
        )

    @property
    def stack_spec(self) -> Contextualizer:
        """The contextualizer, unbound: what it holds (`n_layers`, an LSTM's `dim`, ...) without params."""
        return self._contextualizer(parent=None)

    @property
    def has_lstm_gates(self) -> bool:
        """Whether `first_layer_gates` and `contextualize_from_gates` apply (an LSTM stack)."""
        return isinstance(self.stack_spec, LSTMContextualizer)

    @property
    def n_layers(self) -> int:
        """L, the contextualizer's depth."""
        return self.stack_spec.n_layers

    @property
    def token_encoder_class(self) -> type[TokenEncoder]:
        """The registered token encoder `token_encoder` names (model/token_encoder_registry.py)."""
        return token_encoder_class(self.token_encoder)

    @property
    def token_dim(self) -> int:
        """Width of the token embeddings: the char CNN's channels without a token projection, else P."""
        return self.token_encoder_class.width(self.char_cnn, self.width)

    def initial_state(self, batch_size: int) -> Any:
        """The contextualizer's zero state for `batch_size` rows per direction (rows on axis 1)."""
        return self.stack_spec.initial_state(batch_size)

    def embed_tokens(self, inputs: dict[str, jax.Array]) -> jax.Array:
        """Token embeddings `[..., F]`. The char CNN encodes each distinct word once when there are at
        most `distinct_fraction` x tokens of them (`distinct_rows`; same result), else every token."""
        if not self.token_encoder_class.reads_chars:
            return self.encoder(inputs["token_ids"])
        char_ids = inputs["char_ids"]
        lead_shape, n_chars = char_ids.shape[:-1], char_ids.shape[-1]
        flat = char_ids.reshape(-1, n_chars)
        capacity = int(flat.shape[0] * self.distinct_fraction)
        if capacity == 0 or self.is_initializing():
            return self.encoder(char_ids)
        rows, index, count = distinct_rows(flat, capacity, self.n_characters)

        def each_distinct_word(module: "BiLM", rows: jax.Array, index: jax.Array, flat: jax.Array) -> jax.Array:
            return jnp.take(module.encoder(rows), index, axis=0)

        def every_token(module: "BiLM", rows: jax.Array, index: jax.Array, flat: jax.Array) -> jax.Array:
            return module.encoder(flat)

        out = nn.cond(count <= capacity, each_distinct_word, every_token, self, rows, index, flat)
        return out.reshape(*lead_shape, out.shape[-1])

    def __call__(
        self, inputs: dict[str, jax.Array], state: Any, train: bool = False
    ) -> tuple[list[jax.Array], jax.Array, Any]:
        layers, top, new_state = self.contextualize(self.embed_tokens(inputs), inputs["mask"], state, train)
        if self.is_initializing():
            self.softmax()  # Create the softmax parameters.
        return layers, top, new_state

    def contextualize(
        self, x: jax.Array, mask: jax.Array, state: Any, train: bool = False
    ) -> tuple[list[jax.Array], jax.Array, Any]:
        """Token embeddings x `[2, B, T, F]` through the contextualizer: `__call__` without the encoder."""
        outputs, new_state = self.stack(x, mask, state, train)
        return [x, *outputs], self.stack.drop(outputs[-1], deterministic=not train), new_state

    def first_layer_gates(self, x: jax.Array) -> jax.Array:
        """The first LSTM layer's x W_input, x `[N, F]` -> `[2, N, 4 dim]`: per distinct word, for
        `contextualize_from_gates` (LSTMs only)."""
        return self._lstm("first_layer_gates").first_layer_gates(x)

    def _lstm(self, method: str) -> LSTMContextualizer:
        """The contextualizer where it is an LSTM stack, else ValueError naming `method`."""
        if not self.has_lstm_gates:
            raise ValueError(f"BiLM.{method} is for LSTM biLMs; this one's contextualizer is {self.contextualizer!r}")
        return self.stack

    def contextualize_from_gates(self, *args: Any) -> tuple[list[jax.Array], list[LSTMState]]:
        """Inference `contextualize` from the first layer's x W_input `[2, B, T, 4 dim]`: the
        arguments and result of `LSTMContextualizer.contextualize_from_gates` (LSTMs only)."""
        return self._lstm("contextualize_from_gates").contextualize_from_gates(*args)


def bilm_from_config(model: Mapping[str, Any], vocab_size: int, n_characters: int = N_CHARACTERS) -> BiLM:
    """The biLM of `config.model` (complete and validated where it entered), reading `n_characters`
    char ids (a character vocabulary's `n_ids`; bilm-tf's bytes by default)."""
    fields = {name: value for name, value in model_section.section().options(model).items() if name in _FIELDS}
    return BiLM(
        vocab_size=vocab_size, n_characters=n_characters, **{**fields, "dtype": DTYPES[model["dtype"]]},
        char_cnn=FrozenDict(CHAR_CNN_SECTION.options(model["char_cnn"])),
        contextualizer_fields=FrozenDict(contextualizer_options(model)),
        token_encoder_fields=FrozenDict(token_encoder_class(model["token_encoder"]).fields(model)),
    )


_FIELDS = {field.name for field in dataclasses.fields(BiLM)}
