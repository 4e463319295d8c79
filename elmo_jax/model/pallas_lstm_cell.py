"""One LSTM step's gate matmul and cell update as one Pallas kernel, and its reverse as another,
inside XLA's time loops.

`lstm_recurrence` computes a step as z = xw_t + b + h W_hidden (a cuBLAS product over the whole
batch, z `[2, B, 4 dim]` written to memory), then `cell_step` reading z back. Here program
(direction, block of rows, block of cells) loads the four gates' column tiles of W_hidden for its
cells (bilm-tf's i, j, f, o layout, no copy of the weights), accumulates z for them over h in
float32 and applies `cell_step` before anything leaves the chip: z never reaches memory, and the
activated gates go straight into step t of the residual buffer (xw's, aliased). The reverse
kernel likewise computes its cells' dm = dh' W_proj^T and `cell_grads`, writing the gates'
cotangents over the gates and, in `dtype`, as the operand of XLA's dz W_hidden^T. The grid spans
the whole batch and all cells, unlike `pallas_lstm`'s persistent kernel (one program per 16
rows). XLA keeps the time loops, the projection, dz W_hidden^T and the weight gradients. As in
`pallas_lstm`, the dots accumulate in float32 without rounding to `dtype`, so bfloat16 results on
a GPU differ from `lstm_recurrence`'s by about bfloat16's rounding.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from elmo_jax.model.lstm_recurrence import cell_grads, cell_step, lstm_recurrence, recurrence_inputs
from elmo_jax.model.pallas_lstm import dot_f32, pad_inputs, seq_spec, step_index, unpad_outputs
from elmo_jax.model.triton_blocks import (
    MIN_BLOCK, check_block, largest_block, pallas_call, round_up,
)

DEFAULT_BLOCK_BATCH = 64
MAX_BLOCK_CELLS = 32  # four gate tiles of 32 cells: one 128-wide accumulator's worth
MAX_BLOCK_K = 128


@dataclasses.dataclass(frozen=True)
class FusedCell:
    """The kernels' static settings; `lstm_recurrence`'s loops call `forward` in place of their
    gate matmul and `cell_step`, `reverse` in place of the projection's reverse matmul and
    `cell_grads` (hashable: part of those loops' static arguments). Sizes: multiples of the blocks
    (`fused_cell_recurrence` pads). Sequences are `[T, 2, B, .]` (axis 0) or `[2, B, T, .]` (axis 2)."""

    block_batch: int
    block_cells: int
    block_k: int
    interpret: bool
    num_warps: int | None = None
    num_stages: int | None = None

    def forward(self, xw, t, bias, h, w_hidden, c, cell_clip: float | None, dtype: jnp.dtype, axis: int):
        """xw `[.., 4 dim]`, step t, bias `[2, 4 dim]`, h `[2, B, P]`, w_hidden `[2, P, 4 dim]` in
        `dtype`, c `[2, B, dim]` -> (xw with step t's activated gates written over it, clip(c'), m)."""
        _, batch, dim = c.shape
        p = h.shape[-1]
        seq = seq_spec(axis, xw.shape[axis], self.block_batch, 4 * dim, grid_rank=3)
        f32 = jax.ShapeDtypeStruct(c.shape, jnp.float32)
        return self._call(
            _forward_kernel(self, cell_clip, dtype, axis, dim, p), batch, dim,
            in_specs=[
                _step_spec(), seq, pl.BlockSpec((None, 4 * dim), lambda d, i, j: (d, 0)),
                self._rows(p), _weight_spec(p, 4 * dim), self._cells(),
            ],
            out_specs=[seq, self._cells(), self._cells()],
            out_shape=[jax.ShapeDtypeStruct(xw.shape, xw.dtype), f32, f32],
            name="lstm_cell_forward",
        )(_step(t), xw, bias, h, w_hidden, c)

    def reverse(self, dz, t, c_prev, dh_raw, w_proj, dc, live, cell_clip: float | None, dtype: jnp.dtype, axis: int):
        """dz `[.., 4 dim]` holding step t's activated gates, c_prev `[.., dim]`, dh' `[2, B, P]`,
        w_proj `[2, dim, P]` in `dtype` or None (dm = dh'), carried dc `[2, B, dim]`, live `[.., 1]`
        float32 -> (dz with step t's gate cotangents written over its gates, step t's `[2, B, 4 dim]`
        in `dtype` (the operand of dz W_hidden^T), the previous step's dc)."""
        _, batch, dim = dc.shape
        n_steps = dz.shape[axis]
        seq = lambda width: seq_spec(axis, n_steps, self.block_batch, width, grid_rank=3)
        projected = w_proj is not None
        inputs = [_step(t), dz, c_prev, dh_raw] + ([w_proj] if projected else []) + [dc, live]
        in_specs = [_step_spec(), seq(4 * dim), seq(dim), self._rows(dh_raw.shape[-1]) if projected else self._cells()]
        in_specs += ([_weight_spec(dim, dh_raw.shape[-1])] if projected else []) + [self._cells(), seq(1)]
        return self._call(
            _reverse_kernel(self, cell_clip, dtype, axis, dim, dh_raw.shape[-1], projected), batch, dim,
            in_specs=in_specs,
            out_specs=[seq(4 * dim), self._rows(4 * dim), self._cells()],
            out_shape=[jax.ShapeDtypeStruct(dz.shape, dz.dtype), jax.ShapeDtypeStruct((2, batch, 4 * dim), dtype),
                       jax.ShapeDtypeStruct(dc.shape, jnp.float32)],
            name="lstm_cell_reverse",
        )(*inputs)

    def _rows(self, width: int) -> pl.BlockSpec:
        """A program's rows of a `[2, B, width]` array, whole."""
        return pl.BlockSpec((None, self.block_batch, width), lambda d, i, j: (d, i, 0))

    def _cells(self) -> pl.BlockSpec:
        """A program's rows and cells of a `[2, B, dim]` array."""
        return pl.BlockSpec((None, self.block_batch, self.block_cells), lambda d, i, j: (d, i, j))

    def _call(self, kernel, batch: int, dim: int, **specs):
        """The kernel over grid (direction, row block, cell block), its operand 1 aliased to output 0."""
        return pallas_call(
            kernel, interpret=self.interpret, num_warps=self.num_warps, num_stages=self.num_stages,
            grid=(2, batch // self.block_batch, dim // self.block_cells), input_output_aliases={1: 0}, **specs,
        )


def _step(t: jax.Array) -> jax.Array:
    """The loop's step as the kernels' `[1]` int32 operand."""
    return jnp.reshape(t, (1,)).astype(jnp.int32)


def _step_spec() -> pl.BlockSpec:
    return pl.BlockSpec((1,), lambda d, i, j: (0,))


def _weight_spec(rows: int, cols: int) -> pl.BlockSpec:
    """One direction's weight matrix `[rows, cols]`, whole (its tiles are read in the kernels)."""
    return pl.BlockSpec((None, rows, cols), lambda d, i, j: (d, 0, 0))


def _gate_cols(dim: int, block_cells: int) -> list[pl.Slice]:
    """The program's cells' columns of each gate i, j, f, o in a `[.., 4 dim]` array."""
    j = pl.program_id(2)
    return [pl.ds(g * dim + j * block_cells, block_cells) for g in range(4)]


def _forward_kernel(cfg: FusedCell, cell_clip: float | None, dtype: jnp.dtype, axis: int, dim: int, p: int):
    """Program (direction, row block, cell block j): z for its cells' four gates accumulated over
    h's blocks of block_k units, then `cell_step`."""
    bk = cfg.block_k

    def kernel(t_ref, xw_ref, bias_ref, h_ref, w_ref, c_ref, gates_ref, c_new_ref, m_ref):
        t = t_ref[0]
        gate_cols = _gate_cols(dim, cfg.block_cells)

        def k_step(k, z):
            rows = pl.ds(k * bk, bk)
            h_k = h_ref[:, rows]
            return tuple(z_g + dot_f32(h_k, w_ref[rows, cols], dtype) for z_g, cols in zip(z, gate_cols))

        z = tuple(xw_ref[step_index(axis, t, cols)] + bias_ref[cols][None, :] for cols in gate_cols)
        z = jax.lax.fori_loop(0, p // bk, k_step, z)
        gates, c_clip, m = cell_step(z, c_ref[...], cell_clip)
        for a, cols in zip(gates, gate_cols):
            gates_ref[step_index(axis, t, cols)] = a  # Each element after its own xw's load.
        c_new_ref[...] = c_clip
        m_ref[...] = m

    return kernel


def _reverse_kernel(
    cfg: FusedCell, cell_clip: float | None, dtype: jnp.dtype, axis: int, dim: int, p: int, projected: bool
):
    """Program (direction, row block, cell block j): dm for its cells (dh' W_proj[cells]^T over
    dh's blocks of block_k units), then `cell_grads`."""
    bk = cfg.block_k

    def kernel(t_ref, dz_ref, c_prev_ref, dh_raw_ref, *refs):
        w_proj_ref = refs[0] if projected else None
        dc_ref, live_ref, dz_out_ref, dz_t_ref, dc_prev_ref = refs[projected:]
        t = t_ref[0]
        gate_cols = _gate_cols(dim, cfg.block_cells)
        cells = pl.ds(pl.program_id(2) * cfg.block_cells, cfg.block_cells)

        def k_step(k, d_m):
            units = pl.ds(k * bk, bk)
            return d_m + dot_f32(dh_raw_ref[:, units], w_proj_ref[cells, units], dtype, transpose_b=True)

        if projected:
            d_m = jax.lax.fori_loop(0, p // bk, k_step, jnp.zeros((cfg.block_batch, cfg.block_cells), jnp.float32))
        else:
            d_m = dh_raw_ref[...]
        gates = tuple(dz_ref[step_index(axis, t, cols)] for cols in gate_cols)
        live = live_ref[step_index(axis, t)] > 0
        dz, dc_prev = cell_grads(gates, c_prev_ref[step_index(axis, t, cells)], d_m, dc_ref[...], live, cell_clip)
        for dz_g, cols in zip(dz, gate_cols):
            dz_out_ref[step_index(axis, t, cols)] = dz_g  # Each element after its own gate's load.
            dz_t_ref[:, cols] = dz_g.astype(dz_t_ref.dtype)
        dc_prev_ref[...] = dc_prev

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
    hs, final = lstm_recurrence(
        xw_p, w_hidden_p, w_proj_p, mask_p, c0_p, h0_p, cell_clip, proj_clip, dtype, time_axis, bias_p,
        unroll=unroll, cell=cell,
    )
    return unpad_outputs(hs, final, batch, dim, p, time_axis)
