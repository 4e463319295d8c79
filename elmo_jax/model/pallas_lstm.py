"""The LSTM-with-projection recurrence of `lstm_recurrence` as two Pallas kernels (GPU/Triton lowering).

Same equations, masking, clipping, layouts and result. Program (direction, block of rows) runs the
time loop, and in each step a loop over tiles of hidden units; dots accumulate in float32 without
rounding to `dtype`; inputs are zero-padded to the blocks, exactly (docs/performance.md, "The
Pallas LSTM kernels").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from elmo_jax.model.lstm_recurrence import (
    cell_grads, cell_step, clip, clip_grad, recurrence_inputs, stacked_shape, weight_grads, with_reverse_pass,
)
from elmo_jax.model.triton_blocks import (
    MIN_BLOCK, check_block, largest_block, pad_to, padded_width, pallas_call, round_up, sync_threads,
)

DEFAULT_BLOCK_BATCH = MIN_BLOCK  # the smallest M of a tensor-core dot
MAX_BLOCK_HIDDEN = 128
GATE_TILE_BYTES = 64 * 1024  # W_hidden gate tile [P, block_hidden] budget in shared memory
# Triton's software pipelining keeps num_stages - 1 extra copies of every dot-operand load in the time
# loop in shared memory: all the weight tiles of a step, far over the 227 KiB of an H100 at 2 or more.
DEFAULT_NUM_STAGES = 1


@dataclasses.dataclass(frozen=True)
class _Config:
    """Static (hashable) settings of one recurrence."""

    cell_clip: float | None
    proj_clip: float | None
    dtype: jnp.dtype
    axis: int
    block_batch: int
    block_hidden: int
    interpret: bool
    num_warps: int | None
    num_stages: int


# Sequences are [T, 2, B, X] (time_axis 0) or [2, B, T, X] (time_axis 2); in the kernel a
# sequence ref is [T, block_batch, X] or [block_batch, T, X] and `_at` indexes step t.
def seq_spec(axis: int, n_steps: int, block_batch: int, width: int, grid_rank: int = 2) -> pl.BlockSpec:
    """The block of program (d, b, ...) of a sequence: all steps of its rows, `width` whole; shared
    with `pallas_lstm_cell`, whose grid has a third axis (`grid_rank` 3)."""
    if axis == 0:
        return pl.BlockSpec((n_steps, None, block_batch, width), lambda d, b, *_: (0, d, b, 0))
    return pl.BlockSpec((None, block_batch, n_steps, width), lambda d, b, *_: (d, b, 0, 0))


def _state_spec(block_batch: int, width: int) -> pl.BlockSpec:
    return pl.BlockSpec((None, block_batch, width), lambda d, b: (d, b, 0))


def _weight_spec(rows: int, cols: int) -> pl.BlockSpec:
    return pl.BlockSpec((None, rows, cols), lambda d, b: (d, 0, 0))


def step_index(axis: int, t, cols=slice(None)) -> tuple:
    """Index of step t's `[block_batch, cols]` slice of a sequence ref; shared with `pallas_lstm_cell`."""
    return (t, slice(None), cols) if axis == 0 else (slice(None), t, cols)


def dot_f32(a: jax.Array, b: jax.Array, dtype: jnp.dtype, transpose_b: bool = False) -> jax.Array:
    """a @ b (or a @ b^T) with operands in `dtype`, accumulated and returned in float32; shared with
    `pallas_lstm_cell`."""
    dims = (((1,), (1 if transpose_b else 0,)), ((), ()))
    return jax.lax.dot_general(a.astype(dtype), b.astype(dtype), dims, preferred_element_type=jnp.float32)


def _tiles(cfg: _Config, dim: int) -> tuple[int, Callable[[jax.Array], pl.Slice], Callable[[int, jax.Array], pl.Slice]]:
    """(n_tiles, tile(k): tile k's hidden units, gate_cols(g, k): gate g's columns of tile k)."""
    th = cfg.block_hidden
    return dim // th, lambda k: pl.ds(k * th, th), lambda g, k: pl.ds(g * dim + k * th, th)


def _copy_tiles(src_ref, dst_ref, n_tiles: int, tile: Callable[[jax.Array], pl.Slice], interpret: bool) -> None:
    """dst[:, tile k] = src[:, tile k] for every tile, then a barrier: the cell state (and its
    cotangent) `[bb, dim]` lives in an output block, too wide for registers."""

    def copy(k, carry):
        dst_ref[:, tile(k)] = src_ref[:, tile(k)]
        return carry

    jax.lax.fori_loop(0, n_tiles, copy, None)
    sync_threads(interpret)


