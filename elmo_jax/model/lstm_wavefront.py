"""A stack of LSTM layers as a wavefront: layer l's step t runs beside layer l-1's step t+1.

Layer by layer, a direction's L layers take L T dependent cell steps; skewed by one step per
layer they take T + L - 1 loop iterations, and the L cell steps of an iteration are independent
(on a GPU a step is latency-bound, so fewer iterations is less time). Iteration k runs step
t = k - l of each layer l with 0 <= t < T; layer l > 0 reads the output layer l-1 produced in the
iteration before, scaled by its dropout (the layered stack's mask, drawn for the whole input) and
added back to the layer's output when the layer is residual. The cell is `lstm_recurrence`'s
(`cell_step`, clips, masked steps frozen, resets).

The reverse pass is skewed the same way, the top layer first: layer l's step t in reverse runs
one iteration after layer l+1's, which hands it the cotangent of its output at t. As
`lstm_recurrence`'s, the loop does only the sequential work and emits dz and dh'; the weight
gradients are one matmul each over all steps afterwards (autodiff would accumulate each weight's
gradient in every iteration: 64 MB of float32 read and written per step for elmo_original's W_hidden).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from elmo_jax.model.lstm_recurrence import (
    cell_grads, cell_step, clip, clip_grad, read_step, resolve_unroll, weight_grads, write_step,
)
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


def _buffer(like: jax.Array, n_steps: int) -> jax.Array:
    """A float32 `[2, B, T + 1, .]` buffer for per-step values shaped as `like` `[2, B, .]`: slot T
    is where iterations outside a layer's steps write, so that none reads what it overwrites."""
    return jnp.zeros((*like.shape[:2], n_steps + 1, like.shape[-1]), jnp.float32)


def _step_of(t: jax.Array, n_steps: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A layer's step t in an iteration -> (whether t is one of the T steps, t clipped to them for
    reads, its slot for writes)."""
    real = (t >= 0) & (t < n_steps)
    return real, jnp.clip(t, 0, n_steps - 1), jnp.where(real, t, n_steps)


def _forward(static, first_gates, layers, mask, states, save: bool, reset=None, reset_states=None):
    """The skewed loop -> (outputs, final states, with `save` the residuals). static: (residual,
    cell_clip, proj_clip (None without a projection), dtype, unroll)."""
    residual, cell_clip, proj_clip, dtype, unroll = static
    n_steps, n_layers = first_gates.shape[2], len(layers)
    outputs = [_buffer(h, n_steps) for _, h in states]
    saved = [
        {"gates": _buffer(first_gates[:, :, 0], n_steps), "c_prev": _buffer(c, n_steps), "hs": _buffer(h, n_steps)}
        | ({"m": _buffer(c, n_steps)} if layer.w_proj is not None else {})
        | ({"h_raw": _buffer(h, n_steps)} if proj_clip is not None else {})
        for layer, (c, h) in zip(layers, states)
    ] if save else [{} for _ in layers]

    def layer_step(i: int, layer: WavefrontLayer, k, state, below, out_buf, saved_i):
        """Layer i's step k - i, `below` the output of layer i-1 at that step."""
        real, at, slot = _step_of(k - i, n_steps)
        c, h = state
        if reset is not None:
            r_t = read_step(reset, at, 2) & real
            c, h = jnp.where(r_t, reset_states[i][0], c), jnp.where(r_t, reset_states[i][1], h)
        if layer.w_input is None:
            x, xw = None, read_step(first_gates, at, 2)
        else:
            x = below if layer.input_scale is None else below * read_step(layer.input_scale, at, 2)
            xw = matmul("dbi,dig->dbg", x, layer.w_input, dtype)
        z = (xw + layer.bias[:, None, :]) + matmul("dbp,dpg->dbg", h, layer.w_hidden, dtype)
        gates, c_clip, m = cell_step(jnp.split(z, 4, axis=-1), c, cell_clip)
        projected = layer.w_proj is not None
        h_raw = matmul("dbk,dkp->dbp", m, layer.w_proj, dtype) if projected else m
        live = read_step(mask, at, 2) & real
        c_new = jnp.where(live, c_clip, c)
        h_new = jnp.where(live, clip(h_raw, proj_clip), h)
        out = h_new + x if residual[i] else h_new
        values = {"gates": jnp.concatenate(gates, axis=-1), "c_prev": c, "hs": h_new, "m": m, "h_raw": h_raw}
        saved_i = {name: write_step(buf, values[name], slot, 2) for name, buf in saved_i.items()}
        return (c_new, h_new), out, write_step(out_buf, out, slot, 2), saved_i

    def body(k, carry):
        states, latest, outputs, saved = carry
        new = [
            layer_step(i, layer, k, states[i], latest[i - 1] if i else None, outputs[i], saved[i])
            for i, layer in enumerate(layers)
        ]
        return tuple([step[j] for step in new] for j in range(4))

    carry = (states, [h for _, h in states], outputs, saved)
    n_iterations = n_steps + n_layers - 1
    unroll = resolve_unroll(unroll, n_iterations)
    final, _, outputs, saved = jax.lax.fori_loop(0, n_iterations, body, carry, unroll=unroll)
    outputs = [buf[:, :, :n_steps] for buf in outputs]
    saved = [{name: buf[:, :, :n_steps] for name, buf in saved_i.items()} for saved_i in saved]
    return outputs, final, saved


def _run(static, first_gates, layers, mask, states):
    return _forward(static, first_gates, layers, mask, states, save=False)[:2]


def _run_forward(static, first_gates, layers, mask, states):
    outputs, final, saved = _forward(static, first_gates, layers, mask, states, save=True)
    return (outputs, final), (layers, mask, states, outputs, saved)


