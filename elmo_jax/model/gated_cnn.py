"""Gated convolutional contextualizer (Dauphin et al. 2017), both directions in one call.

Per direction and layer l, over the stream's positions in order (docs/contextualizers.md):
  h_t = (window_t W + b) * sigmoid(window_t V + c),  window_t = [x_{t-(k-1)r}; ...; x_{t-r}; x_t]
with dilation r_l = dilation_base^(l-1), plus x_t on layers 2..L when residual. Masked positions
are skipped; the state carries each layer's last (k - 1) r_l real inputs, as one long pass would.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.model.contextualizer import Contextualizer
from elmo_jax.model.initializers import uniform_symmetric, weight_init
from elmo_jax.model.precision import matmul
from elmo_jax.model.row_sizes import check_row_sizes
from elmo_jax.sections import Key, Section
from elmo_jax.sections.checks import BOOLEAN, integer

# model.gated_cnn: the keys of GatedCNNContextualizer's own fields.
SECTION = Section(
    "Gated CNN (model.contextualizer='gated_cnn', Dauphin et al. 2017): causal convolutions with gated linear "
    "units, h = (X*W + b) * sigmoid(X*V + c), dropout as the LSTMs' (model.token_dropout, model.dropout).", {
        "kernel_width": Key(3, integer(2), "Taps of each convolution: the current position and k - 1 before it."),
        "n_layers": Key(3, integer(1), "Layers per direction (a gated CNN of an LSTM's size is deeper)."),
        "residual": Key(True, BOOLEAN, "Residual connection around layers 2..L (Dauphin et al.'s blocks)."),
        "dilation_base": Key(1, integer(1),
                             "Layer l's taps are dilation_base^(l-1) positions apart (1: contiguous, Dauphin et "
                             "al.; 2: doubling, WaveNet's): the stack sees 1 + (k - 1) sum_l dilation_base^(l-1)."),
    })


def causal_windows(buffer: jax.Array, x: jax.Array, dilation: int = 1) -> jax.Array:
    """The k causal taps, `dilation` positions apart, of x `[2, B, T, F]` with the previous inputs
    `buffer` `[2, B, (k-1) dilation, F]` before it: `[2, B, T, k F]`, oldest input first."""
    z = jnp.concatenate([buffer.astype(x.dtype), x], axis=2)
    n_steps, n_taps = x.shape[2], buffer.shape[2] // dilation + 1
    return jnp.concatenate([z[:, :, j * dilation : j * dilation + n_steps] for j in range(n_taps)], axis=-1)


def next_buffer(buffer: jax.Array, x: jax.Array, n_real: jax.Array) -> jax.Array:
    """The last `buffer.shape[2]` inputs of the stream `[buffer; x[:, :, :n_real]]` per row (x
    compacted: its real positions first), the carried state after this window."""
    z = jnp.concatenate([buffer.astype(x.dtype), x], axis=2)
    return take_time(z, n_real[..., None] + jnp.arange(buffer.shape[2]))


def real_first(mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """For mask `[2, B, T]`: (order, inverse, n_real): `x[order]` along time puts each row's real
    positions first, in order; `y[inverse]` puts them back; n_real `[2, B]` counts them."""
    mask = mask.astype(bool)
    order = jnp.argsort(~mask, axis=-1, stable=True)
    return order, jnp.argsort(order, axis=-1), mask.sum(axis=-1)


def take_time(x: jax.Array, index: jax.Array) -> jax.Array:
    """x `[2, B, T, F]` gathered along time by index `[2, B, T]`."""
    return jnp.take_along_axis(x, index[..., None], axis=2)


def layer_dilations(n_layers: int, dilation_base: int) -> list[int]:
    """r_l = dilation_base^(l-1) for layers 1..L."""
    return [dilation_base**i for i in range(n_layers)]


def receptive_field(n_layers: int, kernel_width: int, dilation_base: int = 1) -> int:
    """Positions of its stream that a stack output depends on: 1 + (k - 1) sum_l r_l."""
    return 1 + (kernel_width - 1) * sum(layer_dilations(n_layers, dilation_base))


def initial_buffers(
    batch_size: int, input_dim: int, features: int, n_layers: int, kernel_width: int, dilation_base: int = 1
) -> list[jax.Array]:
    """Zero carried state for `batch_size` rows: `[2, B, (k-1) r_l, F_l]` per layer, F_1 = input_dim."""
    widths = [input_dim] + [features] * (n_layers - 1)
    return [
        jnp.zeros((2, batch_size, (kernel_width - 1) * r, w), jnp.float32)
        for r, w in zip(layer_dilations(n_layers, dilation_base), widths)
    ]


class GatedConvLayer(nn.Module):
    """One causal GLU convolution for both directions: x `[2, B, T, F]` with its left context
    buffer `[2, B, (k-1) dilation, F]` -> `[2, B, T, features]` (plus x when residual)."""

    features: int
    kernel_width: int
    residual: bool = False
    dtype: jnp.dtype = jnp.float32
    init_range: float = 0.0
    dilation: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, buffer: jax.Array) -> jax.Array:
        d_in, k = x.shape[-1], self.kernel_width
        glorot_limit = math.sqrt(6.0 / (k * d_in + self.features))  # Fan-in k d_in, fan-out features.
        init = weight_init(self.init_range, uniform_symmetric(glorot_limit))
        w = self.param("W", init, (2, k, d_in, self.features))
        v = self.param("V", init, (2, k, d_in, self.features))
        b = self.param("b", nn.initializers.zeros, (2, self.features))
        c = self.param("c", nn.initializers.zeros, (2, self.features))
        windows = causal_windows(buffer, x, self.dilation)
        n_dir, n_batch, n_steps, width = windows.shape
        kernel = jnp.concatenate([w, v], axis=-1).reshape(n_dir, k * d_in, 2 * self.features)
        z = matmul("dni,dio->dno", windows.reshape(n_dir, n_batch * n_steps, width), kernel, self.dtype)
        z = z.reshape(n_dir, n_batch, n_steps, 2 * self.features) + jnp.concatenate([b, c], axis=-1)[:, None, None]
        linear, gate = jnp.split(z, 2, axis=-1)
        h = linear * jax.nn.sigmoid(gate)
        return h + x if self.residual else h


class GatedCNNStack(nn.Module):
    """L causal GLU layers, `features` wide, dropout before each (`token_dropout` before the first),
    residual around layers 2..L: x `[2, B, T, F]`, mask `[2, B, T]`, state (`initial_buffers`) ->
    (L outputs `[2, B, T, features]`, zero at masked positions; new state)."""

    features: int
    n_layers: int
    kernel_width: int
    residual: bool = True
    dropout: float = 0.0
    token_dropout: float = 0.0
    dtype: jnp.dtype = jnp.float32
    init_range: float = 0.0
    dilation_base: int = 1
    remat: bool = False  # Recompute each layer's forward pass in the backward pass.

    def setup(self) -> None:
        layer = nn.remat(GatedConvLayer) if self.remat else GatedConvLayer
        self.layers = [
            layer(
                self.features, self.kernel_width, self.residual and i > 0, self.dtype, self.init_range, r,
                name=f"glu_{i}",
            )
            for i, r in enumerate(layer_dilations(self.n_layers, self.dilation_base))
        ]
        self.token_drop = nn.Dropout(self.token_dropout)
        self.drop = nn.Dropout(self.dropout)

    def __call__(
        self, x: jax.Array, mask: jax.Array, state: list[jax.Array], train: bool = False
    ) -> tuple[list[jax.Array], list[jax.Array]]:
        order, inverse, n_real = real_first(mask)
        x = take_time(x, order)
        outputs, new_state = [], []
        for i, layer in enumerate(self.layers):
            drop = self.token_drop if i == 0 else self.drop
            x = drop(x, deterministic=not train)
            new_state.append(next_buffer(state[i], x, n_real))
            x = layer(x, state[i])
            outputs.append(jnp.where(mask[..., None].astype(bool), take_time(x, inverse), 0.0))
        return outputs, new_state


class GatedCNNContextualizer(Contextualizer):
    """The gated CNN as the biLM's contextualizer: a `GatedCNNStack` named `gated_cnn`, P wide,
    dropping its own inputs. State: its carried buffers (`initial_buffers`)."""

    config_name = "gated_cnn"
    summary = "model.gated_cnn"
    section = SECTION

    n_layers: int = SECTION.default("n_layers")
    kernel_width: int = SECTION.default("kernel_width")  # Positions each convolution sees.
    residual: bool = SECTION.default("residual")  # Residual connections around layers 2..L.
    dilation_base: int = SECTION.default("dilation_base")  # Layer l's taps dilation_base^(l-1) positions apart.

    @classmethod
    def check_config(cls, model: Mapping[str, Any], input_dim: int) -> None:
        """Its kernel width and dilation within what one row's arrays can hold (row_sizes.py): the
        carried inputs `[(k - 1) r_l, F_l]` of its first layer (r = 1, `input_dim` wide) and its
        last (r = base^(L-1), P wide), and a layer's weights `[k, F, P]`."""
        n_layers, width = model["gated_cnn"]["n_layers"], model["width"]

        def elements(kernel_width: int, dilation_base: int) -> int:
            first = (kernel_width - 1) * input_dim
            # base^(L-1), capped at base^32 (past the limit already for base >= 2): no huge powers.
            last_dilation = dilation_base ** min(n_layers - 1, 32)
            last = (kernel_width - 1) * last_dilation * width if n_layers > 1 else 0
            return max(first, last, kernel_width * max(input_dim, width) * width)

        check_row_sizes("model.gated_cnn", model["gated_cnn"], (("kernel_width", 2), ("dilation_base", 1)), elements,
                        "one row's carried inputs and convolution weights")

    def setup(self) -> None:
        super().setup()
        self.stack = GatedCNNStack(
            self.width, self.n_layers, self.kernel_width, self.residual, self.dropout, self.token_dropout,
            self.dtype, self.init_range, self.dilation_base, self.remat, name="gated_cnn",
        )

    def initial_state(self, batch_size: int) -> list[jax.Array]:
        return initial_buffers(
            batch_size, self.input_dim, self.width, self.n_layers, self.kernel_width, self.dilation_base
        )

    def __call__(
        self, x: jax.Array, mask: jax.Array, state: list[jax.Array], train: bool = False
    ) -> tuple[list[jax.Array], list[jax.Array]]:
        return self.stack(x, mask, state, train)

    def flops_per_token(self) -> int:
        """Per layer one matmul of the k-wide window (k x its input width) by W and V (2 P outputs)."""
        layer_inputs = self.input_dim + (self.n_layers - 1) * self.width
        return 2 * self.kernel_width * layer_inputs * 2 * self.width
