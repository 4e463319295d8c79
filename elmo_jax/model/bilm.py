"""The bidirectional language model: shared token encoder, a contextualizer per direction, shared softmax.

Inputs carry a leading direction axis of size 2 (0 = forward stream, 1 = backward stream of
reversed sentences), so one token-encoder call and one contextualizer call serve both directions.
The contextualizer (`model.contextualizer`): 'lstm' (two LSTM stacks, bilm-tf's), 'gated_cnn'
(two stacks of causal gated convolutions, model/gated_cnn.py) or 'transformer' (causal
self-attention, model/transformer.py); each reads its stream in order, so the backward one sees
the text to the right.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.config.schema import with_defaults
from elmo_jax.config.validation import validate
from elmo_jax.model.char_cnn import CharCNNEncoder
from elmo_jax.model.conv_pool import resolve_block
from elmo_jax.model.distinct_rows import distinct_rows
from elmo_jax.model.gated_cnn import GatedCNNStack, initial_buffers
from elmo_jax.model.lstm import BiLSTMLayer, LSTMState
from elmo_jax.model.softmax import SoftmaxWeights
from elmo_jax.model.transformer import TransformerStack
from elmo_jax.model.word_encoder import WordEncoder

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
ENCODERS = ("char_cnn", "word")
CONTEXTUALIZERS = ("lstm", "gated_cnn", "transformer")


class BiLM(nn.Module):
    """ELMo biLM.

    __call__(inputs, state, train) with inputs `{'token_ids' [2,B,T], 'char_ids' [2,B,T,C]
    (char encoder), 'mask' [2,B,T]}` and state (`initial_state`: an `LSTMState` per LSTM layer,
    a buffer `[2, B, k-1, .]` per gated-CNN layer, the Transformer's `TransformerState`) returns
    `(layers, top, new_state)`: layers = `[token embedding, layer 1, ..., layer L]`, each
    `[2, B, T, P]` (the token embedding `[2, B, T, sum of channels]` without a token projection);
    top = the last layer after dropout (the softmax input). n_layers = L, the contextualizer's
    depth; dim, the clips, skip connections, the initializer, unroll and the kernel are the LSTM's;
    kernel_width, residual and dilation_base the gated CNN's; ff_dim .. max_window the Transformer's
    (`TransformerStack`; P wide; inputs longer than max_window run as consecutive windows).
    """

    vocab_size: int
    token_encoder: str = "char_cnn"
    char_embed_dim: int = 16
    filters: Sequence[tuple[int, int]] = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    n_highway: int = 2
    activation: str = "relu"
    token_projection: bool = True  # False: the char CNN's output feeds the first LSTM (Kim et al.).
    dim: int = 4096
    projection_dim: int = 512
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    lstm_initializer: str = "uniform"  # LSTM kernels: 'uniform' | 'glorot_uniform' (lstm.kernel_limits).
    init_range: float = 0.0  # > 0: every weight from U(-init_range, init_range) (Kim et al.: 0.05).
    dropout: float = 0.1
    token_dropout: float | None = None  # Dropout on the token embeddings (None = `dropout`).
    remat: bool = False
    dtype: Any = jnp.float32
    unroll: int = 0
    lstm_kernel: str = "xla"  # The LSTM time loop: 'xla' | 'pallas' (BiLSTMLayer.kernel).
    conv_block: int = 0  # Char CNN convolutions (conv_pool.resolve_block).
    conv_kernel: str = "xla"  # Their forward pass: 'xla' | 'pallas' (CharCNNEncoder.conv_kernel).
    distinct_fraction: float = 0.0  # > 0: encode each distinct word once (see embed_tokens).
    contextualizer: str = "lstm"  # One of CONTEXTUALIZERS.
    kernel_width: int = 3  # Gated CNN: positions each convolution sees.
    residual: bool = True  # Gated CNN: residual connections around layers 2..L.
    dilation_base: int = 1  # Gated CNN: layer l's taps dilation_base^(l-1) positions apart.
    ff_dim: int = 2048  # Transformer: feed-forward width.
    n_heads: int = 8  # Transformer: attention heads.
    norm: str = "pre"  # Transformer: 'pre' | 'post'.
    positions: str = "sinusoidal"  # Transformer: 'learned' | 'sinusoidal' | 'none'.
    shared_directions: bool = False  # Transformer: one stack's weights for both directions.
    memory_length: int = 20  # Transformer: carried positions per row and direction.
    max_window: int = 20  # Transformer: positions read at once.

    def setup(self) -> None:
        if self.token_encoder == "char_cnn":
            self.encoder = CharCNNEncoder(
                self.char_embed_dim, tuple(map(tuple, self.filters)), self.n_highway,
                self.projection_dim, self.activation, self.dtype, resolve_block(self.conv_block),
                self.init_range, self.token_projection, self.conv_kernel,
            )
        elif self.token_encoder == "word":
            self.encoder = WordEncoder(self.vocab_size, self.projection_dim, self.init_range)
        else:
            raise ValueError(f"model.token_encoder must be 'char_cnn' or 'word', got {self.token_encoder!r}")
        if self.contextualizer not in CONTEXTUALIZERS:
            raise ValueError(f"model.contextualizer must be one of {CONTEXTUALIZERS}, got {self.contextualizer!r}")
        if self.contextualizer == "lstm":
            self._setup_lstm()
        elif self.contextualizer == "gated_cnn":
            self.stack = GatedCNNStack(
                self.projection_dim, self.n_layers, self.kernel_width, self.residual, self.dropout,
                self._token_rate, self.dtype, self.init_range, self.dilation_base, name="gated_cnn",
            )
        else:
            self.stack = self._transformer(name="transformer")
        self.softmax = SoftmaxWeights(self.vocab_size, self.projection_dim, self.init_range)
        self.drop = nn.Dropout(self.dropout)
        self.token_drop = nn.Dropout(self._token_rate)

    @property
    def _token_rate(self) -> float:
        """Dropout on the token embeddings, the first layer's input."""
        return self.dropout if self.token_dropout is None else self.token_dropout

    def _transformer(self, **module_args: Any) -> TransformerStack:
        """The Transformer stack of this biLM's fields (P wide; it drops its own input)."""
        return TransformerStack(
            self.n_layers, self.projection_dim, self.ff_dim, self.n_heads, self.dropout, self._token_rate,
            self.norm, self.positions, self.shared_directions, self.memory_length, self.max_window, self.remat,
            self.dtype, self.init_range, **module_args,
        )

    def _setup_lstm(self) -> None:
        self.layers = [
            BiLSTMLayer(
                self.dim, self.projection_dim, self.cell_clip, self.proj_clip,
                residual=self.use_skip_connections and i > 0, remat=self.remat, dtype=self.dtype,
                unroll=self.unroll, initializer=self.lstm_initializer, init_range=self.init_range,
                kernel=self.lstm_kernel, name=f"lstm_{i}",
            )
            for i in range(self.n_layers)
        ]

    @property
    def token_dim(self) -> int:
        """Width of the token embeddings: the char CNN's channels without a token projection, else P."""
        if self.token_encoder == "char_cnn" and not self.token_projection:
            return sum(n for _, n in self.filters)
        return self.projection_dim

    def initial_state(self, batch_size: int) -> Any:
        """Zero carried state for `batch_size` rows per direction: an `LSTMState` per LSTM layer,
        the gated CNN's buffers (`initial_buffers`) or the Transformer's empty memory. Every leaf
        has the rows on axis 1 and is all zeros (`zeros_like` of a state is one)."""
        if self.contextualizer == "gated_cnn":
            return initial_buffers(
                batch_size, self.token_dim, self.projection_dim, self.n_layers, self.kernel_width, self.dilation_base
            )
        if self.contextualizer == "transformer":
            return self._transformer(parent=None).initial_state(batch_size)
        return [
            LSTMState(jnp.zeros((2, batch_size, self.dim)), jnp.zeros((2, batch_size, self.projection_dim)))
            for _ in range(self.n_layers)
        ]

    def embed_tokens(self, inputs: dict[str, jax.Array]) -> jax.Array:
        """Context-independent token embeddings `[..., P]`.

        The char CNN encodes each distinct word of the call once when there are at most
        `distinct_fraction` x tokens of them (`distinct_rows`; same result, its gradients summed
        over a word's tokens), else every token; 0 = every token always.
        """
        if self.token_encoder != "char_cnn":
            return self.encoder(inputs["token_ids"])
        char_ids = inputs["char_ids"]
        lead_shape, n_chars = char_ids.shape[:-1], char_ids.shape[-1]
        flat = char_ids.reshape(-1, n_chars)
        capacity = int(flat.shape[0] * self.distinct_fraction)
        if capacity == 0 or self.is_initializing():
            return self.encoder(char_ids)
        rows, index, count = distinct_rows(flat, capacity)

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
        """Token embeddings x `[2, B, T, F]` through the contextualizer's stacks: `__call__` without
        the encoder."""
        if self.contextualizer == "lstm":
            outputs, new_state = self._lstm_layers(0, x, mask, state, None, None, train)
        elif self.contextualizer == "gated_cnn":
            outputs, new_state = self.stack(x, mask, state, train)
        else:
            outputs, new_state = self._transformer_windows(x, mask, state, train)
        return [x, *outputs], self.drop(outputs[-1], deterministic=not train), new_state

    def _transformer_windows(
        self, x: jax.Array, mask: jax.Array, state: Any, train: bool
    ) -> tuple[list[jax.Array], Any]:
        """The Transformer over consecutive windows of at most max_window positions, each carrying
        the memory to the next (as training's windows do), so any length runs, 'learned' positions
        included; one window when T <= max_window.

        The whole windows run in a loop the compiler sees once (`_scan_windows`) and a last partial
        window in one more call, so the program holds at most two windows whatever T, and the
        work grows linearly with T (not a copy of the stack per window).
        """
        steps = x.shape[2]
        whole = steps - steps % self.max_window if steps > self.max_window else 0
        parts = []
        if whole:
            outputs, state = self._scan_windows(x[:, :, :whole], mask[:, :, :whole], state, train)
            parts.append(outputs)
        if whole < steps:
            outputs, state = self.stack(x[:, :, whole:], mask[:, :, whole:], state, train)
            parts.append(outputs)
        if len(parts) == 1:
            return parts[0], state
        return [jnp.concatenate(layer, axis=2) for layer in zip(*parts)], state

    def _scan_windows(
        self, x: jax.Array, mask: jax.Array, state: Any, train: bool
    ) -> tuple[list[jax.Array], Any]:
        """The Transformer over n whole windows as one scan: x `[2, B, n W, F]`, mask `[2, B, n W]`
        (W = max_window) -> (L outputs `[2, B, n W, P]`, the state after the last window). Each
        window draws its own dropout; the parameters are the same in every window."""
        n_windows = x.shape[2] // self.max_window

        def windows(a: jax.Array) -> jax.Array:  # [2, B, n W, ...] -> [n, 2, B, W, ...]
            return jnp.moveaxis(a.reshape(*a.shape[:2], n_windows, self.max_window, *a.shape[3:]), 2, 0)

        def positions(a: jax.Array) -> jax.Array:  # [n, 2, B, W, P] -> [2, B, n W, P]
            return jnp.moveaxis(a, 0, 2).reshape(*a.shape[1:3], -1, a.shape[-1])

        def window(stack: TransformerStack, state: Any, inputs: tuple[jax.Array, jax.Array]) -> tuple[Any, Any]:
            outputs, state = stack(*inputs, state, train)
            return state, outputs

        scan = nn.scan(window, variable_broadcast="params", split_rngs={"params": False, "dropout": True})
        state, outputs = scan(self.stack, state, (windows(x), windows(mask)))
        return [positions(out) for out in outputs], state

    def _lstm_layers(
        self,
        first: int,
        x: jax.Array,
        mask: jax.Array,
        state: list[LSTMState],
        reset: jax.Array | None,
        reset_state: list[LSTMState] | None,
        train: bool,
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        """LSTM layers `first`.. over x `[2, B, T, .]` (the input of layer `first`), dropout before
        each; returns their outputs `[2, B, T, P]` and final states. reset, reset_state (one
        `LSTMState` per layer): see `BiLSTMLayer`."""
        outputs, new_state = [], []
        for i in range(first, len(self.layers)):
            drop = self.token_drop if i == 0 else self.drop
            layer_reset_state = None if reset_state is None else reset_state[i]
            x, final = self.layers[i](drop(x, deterministic=not train), mask, state[i], reset, layer_reset_state)
            outputs.append(x)
            new_state.append(final)
        return outputs, new_state

    def first_layer_gates(self, x: jax.Array) -> jax.Array:
        """The first LSTM layer's x W_input for both directions: token embeddings x `[N, F]` ->
        `[2, N, 4 dim]`. A token embedding depends on the word alone, so embedding computes these
        once per distinct word and gathers them for `contextualize_from_gates` (LSTMs only)."""
        self._require_lstm("first_layer_gates")
        return self.layers[0].input_gates(x)

    def _require_lstm(self, method: str) -> None:
        if self.contextualizer != "lstm":
            raise ValueError(f"BiLM.{method} is for LSTM biLMs; this one's contextualizer is {self.contextualizer!r}")

    def contextualize_from_gates(
        self,
        first_gates: jax.Array,
        mask: jax.Array,
        state: list[LSTMState],
        reset: jax.Array | None = None,
        reset_state: list[LSTMState] | None = None,
    ) -> tuple[list[jax.Array], list[LSTMState]]:
        """Inference `contextualize` from the first layer's x W_input `[2, B, T, 4 dim]`
        (`first_layer_gates` of each position's token): returns the LSTM layers (`[2, B, T, P]`
        each, without the token embeddings) and the final states. reset: optional `[2, B, T]`, each
        layer's state becomes its `reset_state` (`[2, 1, .]`, default zeros) before the step where
        true (sentences packed one after another in a row). LSTMs only."""
        self._require_lstm("contextualize_from_gates")
        first_reset_state = None if reset_state is None else reset_state[0]
        x, final = self.layers[0].from_input_gates(first_gates, mask, state[0], reset, first_reset_state)
        outputs, new_state = self._lstm_layers(1, x, mask, state, reset, reset_state, train=False)
        return [x, *outputs], [final, *new_state]


def bilm_from_config(model: Mapping[str, Any], vocab_size: int) -> BiLM:
    """Builds the biLM from `config.model`, complete or not (a config saved before a key existed, the
    model of an options.json): a missing key takes the schema's default (elmo_jax/config/schema.py),
    and every value must pass the config's validation (ConfigError names the first that does not)."""
    model = with_defaults({"model": model.to_dict() if hasattr(model, "to_dict") else dict(model)})
    validate(model)
    model = model.model
    return BiLM(
        vocab_size=vocab_size,
        token_encoder=model.token_encoder,
        char_embed_dim=model.char_cnn.embed_dim,
        filters=tuple(tuple(f) for f in model.char_cnn.filters),
        n_highway=model.char_cnn.n_highway,
        activation=model.char_cnn.activation,
        token_projection=model.char_cnn.projection,
        dim=model.lstm.dim,
        projection_dim=model.lstm.projection_dim,
        n_layers=model[model.contextualizer].n_layers,
        cell_clip=model.lstm.cell_clip or None,
        proj_clip=model.lstm.proj_clip or None,
        use_skip_connections=model.lstm.use_skip_connections,
        lstm_initializer=model.lstm.initializer,
        init_range=model.init_range,
        dropout=model.dropout,
        token_dropout=None if model.token_dropout < 0 else model.token_dropout,
        remat=model.remat,
        dtype=DTYPES[model.dtype],
        unroll=model.unroll,
        lstm_kernel=model.lstm_kernel,
        conv_block=model.conv_block,
        conv_kernel=model.conv_kernel,
        distinct_fraction=model.distinct_fraction,
        contextualizer=model.contextualizer,
        kernel_width=model.gated_cnn.kernel_width,
        residual=model.gated_cnn.residual,
        dilation_base=model.gated_cnn.dilation_base,
        ff_dim=model.transformer.ff_dim,
        n_heads=model.transformer.n_heads,
        norm=model.transformer.norm,
        positions=model.transformer.positions,
        shared_directions=model.transformer.shared_directions,
        memory_length=model.transformer.memory_length,
        max_window=model.transformer.max_window,
    )