def _run_reverse(static, residuals, cotangents):
    residual, cell_clip, proj_clip, dtype, unroll = static
    layers, mask, states, outputs, saved = residuals
    d_outputs, d_final = cotangents
    n_steps, n_layers = outputs[0].shape[2], len(layers)
    projected = layers[0].w_proj is not None
    d_written = [
        {"dz": _buffer(saved_i["gates"][:, :, 0], n_steps), "dh_raw": _buffer(h, n_steps)}
        | ({"dx": _buffer(h, n_steps)} if i else {})
        for i, (saved_i, (_, h)) in enumerate(zip(saved, states))
    ]

    def layer_step(i: int, layer: WavefrontLayer, k, carry_i, from_above, written):
        """Layer i's step in reverse, T - 1 - k + (L - 1 - i); `from_above`: the cotangent of its
        output at that step through layer i+1's input."""
        real, at, slot = _step_of(n_steps - 1 - k + (n_layers - 1 - i), n_steps)
        dc, dh = carry_i
        d_out = read_step(d_outputs[i], at, 2)
        if from_above is not None:
            d_out = d_out + from_above
        d_out = jnp.where(real, d_out, 0.0)
        live = read_step(mask, at, 2) & real
        dh = dh + d_out
        dh_raw = jnp.where(live, dh, 0.0)
        if proj_clip is not None:
            dh_raw = dh_raw * clip_grad(read_step(saved[i]["h_raw"], at, 2), proj_clip)
        d_m = matmul("dbp,dkp->dbk", dh_raw, layer.w_proj, dtype) if projected else dh_raw
        gates = jnp.split(read_step(saved[i]["gates"], at, 2), 4, axis=-1)
        dz, dc_prev = cell_grads(gates, read_step(saved[i]["c_prev"], at, 2), d_m, dc, live, cell_clip)
        dz = jnp.concatenate(dz, axis=-1)
        dh_prev = jnp.where(live, matmul("dbg,dpg->dbp", dz, layer.w_hidden, dtype), dh)
        values = {"dz": dz, "dh_raw": dh_raw}
        to_below = None
        if layer.w_input is not None:
            dx = matmul("dbg,dig->dbi", dz, layer.w_input, dtype)
            values["dx"] = dx + d_out if residual[i] else dx
            to_below = values["dx"] if layer.input_scale is None else values["dx"] * read_step(layer.input_scale, at, 2)
        written = {name: write_step(buf, values[name], slot, 2) for name, buf in written.items()}
        return (dc_prev, dh_prev), to_below, written

    def body(k, carry):
        d_states, handed, written = carry  # handed[i]: layer i's cotangent for layer i-1's output.
        new = [
            layer_step(i, layer, k, d_states[i], handed[i + 1] if i + 1 < n_layers else None, written[i])
            for i, layer in enumerate(layers)
        ]
        return tuple([step[j] for step in new] for j in range(3))

    handed = [jnp.zeros_like(states[i - 1][1]) if i else None for i in range(n_layers)]
    carry = ([tuple(d) for d in d_final], handed, d_written)
    n_iterations = n_steps + n_layers - 1
    unroll = resolve_unroll(unroll, n_iterations)
    d_states, _, d_written = jax.lax.fori_loop(0, n_iterations, body, carry, unroll=unroll)
    d_written = [{name: buf[:, :, :n_steps] for name, buf in w.items()} for w in d_written]

    d_layers = []
    for i, (layer, saved_i, w) in enumerate(zip(layers, saved, d_written)):
        d_bias, d_w_hidden, d_w_proj = weight_grads(
            2, dtype, states[i][1], saved_i["hs"], w["dz"], saved_i.get("m"), w["dh_raw"], layer.w_hidden, layer.w_proj
        )
        d_w_input = d_scale = None
        if layer.w_input is not None:
            below = outputs[i - 1]
            x = below if layer.input_scale is None else below * layer.input_scale
            d_w_input = matmul("dbti,dbtg->dig", x, w["dz"], dtype).astype(layer.w_input.dtype)
            d_scale = None if layer.input_scale is None else w["dx"] * below
        d_layers.append(WavefrontLayer(d_w_input, d_w_hidden, d_bias.astype(layer.bias.dtype), d_w_proj, d_scale))
    return d_written[0]["dz"], d_layers, None, d_states


_wavefront = jax.custom_vjp(_run, nondiff_argnums=(0,))
_wavefront.defvjp(_run_forward, _run_reverse)


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
    layer's state becomes its `reset_states` entry (`[2, 1, .]`, default zeros) before its step,
    with JAX's autodiff (embedding packs sentences; training does not).
    """
    n_steps = first_gates.shape[2]
    states = [(jnp.asarray(c, jnp.float32), jnp.asarray(h, jnp.float32)) for c, h in states]
    if n_steps == 0:
        return [jnp.zeros((*h.shape[:2], 0, h.shape[-1]), jnp.float32) for _, h in states], states
    proj_clip = None if layers[0].w_proj is None else proj_clip  # It clips W_P's output, as lstm_recurrence.
    static = (tuple(residual), cell_clip, proj_clip, jnp.dtype(dtype), unroll)
    first_gates = jnp.asarray(first_gates, jnp.float32)
    mask = jnp.asarray(mask).astype(bool)[..., None]
    if reset is None:
        return _wavefront(static, first_gates, list(layers), mask, states)
    if reset_states is None:
        reset_states = [(jnp.zeros_like(c[:, :1]), jnp.zeros_like(h[:, :1])) for c, h in states]
    reset = jnp.asarray(reset).astype(bool)[..., None]
    return _forward(static, first_gates, list(layers), mask, states, False, reset, reset_states)[:2]
