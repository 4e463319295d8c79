"""The LSTM-with-projection recurrence over time, with a hand-written reverse pass (`jax.custom_vjp`).

Per direction d and time step t (both directions batched on a leading axis of 2):
  z  = xw_t + h W_hidden                       gates in order i, j, f, o
  c' = sigmoid(f + 1) c + sigmoid(i) tanh(j),  c_new = clip(c', cell_clip)
  m  = sigmoid(o) tanh(c_new)
  h' = m W_proj,                               h_new = clip(h', proj_clip)
  (c, h) <- (c_new, h_new) where mask_t else (c, h);   output_t = h.
Without a projection (`w_proj=None`, bilm-tf's cell when projection_dim == dim) h' = m, P = dim and
proj_clip is ignored, as by TF's LSTMCell without num_proj.

The reverse loop does only the sequential work and emits dz_t and dh'_t; the weight gradients are
then one matmul each over all steps, not small per-step matmuls as plain autodiff's. Time is axis 0
(`[T, 2, B, .]`) or 2 (`[2, B, T, .]`, `BiLSTMLayer`'s layout, which needs no transposes).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from elmo_jax.model.precision import matmul

FORGET_BIAS = 1.0


def clip(x: jax.Array, bound: float | None) -> jax.Array:
    """x clipped to +-bound (None: no clipping); shared with the Pallas kernels."""
    return x if bound is None else jnp.clip(x, -bound, bound)


def clip_grad(x: jax.Array, bound: float) -> jax.Array:
    """d clip(x) / dx as jnp.clip's: 1 strictly inside, 0 outside, 1/2 on the boundary."""
    a = jnp.abs(x)
    return jnp.where(a < bound, 1.0, jnp.where(a == bound, 0.5, 0.0)).astype(x.dtype)


def cell_step(
    z: tuple[jax.Array, ...], c: jax.Array, cell_clip: float | None
) -> tuple[tuple[jax.Array, ...], jax.Array, jax.Array]:
    """One cell step: pre-activations z = (i, j, f, o), the previous c -> (activated gates, c_new, m)."""
    i, j, f, o = z
    gates = (jax.nn.sigmoid(i), jnp.tanh(j), jax.nn.sigmoid(f + FORGET_BIAS), jax.nn.sigmoid(o))
    sig_i, tanh_j, sig_f, sig_o = gates
    c_new = clip(sig_f * c + sig_i * tanh_j, cell_clip)
    return gates, c_new, sig_o * jnp.tanh(c_new)


def cell_grads(
    gates: tuple[jax.Array, ...], c_prev: jax.Array, d_m: jax.Array, dc: jax.Array, live: jax.Array,
    cell_clip: float | None,
) -> tuple[tuple[jax.Array, ...], jax.Array]:
    """`cell_step` in reverse: gates, previous c, dm, carried dc -> (dz per gate, the previous step's
    dc). Where `live` is false the state passed through: its cotangent goes straight back."""
    sig_i, tanh_j, sig_f, sig_o = gates
    c_raw = sig_f * c_prev + sig_i * tanh_j
    tanh_c = jnp.tanh(clip(c_raw, cell_clip))
    dc_raw = jnp.where(live, dc, 0.0) + d_m * sig_o * (1.0 - tanh_c * tanh_c)
    if cell_clip is not None:
        dc_raw = dc_raw * clip_grad(c_raw, cell_clip)
    dz = (
        dc_raw * tanh_j * sig_i * (1.0 - sig_i),
        dc_raw * sig_i * (1.0 - tanh_j * tanh_j),
        dc_raw * c_prev * sig_f * (1.0 - sig_f),
        d_m * tanh_c * sig_o * (1.0 - sig_o),
    )
    return dz, jnp.where(live, dc_raw * sig_f, dc)


def read_step(x: jax.Array, t: jax.Array, axis: int) -> jax.Array:
    """Step t of `x`, time on `axis`; shared with `lstm_wavefront`."""
    return jax.lax.dynamic_index_in_dim(x, t, axis, keepdims=False)


def write_step(buf: jax.Array, value: jax.Array, t: jax.Array, axis: int) -> jax.Array:
    """`value` into step t of `buf`, time on `axis`; shared with `lstm_wavefront`."""
    return jax.lax.dynamic_update_index_in_dim(buf, value, t, axis)


