"""A stack of LSTM layers as a wavefront: layer l's step t runs beside layer l-1's step t+1.

Layer by layer, a direction's L layers take L T dependent cell steps; skewed by one step per
layer they take T + L - 1 loop iterations, and the L cell steps of an iteration are independent
(on a GPU a step is latency-bound, so fewer iterations is less time). Iteration k runs step
t = k - l of each layer l with 0 <= t < T; layer l > 0 reads the output layer l-1 produced in the
iteration before, scaled by its dropout (the layered stack's mask, drawn for the whole input) and
added back to the layer's output when the layer is residual. The cell is `lstm_recurrence`'s
(`cell_step`, clips, masked steps frozen, resets); the reverse pass is JAX's autodiff of the loop.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from elmo_jax.model.lstm_recurrence import cell_step, clip, resolve_unroll
from elmo_jax.model.precision import matmul


class WavefrontLayer(NamedTuple):
    """One layer's weights and wiring. w_input `[2, in, 4 dim]` (None for the first layer, whose
    x W_input is given), w_hidden `[2, P, 4 dim]`, bias `[2, 4 dim]`, w_proj `[2, dim, P]` or None;
    input_scale `[2, B, T, P]`: its input's dropout (0 or 1 / keep), None without."""

    w_input: jax.Array | None
    w_hidden: jax.Array
    bias: jax.Array
    w_proj: jax.Array | None
    input_scale: jax.Array | None


def _at(x: jax.Array, t: jax.Array) -> jax.Array:
    """Step t of `[2, B, T, .]`."""
    return jax.lax.dynamic_index_in_dim(x, t, 2, keepdims=False)


def wavefront_lstm(
    first_gates: jax.Array,
    layers: list[WavefrontLayer],
    residual: Sequence[bool],
    mask: jax.Array,
    states: list[tuple[jax.Array, jax.Array]],
    cell_clip: float | None,
    proj_clip: float | None,
    dtype: jnp.dtype = jnp.float32,
    unroll: int = 0,
    reset: jax.Array | None = None,
    reset_states: list[tuple[jax.Array, jax.Array]] | None = None,
) -> tuple[list[jax.Array], list[tuple[jax.Array, jax.Array]]]:
    """The layers over time for both directions -> (each layer's outputs `[2, B, T, P]`, its final
    (c, h)), as `BiLSTMLayer`s one after the other would give them.

    first_gates `[2, B, T, 4 dim]`: the first layer's x W_input; residual: per layer, whether its
    input is added to its output; mask `[2, B, T]` (state frozen where 0); states: per layer c
    `[2, B, dim]`, h `[2, B, P]`; clips None or > 0 (proj_clip ignored without a projection);
    matmul operands in `dtype`; unroll: `lstm_recurrence`'s. reset `[2, B, T]`: where true a
    layer's state becomes its `reset_states` entry (`[2, 1, .]`, default zeros) before its step.
    """
    n_steps = first_gates.shape[2]
    if n_steps == 0:
        outputs = [jnp.zeros((*h.shape[:2], 0, h.shape[-1]), jnp.float32) for _, h in states]
        return outputs, list(states)
    mask = jnp.asarray(mask).astype(bool)[..., None]
    reset = None if reset is None else jnp.asarray(reset).astype(bool)[..., None]
    if reset is not None and reset_states is None:
        reset_states = [(jnp.zeros_like(c[:, :1]), jnp.zeros_like(h[:, :1])) for c, h in states]
    first_gates = jnp.asarray(first_gates, jnp.float32)
    states = [(jnp.asarray(c, jnp.float32), jnp.asarray(h, jnp.float32)) for c, h in states]
    outputs = [jnp.zeros((*h.shape[:2], n_steps, h.shape[-1]), jnp.float32) for _, h in states]
    latest = [h for _, h in states]  # Each layer's output of the iteration before.

    def layer_step(i: int, layer: WavefrontLayer, k: jax.Array, state: tuple, below: jax.Array | None) -> tuple:
        """Layer i's step t = k - i, `below` the output of layer i-1 at t -> (its new state, its
        output, whether t is one of the T steps, t clipped to them)."""
        t = k - i
        real = (t >= 0) & (t < n_steps)
        at = jnp.clip(t, 0, n_steps - 1)
        c, h = state
        if reset is not None:
            r_t = _at(reset, at) & real
            c, h = jnp.where(r_t, reset_states[i][0], c), jnp.where(r_t, reset_states[i][1], h)
        if layer.w_input is None:
            x, xw = None, _at(first_gates, at)
        else:
            x = below if layer.input_scale is None else below * _at(layer.input_scale, at)
            xw = matmul("dbi,dig->dbg", x, layer.w_input, dtype)
        z = (xw + layer.bias[:, None, :]) + matmul("dbp,dpg->dbg", h, layer.w_hidden, dtype)
        _, c_clip, m = cell_step(jnp.split(z, 4, axis=-1), c, cell_clip)
        projected = layer.w_proj is not None
        h_raw = matmul("dbk,dkp->dbp", m, layer.w_proj, dtype) if projected else m
        live = _at(mask, at) & real
        c_new = jnp.where(live, c_clip, c)
        h_new = jnp.where(live, clip(h_raw, proj_clip if projected else None), h)
        return (c_new, h_new), (h_new + x if residual[i] else h_new), real, at

    def body(k, carry):
        states, latest, outputs = carry
        new = [layer_step(i, layer, k, states[i], latest[i - 1] if i else None) for i, layer in enumerate(layers)]
        outputs = [
            jax.lax.dynamic_update_index_in_dim(buf, jnp.where(real, out, _at(buf, at)), at, 2)
            for buf, (_, out, real, at) in zip(outputs, new)
        ]
        return [s for s, *_ in new], [out for _, out, *_ in new], outputs

    n_iterations = n_steps + len(layers) - 1
    carry = (states, latest, outputs)
    final, _, outputs = jax.lax.fori_loop(0, n_iterations, body, carry, unroll=resolve_unroll(unroll, n_iterations))
    return outputs, final
