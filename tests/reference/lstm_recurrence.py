"""The LSTM-with-projection recurrence as a plain `lax.scan`: the reference that the fast versions
(`lstm_recurrence`'s hand-written reverse pass, the Pallas kernels) are tested against, values and
gradients. Kept with the tests rather than in the package: no run uses it, as it keeps every
residual that autodiff wants.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def reference_recurrence(
    xw: jax.Array, w_hidden: jax.Array, w_proj: jax.Array | None, mask: jax.Array, c0: jax.Array, h0: jax.Array,
    cell_clip: float | None, proj_clip: float | None,
) -> tuple[tuple[jax.Array, tuple[jax.Array, jax.Array]], tuple[jax.Array, jax.Array]]:
    """((hs, (c_T, h_T)), (c', h')): the recurrence of `lstm_recurrence` with time leading (xw
    `[T, 2, B, 4*dim]`, mask `[T, 2, B, 1]`), differentiated by plain autodiff; also the pre-clip c'
    and h' of every step (to check that the clips bite).

    w_proj None: no projection (h' = sigmoid(o) tanh(c)) and no proj_clip, as TF's LSTMCell without num_proj.
    """

    def step(carry, inputs):
        c, h = carry
        xw_t, m_t = inputs
        z = xw_t + jnp.einsum("dbp,dpg->dbg", h, w_hidden)
        i, j, f, o = jnp.split(z, 4, axis=-1)
        c_raw = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(j)
        c_new = c_raw if cell_clip is None else jnp.clip(c_raw, -cell_clip, cell_clip)
        h_raw = jax.nn.sigmoid(o) * jnp.tanh(c_new)
        if w_proj is not None:
            h_raw = jnp.einsum("dbk,dkp->dbp", h_raw, w_proj)
        h_new = h_raw if proj_clip is None or w_proj is None else jnp.clip(h_raw, -proj_clip, proj_clip)
        c, h = jnp.where(m_t, c_new, c), jnp.where(m_t, h_new, h)
        return (c, h), (h, c_raw, h_raw)

    (c_t, h_t), (hs, c_raws, h_raws) = jax.lax.scan(step, (c0, h0), (xw, mask))
    return (hs, (c_t, h_t)), (c_raws, h_raws)
