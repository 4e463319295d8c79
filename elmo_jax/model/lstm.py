"""LSTM with projection and clipping (TF `LSTMCell` semantics), both directions in one time loop.

The directions' weights are stacked on a leading axis of size 2, so a step is one batched matmul;
x W_input is hoisted out of the time loop (`lstm_recurrence`). As in bilm-tf, projection_dim ==
dim means no projection (no `W_P`): the plain LSTM of Kim et al. and Zaremba et al.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.model.initializers import uniform_symmetric
from elmo_jax.model.lstm_recurrence import lstm_recurrence
from elmo_jax.model.pallas_lstm import pallas_lstm_recurrence
from elmo_jax.model.pallas_lstm_cell import fused_cell_recurrence
from elmo_jax.model import platform
from elmo_jax.model.precision import matmul

KERNEL_INITIALIZERS = ("uniform", "glorot_uniform")
# BiLSTMLayer.kernel: lstm_recurrence, pallas_lstm_recurrence or fused_cell_recurrence.
TIME_LOOP_KERNELS = ("xla", "pallas", "pallas_cell")


class LSTMState(NamedTuple):
    """Carried state of one bidirectional layer: c `[2, B, dim]`, h `[2, B, projection_dim]`."""

    c: jax.Array
    h: jax.Array


def has_projection(dim: int, projection_dim: int) -> bool:
    """Whether an LSTM layer has a projection W_P: bilm-tf builds one only when projection_dim != dim."""
    return projection_dim != dim


def kernel_limits(
    initializer: str, d_in: int, dim: int, projection_dim: int, init_range: float = 0.0
) -> tuple[float, float]:
    """Limits of the uniform initialisers of (W_input and W_hidden, W_P) for one direction.

    'uniform': r = init_range if > 0, else 0.05 (Kim et al. 2016). 'glorot_uniform': bilm-tf's
    default, Glorot over TF's one kernel `[d_in + P, 4 dim]` (W_input and W_hidden) and W_P `[dim, P]`.
    """
    if initializer == "uniform":
        limit = init_range if init_range > 0 else 0.05
        return limit, limit
    if initializer == "glorot_uniform":
        return math.sqrt(6.0 / (d_in + projection_dim + 4 * dim)), math.sqrt(6.0 / (dim + projection_dim))
    raise ValueError(f"model.lstm.initializer must be one of {KERNEL_INITIALIZERS}, got {initializer!r}")


def sequence_input_gates(x: jax.Array, w_input: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """x W_input of every step: x `[2, B, T, in]`, w_input `[2, in, 4 dim]` -> `[2, B, T, 4 dim]`.
    As a `[2, B*T, in]` operand: the dot that computes dW_input then needs no transpose of d xw
    (XLA:CPU copies the whole `[2, B, T, 4 dim]` cotangent for the 4-D einsum)."""
    n_dir, n_batch, n_steps, _ = x.shape
    xw = matmul("dni,dig->dng", x.reshape(n_dir, n_batch * n_steps, -1), w_input, dtype)
    return xw.reshape(n_dir, n_batch, n_steps, -1)


class BiLSTMLayer(nn.Module):
    """One LSTM-with-projection layer for both directions. `remat`: the layer in `jax.checkpoint` (no
    O(T B dim) residuals kept). `kernel`: the time loop, 'xla' (`lstm_recurrence`), 'pallas'
    (`pallas_lstm_recurrence`) or 'pallas_cell' (`fused_cell_recurrence`); runs with `reset` take 'xla'."""

    dim: int
    projection_dim: int
    cell_clip: float | None = None
    proj_clip: float | None = None
    residual: bool = False
    remat: bool = False
    dtype: jnp.dtype = jnp.float32
    unroll: int = 0
    initializer: str = "uniform"
    init_range: float = 0.0  # Of the 'uniform' initializer.
    kernel: str = "xla"

    @property
    def projected(self) -> bool:
        """Whether the layer has a projection W_P (`has_projection`)."""
        return has_projection(self.dim, self.projection_dim)

    @nn.compact
    def weights(self, d_in: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
        """The layer's params for inputs `d_in` wide -> (W_input `[2, in, 4 dim]`, B `[2, 4 dim]`,
        W_hidden `[2, P, 4 dim]`, W_P `[2, dim, P]` or None), declared on first use."""
        gates = 4 * self.dim
        kernel_limit, proj_limit = kernel_limits(
            self.initializer, d_in, self.dim, self.projection_dim, self.init_range
        )
        w_input = self.param("W_input", uniform_symmetric(kernel_limit), (2, d_in, gates))
        w_hidden = self.param("W_hidden", uniform_symmetric(kernel_limit), (2, self.projection_dim, gates))
        bias = self.param("B", nn.initializers.zeros, (2, gates))
        w_proj = None
        if self.projected:
            w_proj = self.param("W_P", uniform_symmetric(proj_limit), (2, self.dim, self.projection_dim))
        return w_input, bias, w_hidden, w_proj

    def __call__(
        self,
        x: jax.Array,
        mask: jax.Array,
        state: LSTMState,
        reset: jax.Array | None = None,
        reset_state: LSTMState | None = None,
    ) -> tuple[jax.Array, LSTMState]:
        """x `[2, B, T, in]`, mask `[2, B, T]` (state frozen where 0) -> (outputs `[2, B, T, P]`, plus x
        when residual; final state). reset `[2, B, T]`, reset_state `[2, 1, .]`: `lstm_recurrence`'s."""
        w_input, bias, w_hidden, w_proj = self.weights(x.shape[-1])

        def run(x, w_input, bias, w_hidden, w_proj, mask, state, reset, reset_state):
            xw = sequence_input_gates(x, w_input, self.dtype)
            return self._recurrence(xw, bias, w_hidden, w_proj, mask, state, reset, reset_state)

        if self.remat:
            run = jax.checkpoint(run)
        outputs, final = run(x, w_input, bias, w_hidden, w_proj, mask, state, reset, reset_state)
        return (outputs + x if self.residual else outputs), final

    def _recurrence(self, xw, bias, w_hidden, w_proj, mask, state, reset=None, reset_state=None):
        """The time loop over xw `[2, B, T, 4 dim]` -> (outputs `[2, B, T, P]`, final `LSTMState`)."""
        if self.kernel not in TIME_LOOP_KERNELS:
            raise ValueError(f"model.lstm.kernel must be one of {TIME_LOOP_KERNELS}, got {self.kernel!r}")
        kernel = self.kernel if reset is None else "xla"  # The Pallas kernels take no resets.
        args = (xw, w_hidden, w_proj, mask[..., None], *state, self.cell_clip, self.proj_clip, self.dtype)
        if kernel != "xla":
            platform.check_triton("model.lstm.kernel", kernel)
        if kernel == "pallas":
            outputs, final = pallas_lstm_recurrence(
                *args, time_axis=2, bias=bias, interpret=platform.interprets_pallas()
            )
        elif kernel == "pallas_cell":
            outputs, final = fused_cell_recurrence(
                *args, time_axis=2, bias=bias, unroll=self.unroll, interpret=platform.interprets_pallas()
            )
        else:
            outputs, final = lstm_recurrence(
                *args, time_axis=2, bias=bias, unroll=self.unroll,
                reset=None if reset is None else reset[..., None], reset_state=reset_state,
            )
        return outputs, LSTMState(*final)

    def input_gates(self, x: jax.Array) -> jax.Array:
        """The input half of the gates, x W_input, of both directions for the same inputs:
        x `[N, in]` -> `[2, N, 4 dim]` (the layer's params must exist: call it in `apply`)."""
        return matmul("ni,dig->dng", x, self.variables["params"]["W_input"], self.dtype)

    def from_input_gates(self, xw: jax.Array, *args: Any) -> tuple[jax.Array, LSTMState]:
        """`__call__` (the same mask, state, reset, reset_state) from x W_input, xw `[2, B, T, 4 dim]`
        (inference, no residual), so that repeated inputs (token embeddings) have their gates computed once."""
        if self.residual:
            raise ValueError("a residual LSTM layer adds its inputs to its outputs: call it with them")
        params = self.variables["params"]
        return self._recurrence(xw, params["B"], params["W_hidden"], params.get("W_P"), *args)