def stacked_shape(step_shape: tuple[int, ...], n_steps: int, axis: int) -> tuple[int, ...]:
    """The shape of `n_steps` per-step values of shape `step_shape`, time on `axis`."""
    return (*step_shape[:axis], n_steps, *step_shape[axis:])


def _stacked(step_shape: tuple[int, ...], n_steps: int, axis: int) -> jax.Array:
    """A float32 buffer for `n_steps` per-step values of shape `step_shape`, time on `axis`."""
    return jnp.zeros(stacked_shape(step_shape, n_steps, axis), jnp.float32)


def recurrence_inputs(xw, w_proj, c0, h0, cell_clip, proj_clip, time_axis: int, bias):
    """Checks `time_axis` and the clips, drops proj_clip without a projection, casts to float32, bias
    zeros when None -> (xw, c0, h0, bias, cell_clip, proj_clip); shared with `pallas_lstm`."""
    if time_axis not in (0, 2):
        raise ValueError(f"time_axis must be 0 or 2, got {time_axis}")
    for name, clip in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        if clip is not None and not clip > 0:  # A clip of 0 would zero the layer: the config's 0 is None here.
            raise ValueError(f"{name} must be None (no clipping) or > 0, got {clip}")
    cell_clip = None if cell_clip is None else float(cell_clip)
    proj_clip = None if proj_clip is None or w_proj is None else float(proj_clip)
    xw, c0, h0 = (jnp.asarray(a, jnp.float32) for a in (xw, c0, h0))
    bias = jnp.zeros((2, xw.shape[-1]), jnp.float32) if bias is None else jnp.asarray(bias, jnp.float32)
    return xw, c0, h0, bias, cell_clip, proj_clip


def with_reverse_pass(forward: Callable[..., tuple], reverse: Callable[..., tuple]) -> Callable[..., tuple]:
    """`forward(static, xw, bias, w_hidden, w_proj, mask, c0, h0, save)` -> (hs, (c, h), residuals) as a
    `jax.custom_vjp` function of the same arguments but `save` -> (hs, (c, h)), whose reverse pass is
    `reverse(static, (w_hidden, w_proj, mask, h0, hs, residuals), cotangents)`; shared with `pallas_lstm`."""

    def run(static, xw, bias, w_hidden, w_proj, mask, c0, h0):
        return forward(static, xw, bias, w_hidden, w_proj, mask, c0, h0, save=False)[:2]

    def run_fwd(static, xw, bias, w_hidden, w_proj, mask, c0, h0):
        hs, final, res = forward(static, xw, bias, w_hidden, w_proj, mask, c0, h0, save=True)
        return (hs, final), (w_hidden, w_proj, mask, h0, hs, res)

    run = jax.custom_vjp(run, nondiff_argnums=(0,))
    run.defvjp(run_fwd, reverse)
    return run


