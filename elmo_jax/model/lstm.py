"""LSTM with projection and clipping (TF `LSTMCell` semantics), both directions in one scan.

Per direction d and time step:
  z = x W_input + h W_hidden + b           gates in order i, j, f, o
  c = sigmoid(f + 1) c + sigmoid(i) tanh(j),   c clipped to +-cell_clip
  h = (sigmoid(o) tanh(c)) W_proj,             h clipped to +-proj_clip
The forward and backward stacks have separate weights stored stacked on a leading axis of size 2,
so each time step is one batched matmul for both directions; the input half of the matmul is
hoisted out of the time loop.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.model.char_cnn import uniform_symmetric

FORGET_BIAS = 1.0


class LSTMState(NamedTuple):
    """Carried state of one bidirectional layer: c `[2, B, dim]`, h `[2, B, projection_dim]`."""

    c: jax.Array
    h: jax.Array


def lstm_cell(
    xw: jax.Array,
    state: LSTMState,
    w_hidden: jax.Array,
    w_proj: jax.Array,
    cell_clip: float | None,
    proj_clip: float | None,
    dtype: jnp.dtype = jnp.float32,
) -> LSTMState:
    """One time step for both directions.

    xw: `[2, B, 4*dim]` input contribution (x W_input + b); w_hidden: `[2, P, 4*dim]`;
    w_proj: `[2, dim, P]`. Returns the new state.
    """
    z = xw + jnp.einsum(
        "dbp,dpg->dbg", state.h.astype(dtype), w_hidden.astype(dtype), preferred_element_type=jnp.float32
    )
    i, j, f, o = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f + FORGET_BIAS) * state.c + jax.nn.sigmoid(i) * jnp.tanh(j)
    if cell_clip:
        c = jnp.clip(c, -cell_clip, cell_clip)
    h = jnp.einsum(
        "dbk,dkp->dbp",
        (jax.nn.sigmoid(o) * jnp.tanh(c)).astype(dtype),
        w_proj.astype(dtype),
        preferred_element_type=jnp.float32,
    )
    if proj_clip:
        h = jnp.clip(h, -proj_clip, proj_clip)
    return LSTMState(c, h)


class BiLSTMLayer(nn.Module):
    """One LSTM-with-projection layer for both directions, run over time with `lax.scan`."""

    dim: int
    projection_dim: int
    cell_clip: float | None = None
    proj_clip: float | None = None
    residual: bool = False
    remat: bool = False
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, state: LSTMState) -> tuple[jax.Array, LSTMState]:
        """x: `[2, B, T, in]`, mask: `[2, B, T]` (state frozen where 0).

        Returns outputs `[2, B, T, P]` (plus the input when residual) and the final state.
        """
        init = uniform_symmetric(0.05)
        d_in, gates = x.shape[-1], 4 * self.dim
        w_input = self.param("W_input", init, (2, d_in, gates))
        w_hidden = self.param("W_hidden", init, (2, self.projection_dim, gates))
        bias = self.param("B", nn.initializers.zeros, (2, gates))
        w_proj = self.param("W_P", init, (2, self.dim, self.projection_dim))

        xw = jnp.einsum(
            "dbti,dig->tdbg", x.astype(self.dtype), w_input.astype(self.dtype), preferred_element_type=jnp.float32
        ) + bias[:, None, :]
        mask_t = jnp.moveaxis(mask, 2, 0)[..., None]  # [T, 2, B, 1]

        def step(carry: LSTMState, inputs: tuple[jax.Array, jax.Array]) -> tuple[LSTMState, jax.Array]:
            xw_t, m_t = inputs
            new = lstm_cell(xw_t, carry, w_hidden, w_proj, self.cell_clip, self.proj_clip, self.dtype)
            new = LSTMState(jnp.where(m_t, new.c, carry.c), jnp.where(m_t, new.h, carry.h))
            return new, new.h

        if self.remat:
            step = jax.checkpoint(step)
        final, hs = jax.lax.scan(step, state, (xw, mask_t))
        outputs = jnp.moveaxis(hs, 0, 2)  # [2, B, T, P]
        if self.residual:
            outputs = outputs + x
        return outputs, final
