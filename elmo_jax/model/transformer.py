"""Transformer contextualizer: causal self-attention stacks over the biLM's two streams.

The backward stream holds the reversed text, so one causal attention serves both directions.
Context across windows is a Transformer-XL memory of each layer's inputs at the last M valid
positions; positions number the valid slots from the window's first, M (docs/contextualizers.md).
Matmul operands in `dtype`; softmax, LayerNorm, the residual stream and the memory in float32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.initializers import weight_init
from elmo_jax.model.precision import matmul
from elmo_jax.model.row_sizes import check_row_sizes
from elmo_jax.sections import ConfigError, Key, Section
from elmo_jax.sections.checks import BOOLEAN, integer, one_of

NORMS = ("pre", "post")
POSITIONS = ("learned", "sinusoidal", "none")
LAYER_NORM_EPSILON = 1e-6


class TransformerState(NamedTuple):
    """Carried memory: each layer's inputs `[2, B, L, M, P]` float32 (oldest first), mask `[2, B, M]`."""

    inputs: jax.Array
    mask: jax.Array


def sinusoidal_positions(n_positions: int, dim: int) -> np.ndarray:
    """Vaswani et al.'s encoding `[n_positions, dim]`: sin on even, cos on odd features."""
    position = np.arange(n_positions)[:, None]
    frequency = np.exp(np.arange(0, dim, 2) * -(math.log(10000.0) / dim))
    table = np.zeros((n_positions, dim), np.float32)
    table[:, 0::2] = np.sin(position * frequency)
    table[:, 1::2] = np.cos(position * frequency[: dim // 2])
    return table


def attention_positions(valid: jax.Array, n_memory: int) -> jax.Array:
    """Position of each slot of [memory; window] (valid `[B, M + T]`): M for the window's first
    valid slot, the others counted by valid slots from it (0 for padding)."""
    empty_memory_slots = n_memory - valid[:, :n_memory].sum(axis=-1, keepdims=True, dtype=jnp.int32)
    return jnp.where(valid, jnp.cumsum(valid, axis=-1, dtype=jnp.int32) - 1 + empty_memory_slots, 0)


def causal_attention_mask(valid: jax.Array, n_queries: int) -> jax.Array:
    """valid `[B, M + T]` -> `[B, T, M + T]`: true where the key is the query, or valid and not after
    it (a padding query attends itself, so every softmax row has a key)."""
    n_keys = valid.shape[-1]
    query = jnp.arange(n_queries)[:, None] + (n_keys - n_queries)
    key = jnp.arange(n_keys)[None, :]
    return ((key <= query) & valid[:, None, :]) | (key == query)


def next_memory(
    memory: jax.Array, window_inputs: jax.Array, valid: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The last M valid positions of [memory; window], oldest first, padded at the front: memory
    `[B, L, M, P]`, window_inputs `[B, L, T, P]`, valid `[B, M + T]` -> (`[B, L, M, P]`, no gradient;
    mask `[B, M]`)."""
    n_memory = memory.shape[2]
    order = jnp.argsort(valid.astype(jnp.int32), axis=-1, stable=True)  # Padding first, order kept.
    order = order[:, order.shape[-1] - n_memory :]
    inputs = jnp.concatenate([memory, window_inputs], axis=2)
    inputs = jnp.take_along_axis(inputs, order[:, None, :, None], axis=2)
    return jax.lax.stop_gradient(inputs), jnp.take_along_axis(valid, order, axis=-1)


def kernel_init(init_range: float) -> nn.initializers.Initializer:
    """Weight matrices: Glorot uniform (Vaswani et al., AllenNLP), or U(-init_range, init_range)."""
    return weight_init(init_range, nn.initializers.xavier_uniform())


def layer_norm(name: str) -> nn.LayerNorm:
    """float32 LayerNorm with the stack's epsilon."""
    return nn.LayerNorm(epsilon=LAYER_NORM_EPSILON, dtype=jnp.float32, name=name)


class SelfAttention(nn.Module):
    """Multi-head attention of a window's queries over [memory; window] (one direction): W_* `[P, P]`, b_* `[P]`."""

    n_heads: int
    dtype: Any = jnp.float32
    init_range: float = 0.0

    @nn.compact
    def __call__(
        self, x: jax.Array, context: jax.Array, position: jax.Array | None, allowed: jax.Array
    ) -> jax.Array:
        """x `[B, T, P]` (the queries' inputs), context `[B, M + T, P]` (the keys' and values'),
        position `[B, M + T, P]` or None (added to query and key inputs), allowed `[B, T, M + T]`."""
        dim = x.shape[-1]
        head_dim = dim // self.n_heads
        init = kernel_init(self.init_range)
        w = {name: self.param(f"W_{name}", init, (dim, dim)) for name in ("query", "key", "value", "output")}
        b = {name: self.param(f"b_{name}", nn.initializers.zeros, (dim,)) for name in w}
        keyed = context if position is None else context + position
        queried = x if position is None else x + position[:, context.shape[1] - x.shape[1] :]

        def heads(inputs: jax.Array, name: str) -> jax.Array:
            out = matmul("btp,pq->btq", inputs, w[name], self.dtype) + b[name]
            return out.reshape(*out.shape[:2], self.n_heads, head_dim)

        q, k, v = heads(queried, "query"), heads(keyed, "key"), heads(context, "value")
        scores = matmul("bthd,bshd->bhts", q, k, self.dtype) / math.sqrt(head_dim)
        scores = jnp.where(allowed[:, None], scores, jnp.finfo(jnp.float32).min)
        weights = jax.nn.softmax(scores, axis=-1)
        out = matmul("bhts,bshd->bthd", weights, v, self.dtype).reshape(x.shape)
        return matmul("btp,pq->btq", out, w["output"], self.dtype) + b["output"]


class FeedForward(nn.Module):
    """`relu(x W_1 + b_1) W_2 + b_2`, W_1 `[P, ff_dim]`, W_2 `[ff_dim, P]`."""

    ff_dim: int
    dtype: Any = jnp.float32
    init_range: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """x `[B, T, P]` -> `[B, T, P]`."""
        dim = x.shape[-1]
        init = kernel_init(self.init_range)
        w_1 = self.param("W_1", init, (dim, self.ff_dim))
        b_1 = self.param("b_1", nn.initializers.zeros, (self.ff_dim,))
        w_2 = self.param("W_2", init, (self.ff_dim, dim))
        b_2 = self.param("b_2", nn.initializers.zeros, (dim,))
        hidden = jax.nn.relu(matmul("btp,pf->btf", x, w_1, self.dtype) + b_1)
        return matmul("btf,fp->btp", hidden, w_2, self.dtype) + b_2


class TransformerBlock(nn.Module):
    """One layer of one direction: attention over [memory; window], then the feed-forward layer."""

    n_heads: int
    ff_dim: int
    dropout: float = 0.1
    norm: str = "pre"
    train: bool = False
    dtype: Any = jnp.float32
    init_range: float = 0.0

    @nn.compact
    def __call__(
        self, h: jax.Array, memory: jax.Array, position: jax.Array | None, allowed: jax.Array
    ) -> jax.Array:
        """h `[B, T, P]`, memory `[B, M, P]` (layer inputs), position, allowed (`SelfAttention`) -> `[B, T, P]`."""
        attention = SelfAttention(self.n_heads, self.dtype, self.init_range, name="attention")
        feed_forward = FeedForward(self.ff_dim, self.dtype, self.init_range, name="feed_forward")
        attention_norm, feed_forward_norm = layer_norm("attention_norm"), layer_norm("feed_forward_norm")
        drop = nn.Dropout(self.dropout, deterministic=not self.train)
        context = jnp.concatenate([memory, h], axis=1)
        if self.norm == "pre":
            context = attention_norm(context)
            h = h + drop(attention(context[:, memory.shape[1] :], context, position, allowed))
            return h + drop(feed_forward(feed_forward_norm(h)))
        h = attention_norm(h + drop(attention(h, context, position, allowed)))
        return feed_forward_norm(h + drop(feed_forward(h)))


# model.transformer: the keys of TransformerOptions' fields (and the contextualizer's n_layers).
SECTION = Section(
    "Transformer (model.contextualizer='transformer', model/transformer.py): causal self-attention blocks, "
    "dropout on the stack's input (model.token_dropout) and on each sublayer's output (model.dropout).", {
        "n_layers": Key(2, integer(1), "Blocks per direction."),
        "ff_dim": Key(2048, integer(1), "Width of each block's ReLU feed-forward layer."),
        "n_heads": Key(8, integer(1), "Attention heads (they must divide model.width)."),
        "norm": Key("pre", one_of(*NORMS),
                    "'pre': x + f(LayerNorm(x)), a final LayerNorm (AllenNLP) | 'post': LayerNorm(x + f(x))."),
        "positions": Key("sinusoidal", one_of(*POSITIONS), "Added to each layer's queries and keys."),
        "shared_directions": Key(False, BOOLEAN,
                                 "True: one stack's weights for both directions (False: one stack each, as "
                                 "Peters et al. 2018b and AllenNLP's bidirectional_lm_transformer)."),
        "memory_length": Key(20, integer(0),
                             "Positions of the previous windows each layer attends to, held without gradient "
                             "(Transformer-XL); the carried state across windows (0 = windows independent)."),
        "max_window": Key(20, integer(1),
                          "Positions the stack reads at once (and 'learned' positions index): longer inputs, "
                          "such as sentences the embedder reads, run as consecutive windows carrying the memory."),
    })


class TransformerOptions(nn.Module):
    """The fields of the config section `model.transformer`, shared by the stack and the contextualizer."""

    ff_dim: int = SECTION.default("ff_dim")  # Feed-forward width.
    n_heads: int = SECTION.default("n_heads")
    norm: str = SECTION.default("norm")  # NORMS.
    positions: str = SECTION.default("positions")  # POSITIONS.
    shared_directions: bool = SECTION.default("shared_directions")  # True: one stack's weights for both streams.
    memory_length: int = SECTION.default("memory_length")  # M: carried positions per row and direction.
    max_window: int = SECTION.default("max_window")  # The longest window T ('learned' positions).


class TransformerStack(TransformerOptions):
    """The stacks of both directions over one window: x `[2, B, T, F]` (F != dim: mapped by W_input),
    mask `[2, B, T]`, a `TransformerState` -> (L outputs `[2, B, T, dim]`, zero at padding, next
    state). 'learned' positions: T <= max_window. memory_length 0: windows are independent."""

    n_layers: int = SECTION.default("n_layers")
    dim: int = 512
    dropout: float = 0.1
    token_dropout: float | None = None  # Dropout on the stack's input x (None = `dropout`).
    remat: bool = False  # Recompute each block's forward pass in the backward pass.
    dtype: Any = jnp.float32
    init_range: float = 0.0  # > 0: every weight from U(-init_range, init_range), else Glorot uniform.

    def initial_state(self, batch_size: int) -> TransformerState:
        """Empty memories for `batch_size` rows per direction (all zeros: `zeros_like` of a state is one)."""
        shape = (2, batch_size, self.n_layers, self.memory_length, self.dim)
        return TransformerState(jnp.zeros(shape, jnp.float32), jnp.zeros(shape[:2] + shape[3:4], bool))

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, state: TransformerState, train: bool = False
    ) -> tuple[list[jax.Array], TransformerState]:
        """x `[2, B, T, F]`, mask `[2, B, T]` (padding where false), state -> (outputs, next state)."""
        self._check(x.shape[2])
        shared = self.shared_directions
        stack = nn.vmap(
            DirectionStack,
            variable_axes={"params": None if shared else 0},
            split_rngs={"params": not shared, "dropout": True},
        )
        token_rate = self.dropout if self.token_dropout is None else self.token_dropout
        directions = stack(**{**_stack_fields(self), "token_dropout": token_rate}, train=train, name="directions")
        outputs, memory, memory_mask = directions(x, mask, state.inputs, state.mask)
        return outputs, TransformerState(memory, memory_mask)

    def _check(self, n_steps: int) -> None:
        """ValueError for field values the stack cannot run with."""
        if self.norm not in NORMS:
            raise ValueError(f"transformer norm must be one of {NORMS}, got {self.norm!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"transformer positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.dim % self.n_heads:
            raise ValueError(f"transformer dim {self.dim} is not a multiple of n_heads {self.n_heads}")
        if self.positions == "learned" and n_steps > self.max_window:
            raise ValueError(f"a window of {n_steps} steps is longer than the stack's max_window {self.max_window}")


def _stack_fields(module: nn.Module, *skip: str) -> dict[str, Any]:
    """`TransformerStack`'s fields but Flax's own (parent, name) and `skip`, as `module` holds them."""
    names = (f.name for f in dataclasses.fields(TransformerStack) if f.name not in ("parent", "name", *skip))
    return {name: getattr(module, name) for name in names}


class DirectionStack(TransformerStack):
    """The stack of one direction: `TransformerStack`'s fields, which maps it over the direction axis."""

    train: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, mask: jax.Array, memory: jax.Array, memory_mask: jax.Array
    ) -> tuple[list[jax.Array], jax.Array, jax.Array]:
        """x `[B, T, F]`, mask `[B, T]`, memory `[B, L, M, P]`, memory_mask `[B, M]` -> (L outputs
        `[B, T, P]`, zero where mask is false; next memory, next memory mask)."""
        h = nn.Dropout(self.token_dropout, deterministic=not self.train)(x.astype(jnp.float32))
        if x.shape[-1] != self.dim:
            init = kernel_init(self.init_range)
            w = self.param("W_input", init, (x.shape[-1], self.dim))
            h = matmul("btf,fp->btp", h, w, self.dtype) + self.param("b_input", nn.initializers.zeros, (self.dim,))
        valid = jnp.concatenate([memory_mask, mask.astype(bool)], axis=-1)
        position = self._position_encoding(attention_positions(valid, memory.shape[2]), memory.shape[2])
        allowed = causal_attention_mask(valid, h.shape[1])
        block = nn.remat(TransformerBlock) if self.remat else TransformerBlock
        inputs, outputs = [], []
        for i in range(self.n_layers):
            inputs.append(h)
            h = block(
                self.n_heads, self.ff_dim, self.dropout, self.norm, self.train, self.dtype, self.init_range,
                name=f"block_{i}",
            )(h, memory[:, i], position, allowed)
            outputs.append(h)
        if self.norm == "pre":
            outputs[-1] = layer_norm("final_norm")(h)
        real = mask.astype(bool)[..., None]
        new_memory, new_mask = next_memory(memory, jnp.stack(inputs, axis=1), valid)
        return [jnp.where(real, out, 0.0) for out in outputs], new_memory, new_mask

    def _position_encoding(self, position: jax.Array, n_memory: int) -> jax.Array | None:
        """`[B, M + T, P]` encodings of the slots' positions `[B, M + T]` (None for 'none')."""
        if self.positions == "none":
            return None
        if self.positions == "sinusoidal":
            return jnp.take(jnp.asarray(sinusoidal_positions(position.shape[-1], self.dim)), position, axis=0)
        init = weight_init(self.init_range, nn.initializers.normal(0.02))
        table = self.param("positions", init, (n_memory + self.max_window, self.dim))
        return jnp.take(table, position, axis=0)


def transformer_flops_per_token(
    n_layers: int, dim: int, ff_dim: int, window: int, memory_length: int, input_dim: int
) -> int:
    """Forward matmul FLOPs for one token in one direction (a multiply-add = 2), as computed: one
    window of T = `window` tokens over a full memory, divided by T (docs/contextualizers.md)."""
    context = memory_length + window
    per_window = n_layers * (
        window * 2 * dim * dim * 2  # queries, outputs
        + context * 2 * dim * dim * 2  # keys, values
        + window * context * 2 * dim * 2  # scores, weighted sum of values
        + window * 2 * dim * ff_dim * 2  # feed-forward
    )
    if input_dim != dim:
        per_window += window * 2 * input_dim * dim
    return round(per_window / window)


class TransformerContextualizer(Contextualizer, TransformerOptions):
    """The biLM's contextualizer: a `TransformerStack` named `transformer` over windows of at most
    max_window positions. State: its `TransformerState`."""

    config_name = "transformer"
    summary = "model.transformer"
    section = SECTION

    n_layers: int = SECTION.default("n_layers")

    @classmethod
    def check_config(cls, model: Mapping[str, Any], input_dim: int) -> None:
        """Heads that split model.width into equal parts, and sizes within what one row's arrays can
        hold (row_sizes.py): its attention scores `[heads, W, M + W]`, its memory `[L, M, P]`, keys,
        values and positions `[M + W, P]`, the feed-forward layer's hidden units `[W, ff_dim]` and
        weights `[P, ff_dim]`."""
        transformer, width = model["transformer"], model["width"]
        n_heads, n_layers = transformer["n_heads"], transformer["n_layers"]
        if width % n_heads:
            raise ConfigError(
                f"config key model.transformer.n_heads={n_heads!r} is out of range (allowed: a divisor of "
                f"model.width={width!r}, the Transformer's width)"
            )

        def elements(max_window: int, memory_length: int, ff_dim: int) -> int:
            context = memory_length + max_window
            return max(n_heads * max_window * context, n_layers * memory_length * width, context * width,
                       max_window * ff_dim, width * ff_dim)

        check_row_sizes("model.transformer", transformer, (("max_window", 1), ("memory_length", 0), ("ff_dim", 1)),
                        elements, "one row's attention scores, memory and feed-forward layer")

    def setup(self) -> None:
        super().setup()
        self.stack = self._stack(name="transformer")

    def _stack(self, **module_args: Any) -> TransformerStack:
        return TransformerStack(dim=self.width, **_stack_fields(self, "dim"), **module_args)

    def initial_state(self, batch_size: int) -> TransformerState:
        return self._stack(parent=None).initial_state(batch_size)

    def __call__(
        self, x: jax.Array, mask: jax.Array, state: TransformerState, train: bool = False
    ) -> tuple[list[jax.Array], TransformerState]:
        """The stack over consecutive windows of at most max_window positions carrying the memory, so
        any length runs: whole windows as one scan, a last partial one as one more call."""
        steps = x.shape[2]
        whole = steps - steps % self.max_window if steps > self.max_window else 0
        parts = []
        if whole:
            outputs, state = self._scan_windows(x[:, :, :whole], mask[:, :, :whole], state, train)
            parts.append(outputs)
        if whole < steps:
            outputs, state = self.stack(x[:, :, whole:], mask[:, :, whole:], state, train)
            parts.append(outputs)
        return [jnp.concatenate(layer, axis=2) for layer in zip(*parts)], state

    def _scan_windows(
        self, x: jax.Array, mask: jax.Array, state: Any, train: bool
    ) -> tuple[list[jax.Array], Any]:
        """The stack over n whole windows of W = max_window as one scan (dropout drawn per window):
        x `[2, B, n W, F]`, mask `[2, B, n W]` -> (L outputs `[2, B, n W, P]`, the last state)."""
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

    def flops_per_token(self) -> int:
        return transformer_flops_per_token(
            self.n_layers, self.width, self.ff_dim, self.max_window, self.memory_length, self.input_dim
        )