def _forward_kernel(*refs, cfg: _Config, n_steps: int, dim: int, projected: bool, save: bool) -> None:
    """One program: block_batch rows of one direction, all steps (see the module docstring)."""
    refs = list(refs)
    xw_ref, bias_ref, w_hidden_ref = refs[:3]
    w_proj_ref = refs[3] if projected else None
    mask_ref, c0_ref, h0_ref, hs_ref, c_ref, h_out_ref, *res_refs = refs[3 + projected:]
    if save:
        gates_ref, c_prev_ref = res_refs[:2]
        m_ref = res_refs[2] if projected else None
        h_raw_ref = res_refs[-1] if cfg.proj_clip is not None else None
    axis, dtype = cfg.axis, cfg.dtype
    n_tiles, tile, gate_cols = _tiles(cfg, dim)
    _copy_tiles(c0_ref, c_ref, n_tiles, tile, cfg.interpret)

    def step(t, h):
        live = mask_ref[step_index(axis, t)] > 0  # [bb, 1]
        h_op = h.astype(dtype)

        def tile_step(k, h_raw):
            z = []
            for g in range(4):
                cols = gate_cols(g, k)
                z_g = xw_ref[step_index(axis, t, cols)] + bias_ref[cols][None, :]
                z.append(z_g + dot_f32(h_op, w_hidden_ref[:, cols], dtype))
            c = c_ref[:, tile(k)]
            gates, c_clip, m = cell_step(z, c, cfg.cell_clip)
            c_ref[:, tile(k)] = jnp.where(live, c_clip, c)
            if save:
                for g, a in enumerate(gates):
                    gates_ref[step_index(axis, t, gate_cols(g, k))] = a
                c_prev_ref[step_index(axis, t, tile(k))] = c
            if not projected:  # h' = m, never clipped: assembled in hs_ref[t]
                hs_ref[step_index(axis, t, tile(k))] = m
                return h_raw
            if save:
                m_ref[step_index(axis, t, tile(k))] = m
            return h_raw + dot_f32(m, w_proj_ref[tile(k), :], dtype)

        h_raw = jax.lax.fori_loop(0, n_tiles, tile_step, jnp.zeros_like(h) if projected else None)
        if projected:
            if save and cfg.proj_clip is not None:
                h_raw_ref[step_index(axis, t)] = h_raw
            h_new = jnp.where(live, clip(h_raw, cfg.proj_clip), h)
        else:
            sync_threads(cfg.interpret)  # m's tiles, stored by other threads
            h_new = jnp.where(live, hs_ref[step_index(axis, t)], h)
        hs_ref[step_index(axis, t)] = h_new
        sync_threads(cfg.interpret)  # this step's c before the next step's loads
        return h_new

    h_out_ref[...] = jax.lax.fori_loop(0, n_steps, step, h0_ref[...])


def _backward_kernel(*refs, cfg: _Config, n_steps: int, dim: int, projected: bool) -> None:
    """The reverse time loop of `lstm_recurrence._reverse` for one program's rows: dz_t, dh'_t, dc0, dh0."""
    mask_ref, gates_ref, c_prev_ref, *refs = refs
    h_raw_ref = refs.pop(0) if cfg.proj_clip is not None else None
    d_hs_ref, d_c_ref, d_h_ref, w_hidden_ref, *refs = refs
    w_proj_ref = refs.pop(0) if projected else None
    dz_ref, *refs = refs
    dh_raw_ref = refs.pop(0) if projected else None
    dc_ref, dh0_ref = refs
    axis, dtype = cfg.axis, cfg.dtype
    n_tiles, tile, gate_cols = _tiles(cfg, dim)
    _copy_tiles(d_c_ref, dc_ref, n_tiles, tile, cfg.interpret)

    def step(k_rev, dh):
        t = n_steps - 1 - k_rev
        live = mask_ref[step_index(axis, t)] > 0  # [bb, 1]
        dh = dh + d_hs_ref[step_index(axis, t)]
        dh_live = jnp.where(live, dh, 0.0)  # A masked step gets no cotangent (`cell_grads`).
        if projected:
            dh_raw = dh_live
            if cfg.proj_clip is not None:
                dh_raw = dh_raw * clip_grad(h_raw_ref[step_index(axis, t)], cfg.proj_clip)
            dh_raw_ref[step_index(axis, t)] = dh_raw
        else:  # d m = dh', read back by tiles
            dh0_ref[...] = dh_live
            sync_threads(cfg.interpret)

        def tile_step(k, acc):
            d_m = dot_f32(dh_raw, w_proj_ref[tile(k), :], dtype, transpose_b=True) if projected else dh0_ref[:, tile(k)]
            gates = tuple(gates_ref[step_index(axis, t, gate_cols(g, k))] for g in range(4))
            c_prev = c_prev_ref[step_index(axis, t, tile(k))]
            dz, dc_prev = cell_grads(gates, c_prev, d_m, dc_ref[:, tile(k)], live, cfg.cell_clip)
            dc_ref[:, tile(k)] = dc_prev
            for g, dz_g in enumerate(dz):
                cols = gate_cols(g, k)
                dz_ref[step_index(axis, t, cols)] = dz_g
                acc = acc + dot_f32(dz_g, w_hidden_ref[:, cols], dtype, transpose_b=True)
            return acc

        acc = jax.lax.fori_loop(0, n_tiles, tile_step, jnp.zeros_like(dh))  # dz_t W_hidden^T
        sync_threads(cfg.interpret)  # this step's dc (and dh0_ref's loads) before the next step's
        return jnp.where(live, acc, dh)

    dh0_ref[...] = jax.lax.fori_loop(0, n_steps, step, d_h_ref[...])