def _forward(static, xw, bias, w_hidden, w_proj, mask, c0, h0, save: bool, reset=None, reset_state=None):
    """The time loop -> (hs, final (c, h), with `save` the residuals). static: (cell_clip, proj_clip,
    dtype, axis, unroll, cell). `reset`: `lstm_recurrence`'s. The activated gates are written over xw,
    which XLA updates in place when xw is not needed afterwards; a `cell` kernel writes them there
    itself (it then carries xw also without `save`)."""
    cell_clip, proj_clip, dtype, axis, unroll, cell = static
    n_steps = xw.shape[axis]
    projected = w_proj is not None
    w_hidden = w_hidden.astype(dtype)
    w_proj = w_proj.astype(dtype) if projected else None
    bias = bias[:, None, :]
    hs = _stacked(h0.shape, n_steps, axis)
    res = (xw,) if cell is not None else ()
    if save:  # gates (over xw), c_prev [, m] [, h']
        res = (xw, _stacked(c0.shape, n_steps, axis))
        res += (_stacked(c0.shape, n_steps, axis),) if projected else ()
        res += (_stacked(h0.shape, n_steps, axis),) if proj_clip is not None else ()

    def body(t, carry):
        c, h, hs, res = carry
        m_t = read_step(mask, t, axis)
        if reset is not None:
            r_t = read_step(reset, t, axis)
            c, h = jnp.where(r_t, reset_state[0], c), jnp.where(r_t, reset_state[1], h)
        if cell is None:
            z = (read_step(res[0] if save else xw, t, axis) + bias) + matmul("dbp,dpg->dbg", h, w_hidden, dtype)
            gates, c_clip, m = cell_step(jnp.split(z, 4, axis=-1), c, cell_clip)
            if save:
                res = (write_step(res[0], jnp.concatenate(gates, axis=-1), t, axis), *res[1:])
        else:
            gates_over_xw, c_clip, m = cell.forward(res[0], t, bias[:, 0], h, w_hidden, c, cell_clip, dtype, axis)
            res = (gates_over_xw, *res[1:])
        h_raw = matmul("dbk,dkp->dbp", m, w_proj, dtype) if projected else m
        c_new = jnp.where(m_t, c_clip, c)
        h_new = jnp.where(m_t, clip(h_raw, proj_clip), h)
        if save:  # after the gates: c_prev [, m] [, h']
            values = (c,) + ((m,) if projected else ()) + ((h_raw,) if proj_clip is not None else ())
            res = (res[0], *(write_step(buf, v, t, axis) for buf, v in zip(res[1:], values)))
        return c_new, h_new, write_step(hs, h_new, t, axis), res

    c_t, h_t, hs, res = jax.lax.fori_loop(0, n_steps, body, (c0, h0, hs, res), unroll=unroll)
    return hs, (c_t, h_t), res


def _reverse(static, residuals, cotangents):
    cell_clip, proj_clip, dtype, axis, unroll, cell = static
    w_hidden, w_proj, mask, h0, hs, (gates_all, c_prev_all, *rest) = residuals
    projected = w_proj is not None
    m_all = rest.pop(0) if projected else None
    h_raw_all = rest
    d_hs, (d_ct, d_ht) = cotangents
    n_steps = hs.shape[axis]
    w_hidden_c = w_hidden.astype(dtype)
    w_proj_c = w_proj.astype(dtype) if projected else None
    dh_raw_all = _stacked(d_ht.shape, n_steps, axis)
    live_all = mask.astype(jnp.float32) if cell is not None else None  # The kernel's mask operand.

    # dz_t is written over step t's gates; the gates of step t - 1 are read after that write and
    # carried, so XLA updates the buffer in place (else XLA:CPU copies it every step). A `cell`
    # kernel reads step t's gates from the buffer itself (the carried ones are then unused).
    def body(k, carry):
        dc, dh, gates, dz_all, dh_raw_all = carry
        t = n_steps - 1 - k
        m_t = read_step(mask, t, axis)
        dh = dh + read_step(d_hs, t, axis)
        dh_raw = jnp.where(m_t, dh, 0.0)  # A masked step gets no cotangent (`cell_grads`).
        if proj_clip is not None:
            dh_raw = dh_raw * clip_grad(read_step(h_raw_all[0], t, axis), proj_clip)
        if cell is None:
            d_m = matmul("dbp,dkp->dbk", dh_raw, w_proj_c, dtype) if projected else dh_raw
            dz, dc_prev = cell_grads(
                jnp.split(gates, 4, axis=-1), read_step(c_prev_all, t, axis), d_m, dc, m_t, cell_clip
            )
            dz = jnp.concatenate(dz, axis=-1)
            dz_all = write_step(dz_all, dz, t, axis)
            gates = read_step(dz_all, jnp.maximum(t - 1, 0), axis)  # (a dummy read at t = 0)
        else:
            dz_all, dz, dc_prev = cell.reverse(
                dz_all, t, c_prev_all, dh_raw, w_proj_c, dc, live_all, cell_clip, dtype, axis
            )
        dh_prev = jnp.where(m_t, matmul("dbg,dpg->dbp", dz, w_hidden_c, dtype), dh)
        return dc_prev, dh_prev, gates, dz_all, write_step(dh_raw_all, dh_raw, t, axis)

    gates_last = read_step(gates_all, n_steps - 1, axis)
    dc0, dh0, _, dz, dh_raw = jax.lax.fori_loop(
        0, n_steps, body, (d_ct, d_ht, gates_last, gates_all, dh_raw_all), unroll=unroll
    )
    return dz, *weight_grads(axis, dtype, h0, hs, dz, m_all, dh_raw, w_hidden, w_proj), None, dc0, dh0


