"""One LSTM step's gate matmul and cell update as one Pallas kernel, inside XLA's time loop.

`lstm_recurrence` computes a step as z = xw_t + b + h W_hidden (a cuBLAS product over the whole
batch, z `[2, B, 4 dim]` written to memory), then `cell_step` reading z back. Here program
(direction, block of rows, block of cells) loads the four gates' column tiles of W_hidden for its
cells (bilm-tf's i, j, f, o layout, no copy of the weights), accumulates z for them over h in
float32 and applies `cell_step` before anything leaves the chip: z never reaches memory, and the
activated gates go straight into step t of the residual buffer (xw's, aliased). The grid spans the
whole batch and all cells, unlike `pallas_lstm`'s persistent kernel (one program per 16 rows).
XLA keeps the time loop, the projection and the reverse pass (`lstm_recurrence._reverse`). As in
`pallas_lstm`, the dots accumulate in float32 without rounding to `dtype`, so bfloat16 results on
a GPU differ from `lstm_recurrence`'s by about bfloat16's rounding.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from elmo_jax.model.lstm_recurrence import cell_step, lstm_recurrence, recurrence_inputs, stacked_shape
from elmo_jax.model.pallas_lstm import dot_f32, pad_inputs, seq_spec, step_index
from elmo_jax.model.triton_blocks import (
    MIN_BLOCK, check_block, largest_block, pallas_call, round_up,
)

DEFAULT_BLOCK_BATCH = 64
MAX_BLOCK_CELLS = 32  # four gate tiles of 32 cells: one 128-wide accumulator's worth
MAX_BLOCK_K = 128


@dataclasses.dataclass(frozen=True)
class FusedCell:
    """The kernel's static settings; called by `lstm_recurrence`'s forward loop in place of its
    matmul and `cell_step` (hashable: part of that loop's static arguments)."""

    block_batch: int
    block_cells: int
    block_k: int
    interpret: bool
    num_warps: int | None = None
    num_stages: int | None = None

    def __call__(self, xw, t, bias, h, w_hidden, c, cell_clip: float | None, dtype: jnp.dtype, axis: int):
        """xw `[T, 2, B, 4 dim]` (axis 0) or `[2, B, T, 4 dim]` (axis 2), t, bias `[2, 4 dim]`, h
        `[2, B, P]`, w_hidden `[2, P, 4 dim]` in `dtype`, c `[2, B, dim]` -> (xw with step t's activated
        gates written over it, clip(c'), m). B, dim and P multiples of the blocks (`fused_cell_recurrence` pads)."""
        _, batch, dim = c.shape
        p = h.shape[-1]
        bb, bc = self.block_batch, self.block_cells
        n_steps = xw.shape[axis]
        seq = seq_spec(axis, n_steps, bb, 4 * dim, grid_rank=3)
        state = lambda width: pl.BlockSpec((None, bb, width), lambda d, i, j: (d, i, 0))
        cells = pl.BlockSpec((None, bb, bc), lambda d, i, j: (d, i, j))
        kernel = _kernel_fn(self, cell_clip, dtype, axis, dim, p)
        return pallas_call(
            kernel, interpret=self.interpret, num_warps=self.num_warps, num_stages=self.num_stages,
            grid=(2, batch // bb, dim // bc),
            in_specs=[
                pl.BlockSpec((1,), lambda d, i, j: (0,)), seq,
                pl.BlockSpec((None, 4 * dim), lambda d, i, j: (d, 0)),
                state(p), pl.BlockSpec((None, p, 4 * dim), lambda d, i, j: (d, 0, 0)), cells,
            ],
            out_specs=[seq, cells, cells],
            out_shape=[jax.ShapeDtypeStruct(xw.shape, xw.dtype)] + [jax.ShapeDtypeStruct(c.shape, jnp.float32)] * 2,
            input_output_aliases={1: 0},
            name="lstm_cell",
        )(jnp.reshape(t, (1,)).astype(jnp.int32), xw, bias, h, w_hidden, c)


def _kernel_fn(cfg: FusedCell, cell_clip: float | None, dtype: jnp.dtype, axis: int, dim: int, p: int):
    """The program of (direction, row block i, cell block j): z for its cells' four gates, then `cell_step`."""
    bc, bk = cfg.block_cells, cfg.block_k

    def kernel(t_ref, xw_ref, bias_ref, h_ref, w_ref, c_ref, gates_ref, c_new_ref, m_ref):
        t = t_ref[0]
        j = pl.program_id(2)
        gate_cols = [pl.ds(g * dim + j * bc, bc) for g in range(4)]

        def k_step(k, z):
            rows = pl.ds(k * bk, bk)
            h_k = h_ref[:, rows]
            return tuple(z_g + dot_f32(h_k, w_ref[rows, cols], dtype) for z_g, cols in zip(z, gate_cols))

        z = tuple(xw_ref[step_index(axis, t, cols)] + bias_ref[cols][None, :] for cols in gate_cols)
        z = jax.lax.fori_loop(0, p // bk, k_step, z)
        gates, c_clip, m = cell_step(z, c_ref[...], cell_clip)
        for a, cols in zip(gates, gate_cols):
            gates_ref[step_index(axis, t, cols)] = a
        c_new_ref[...] = c_clip
        m_ref[...] = m

    return kernel


def default_blocks(batch: int, dim: int, p: int) -> tuple[int, int, int]:
    """(block_batch, block_cells, block_k): the largest powers of two <= 64, 32 and 128 dividing
    batch, dim and P rounded up to 16s (16 where none does: the wrapper pads)."""
    return (
        largest_block(round_up(batch, MIN_BLOCK), DEFAULT_BLOCK_BATCH),
        largest_block(round_up(dim, MIN_BLOCK), MAX_BLOCK_CELLS),
        largest_block(round_up(p, MIN_BLOCK), MAX_BLOCK_K),
    )


def fused_cell_recurrence(
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
    interpret: bool = False,
    block_batch: int | None = None,
    block_cells: int | None = None,
    block_k: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """`lstm_recurrence` (without `reset`) with each step's gates and cell update as the `FusedCell`
    kernel; the same arguments, layouts and results. interpret: Pallas's interpreter (any backend),
    not Triton (GPU). Blocks: rows, cells and h's units per dot step (default `default_blocks`);
    any sizes interpreted, powers of two >= 16 for Triton. Inputs are zero-padded to the blocks
    once, before the loop, which is exact (padded rows are masked, padded units stay 0)."""
    xw, c0, h0, bias, cell_clip, proj_clip = recurrence_inputs(
        xw, w_proj, c0, h0, cell_clip, proj_clip, time_axis, bias
    )
    _, batch, dim = c0.shape
    p = h0.shape[-1]
    asked = (block_batch, block_cells, block_k)
    blocks = [default if block is None else block for block, default in zip(asked, default_blocks(batch, dim, p))]
    for name, block in zip(("block_batch", "block_cells", "block_k"), blocks):
        check_block(name, block, interpret)
    bb, bc, bk = blocks
    dim_run, p_run = round_up(dim, bc), round_up(p, bk)
    if w_proj is None:  # h is m: one width, a multiple of both blocks
        dim_run = p_run = round_up(dim, math.lcm(bc, bk))
    padded = pad_inputs(time_axis, round_up(batch, bb), dim_run, p_run, xw, bias, w_hidden, w_proj, mask, c0, h0)
    xw_p, bias_p, w_hidden_p, w_proj_p, mask_p, c0_p, h0_p = padded
    cell = FusedCell(bb, bc, bk, bool(interpret), num_warps, num_stages)
    hs, (c_t, h_t) = lstm_recurrence(
        xw_p, w_hidden_p, w_proj_p, mask_p, c0_p, h0_p, cell_clip, proj_clip, dtype, time_axis, bias_p,
        unroll=unroll, cell=cell,
    )
    hs = jax.lax.slice(hs, (0,) * hs.ndim, stacked_shape((2, batch, p), hs.shape[time_axis], time_axis))
    return hs, (c_t[:, :batch, :dim], h_t[:, :batch, :p])