def _call(kernel, cfg: _Config, **specs):
    return pallas_call(kernel, interpret=cfg.interpret, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **specs)


def _forward(cfg: _Config, xw, bias, w_hidden, w_proj, mask, c0, h0, save: bool):
    """Runs the forward kernel: hs, the final (c, h) and (with `save`) the residuals."""
    axis, bb = cfg.axis, cfg.block_batch
    n_steps = xw.shape[axis]
    _, batch, dim = c0.shape
    p = h0.shape[-1]
    projected = w_proj is not None
    seq = partial(seq_spec, axis, n_steps, bb)
    f32 = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    inputs = [xw, bias, w_hidden.astype(cfg.dtype)] + ([w_proj.astype(cfg.dtype)] if projected else [])
    inputs += [mask, c0, h0]
    in_specs = [seq(4 * dim), pl.BlockSpec((None, 4 * dim), lambda d, b: (d, 0)), _weight_spec(p, 4 * dim)]
    in_specs += [_weight_spec(dim, p)] if projected else []
    in_specs += [seq(1), _state_spec(bb, dim), _state_spec(bb, p)]
    out_shape = [f32(stacked_shape(h0.shape, n_steps, axis)), f32(c0.shape), f32(h0.shape)]
    out_specs = [seq(p), _state_spec(bb, dim), _state_spec(bb, p)]
    if save:  # gates, c_prev [, m] [, h']
        widths = [4 * dim, dim] + ([dim] if projected else []) + ([p] if cfg.proj_clip is not None else [])
        out_shape += [f32(stacked_shape((2, batch, w), n_steps, axis)) for w in widths]
        out_specs += [seq(w) for w in widths]
    kernel = partial(_forward_kernel, cfg=cfg, n_steps=n_steps, dim=dim, projected=projected, save=save)
    hs, c_t, h_t, *res = _call(
        kernel, cfg, grid=(2, batch // bb), in_specs=in_specs, out_specs=out_specs, out_shape=out_shape,
        name="lstm_forward",
    )(*inputs)
    return hs, (c_t, h_t), res


def _reverse(cfg: _Config, residuals, cotangents):
    w_hidden, w_proj, mask, h0, hs, res = residuals
    gates, c_prev, *rest = res
    projected = w_proj is not None
    m_all = rest.pop(0) if projected else None
    h_raw = rest  # [h'] with proj_clip, else []
    d_hs, (d_c, d_h) = cotangents
    axis, bb, dtype = cfg.axis, cfg.block_batch, cfg.dtype
    n_steps = hs.shape[axis]
    _, batch, dim = d_c.shape
    p = d_h.shape[-1]
    seq = partial(seq_spec, axis, n_steps, bb)
    f32 = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)

    inputs = [mask, gates, c_prev, *h_raw, d_hs, d_c, d_h, w_hidden.astype(dtype)]
    inputs += [w_proj.astype(dtype)] if projected else []
    in_specs = [seq(1), seq(4 * dim), seq(dim)] + [seq(p) for _ in h_raw]
    in_specs += [seq(p), _state_spec(bb, dim), _state_spec(bb, p), _weight_spec(p, 4 * dim)]
    in_specs += [_weight_spec(dim, p)] if projected else []
    out_shape = [f32(gates.shape)] + ([f32(hs.shape)] if projected else []) + [f32(d_c.shape), f32(d_h.shape)]
    out_specs = [seq(4 * dim)] + ([seq(p)] if projected else []) + [_state_spec(bb, dim), _state_spec(bb, p)]
    kernel = partial(_backward_kernel, cfg=cfg, n_steps=n_steps, dim=dim, projected=projected)
    dz, *outs = _call(
        kernel, cfg, grid=(2, batch // bb), in_specs=in_specs, out_specs=out_specs, out_shape=out_shape,
        name="lstm_backward",
    )(*inputs)
    dh_raw = outs.pop(0) if projected else None
    dc0, dh0 = outs
    return dz, *weight_grads(axis, dtype, h0, hs, dz, m_all, dh_raw, w_hidden, w_proj), None, dc0, dh0


_recurrence = with_reverse_pass(_forward, _reverse)


def default_block_hidden(dim: int, p: int, dtype: jnp.dtype) -> int:
    """The largest power of two in [16, 128] dividing dim rounded up to 16s whose W_hidden gate tile
    `[p, .]` (p: h's padded size) takes <= 64 KiB in `dtype`; 16 if none does."""
    itemsize = jnp.dtype(dtype).itemsize
    return largest_block(
        round_up(dim, MIN_BLOCK), MAX_BLOCK_HIDDEN, lambda block: p * block * itemsize <= GATE_TILE_BYTES
    )


def _pad_gates(a: jax.Array, lead: tuple[int, ...], dim: int) -> jax.Array:
    """`[..., 4 * d]` (gates i, j, f, o) -> `[*lead, 4 * dim]`, each gate's units zero-padded."""
    return pad_to(a.reshape(*a.shape[:-1], 4, -1), (*lead, 4, dim)).reshape(*lead, 4 * dim)


def pad_inputs(
    axis: int, batch: int, dim: int, p: int, xw, bias, w_hidden, w_proj, mask, c0, h0
) -> tuple:
    """The recurrence's inputs zero-padded to the sizes the kernels run at (mask 0 on padded rows);
    shared with `pallas_lstm_cell`."""
    lead = stacked_shape((2, batch), xw.shape[axis], axis)  # [T, 2, B] or [2, B, T]
    return (
        _pad_gates(xw, lead, dim),
        _pad_gates(bias, (2,), dim),
        _pad_gates(w_hidden, (2, p), dim),
        None if w_proj is None else pad_to(w_proj, (2, dim, p)),
        pad_to(mask, (*lead, 1)),
        pad_to(c0, (2, batch, dim)),
        pad_to(h0, (2, batch, p)),
    )


def unpad_outputs(
    hs: jax.Array, final: tuple[jax.Array, jax.Array], batch: int, dim: int, p: int, time_axis: int
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """`pad_inputs` undone on a recurrence's results: hs and the final (c, h) cut back to `batch`
    rows, `dim` cells and `p` units; shared with `pallas_lstm_cell`."""
    c_t, h_t = final
    hs = jax.lax.slice(hs, (0,) * hs.ndim, stacked_shape((2, batch, p), hs.shape[time_axis], time_axis))
    return hs, (c_t[:, :batch, :dim], h_t[:, :batch, :p])


def pallas_lstm_recurrence(
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
    interpret: bool = False,
    block_batch: int | None = None,
    block_hidden: int | None = None,
    num_warps: int | None = None,
    num_stages: int = DEFAULT_NUM_STAGES,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """`lstm_recurrence` (without `unroll` and `reset`) as Pallas kernels. interpret: in Pallas's
    interpreter (any backend), not Triton (GPU). block_batch: rows per program (default 16);
    block_hidden: hidden units per weight tile (default `default_block_hidden`); any sizes (they are
    padded), but without interpret powers of two >= 16. num_warps / num_stages: Triton's parameters."""
    xw, c0, h0, bias, cell_clip, proj_clip = recurrence_inputs(
        xw, w_proj, c0, h0, cell_clip, proj_clip, time_axis, bias
    )
    mask = jnp.asarray(mask).astype(jnp.float32)  # Triton loads float32 more readily than i1
    _, batch, dim = c0.shape
    p = h0.shape[-1]
    n_steps = xw.shape[time_axis]
    if n_steps == 0:
        return jnp.zeros(stacked_shape(h0.shape, 0, time_axis), jnp.float32), (c0, h0)
    # Padded: batch to block_batch's multiples, dim to block_hidden's; h's width, which the kernels
    # hold whole, to a power of two >= 16. Without a projection h is m, so P is dim, padded as both.
    projected = w_proj is not None
    block_batch = DEFAULT_BLOCK_BATCH if block_batch is None else block_batch
    h_width = padded_width(p if projected else dim)
    if block_hidden is None:
        block_hidden = default_block_hidden(dim if projected else h_width, h_width, dtype)
    check_block("block_batch", block_batch, interpret)
    check_block("block_hidden", block_hidden, interpret)
    dim_run = round_up(dim if projected else h_width, block_hidden)
    p_run = h_width if projected else dim_run
    cfg = _Config(
        cell_clip, proj_clip, jnp.dtype(dtype), time_axis, block_batch, block_hidden, bool(interpret), num_warps,
        num_stages,
    )
    padded = pad_inputs(
        time_axis, round_up(batch, block_batch), dim_run, p_run, xw, bias, w_hidden, w_proj, mask, c0, h0
    )
    return unpad_outputs(*_recurrence(cfg, *padded), batch, dim, p, time_axis)