_recurrence = with_reverse_pass(_forward, _reverse)


def weight_grads(
    axis: int, dtype: jnp.dtype, h0, hs, dz, m_all, dh_raw, w_hidden, w_proj
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """(d bias, d W_hidden, d W_proj) from dz `[.., 4*dim]` and dh' `[.., P]`: one matmul each over all steps."""
    steps = "tdb" if axis == 0 else "dbt"
    h_prev = jnp.concatenate(
        [jnp.expand_dims(h0, axis), jax.lax.slice_in_dim(hs, 0, hs.shape[axis] - 1, axis=axis)], axis=axis
    )
    d_w_hidden = matmul(f"{steps}p,{steps}g->dpg", h_prev, dz, dtype).astype(w_hidden.dtype)
    d_w_proj = None if w_proj is None else matmul(f"{steps}k,{steps}p->dkp", m_all, dh_raw, dtype).astype(w_proj.dtype)
    return jnp.sum(dz, axis=(0, 2) if axis == 0 else (1, 2)), d_w_hidden, d_w_proj


def resolve_unroll(unroll: int, n_steps: int) -> int:
    """0 (automatic): 1 on every platform. Unrolling multiplies the compile work for no faster
    step (docs/performance.md)."""
    if unroll < 0:
        raise ValueError(f"model.lstm.unroll must be >= 0, got {unroll}")
    return max(1, min(int(unroll), n_steps))


def lstm_recurrence(
    xw: jax.Array,
    w_hidden: jax.Array,
    w_proj: jax.Array | None,
    mask: jax.Array,
    c0: jax.Array,
    h0: jax.Array,
    cell_clip: float | None,
    proj_clip: float | None,
    dtype: jnp.dtype = jnp.float32,
    time_axis: int = 0,
    bias: jax.Array | None = None,
    unroll: int = 1,
    reset: jax.Array | None = None,
    reset_state: tuple[jax.Array, jax.Array] | None = None,
    cell: Callable[..., tuple] | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """The LSTM over time for both directions -> (hs: h after each step, final (c, h)).

    time_axis 0: xw `[T, 2, B, 4*dim]` (x W_input), mask `[T, 2, B, 1]` (state frozen where 0), hs
    `[T, 2, B, P]`; time_axis 2: `[2, B, T, .]`. w_hidden `[2, P, 4*dim]`; w_proj `[2, dim, P]` or
    None; c0 `[2, B, dim]`, h0 `[2, B, P]`; clips static, None or > 0; bias `[2, 4*dim]` optional;
    matmul operands in `dtype`; unroll: steps per iteration (0 = automatic). reset (mask's layout):
    where true the state becomes `reset_state` (default zeros) first, with JAX's autodiff. cell: a
    hashable pair of kernels for a step's gates and cell update and for its reverse
    (`pallas_lstm_cell.FusedCell`, whose wrapper pads the inputs to its blocks), not with `reset`;
    None: XLA's matmuls, `cell_step` and `cell_grads`.
    """
    xw, c0, h0, bias, cell_clip, proj_clip = recurrence_inputs(
        xw, w_proj, c0, h0, cell_clip, proj_clip, time_axis, bias
    )
    mask = jnp.asarray(mask).astype(bool)
    if xw.shape[time_axis] == 0:  # no steps: nothing to run (the loops below assume one)
        return _stacked(h0.shape, 0, time_axis), (c0, h0)
    unroll = resolve_unroll(unroll, xw.shape[time_axis])
    static = (cell_clip, proj_clip, jnp.dtype(dtype), time_axis, unroll, cell)
    if reset is None:
        return _recurrence(static, xw, bias, w_hidden, w_proj, mask, c0, h0)
    if cell is not None:  # A kernel has no autodiff rule, which the reset path relies on.
        raise ValueError("lstm_recurrence: a cell kernel does not run with reset (use cell=None)")
    reset_state = tuple(jnp.asarray(a, jnp.float32) for a in reset_state or (0, 0))  # Default: zeros.
    return _forward(static, xw, bias, w_hidden, w_proj, mask, c0, h0, False, jnp.asarray(reset, bool), reset_state)[:2]
