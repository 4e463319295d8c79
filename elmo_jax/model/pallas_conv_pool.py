"""A char-CNN convolution and its max over positions as one Pallas kernel (GPU/Triton lowering).

`conv_pool`'s forward pass for one filter width, without writing the `[N, positions, n]` outputs:
program (token block i, filter block j) keeps a running max and first argmax on chip while it walks
the positions (`sum_k x[:, p + k, :] @ W[k]`, operands in `dtype`, float32 accumulation). Tokens,
filters and d are zero-padded to the blocks (`triton_blocks`), which is exact: padded channels are
zero and padded tokens and filters fill only their own, dropped, outputs; positions are not padded.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from elmo_jax.model.triton_blocks import (
    MIN_BLOCK, check_block, largest_block, pad_to, padded_width, pallas_call, round_up,
)

DEFAULT_BLOCK_TOKENS = 32
MAX_BLOCK_FILTERS = 128


def default_block_filters(n_filters: int) -> int:
    """The largest power of two in [16, MAX_BLOCK_FILTERS] dividing n_filters rounded up to 16s."""
    return largest_block(round_up(n_filters, MIN_BLOCK), MAX_BLOCK_FILTERS)


def _kernel(x_ref, w_ref, out_ref, index_ref, *, width: int, n_positions: int, dtype: jnp.dtype) -> None:
    """Program (i, j): the running max over positions of block i's tokens for filter block j."""
    shape = out_ref.shape  # [block_tokens, block_filters]
    weights = [w_ref[k].astype(dtype) for k in range(width)]  # [d, block_filters] each

    def position(p, carry):
        best, where = carry
        y = jnp.zeros(shape, jnp.float32)
        for k in range(width):
            window = x_ref[:, p + k, :].astype(dtype)  # [block_tokens, d]
            y = y + jax.lax.dot_general(
                window, weights[k], (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32
            )
        better = y > best
        return jnp.where(better, y, best), jnp.where(better, p, where)

    init = (jnp.full(shape, -jnp.inf, jnp.float32), jnp.zeros(shape, jnp.int32))
    best, where = jax.lax.fori_loop(0, n_positions, position, init)
    out_ref[...] = best
    index_ref[...] = where


@partial(jax.jit, static_argnames=("dtype", "block_tokens", "block_filters", "interpret"))
def pallas_conv_max(
    x: jax.Array,
    kernel: jax.Array,
    dtype: jnp.dtype = jnp.float32,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    block_filters: int | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """x `[N, C, d]`, kernel `[w, d, n]` -> (max over the C - w + 1 positions of the valid
    convolution `[N, n]` float32, the first position holding it `[N, n]` int32). block_tokens /
    block_filters: per program, any sizes (padded); without `interpret` powers of two >= 16."""
    n_tokens, n_chars, dim = x.shape
    width, kernel_dim, n_filters = kernel.shape
    if kernel_dim != dim:
        raise ValueError(f"kernel {kernel.shape} does not match characters of dim {dim}")
    if width > n_chars:
        raise ValueError(f"a filter of width {width} needs >= {width} characters, got {n_chars}")
    block_filters = default_block_filters(n_filters) if block_filters is None else block_filters
    check_block("block_tokens", block_tokens, interpret)
    check_block("block_filters", block_filters, interpret)
    # The padded sizes the kernel runs at.
    n_tokens_run, n_filters_run = round_up(n_tokens, block_tokens), round_up(n_filters, block_filters)
    dim_run = padded_width(dim)
    x = pad_to(x, (n_tokens_run, n_chars, dim_run))
    kernel = pad_to(kernel, (width, dim_run, n_filters_run))
    out_block = pl.BlockSpec((block_tokens, block_filters), lambda i, j: (i, j))
    pooled, index = pallas_call(
        partial(_kernel, width=width, n_positions=n_chars - width + 1, dtype=jnp.dtype(dtype)),
        interpret=interpret,
        grid=(n_tokens_run // block_tokens, n_filters_run // block_filters),
        in_specs=[
            pl.BlockSpec((block_tokens, n_chars, dim_run), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((width, dim_run, block_filters), lambda i, j: (0, 0, j)),
        ],
        out_specs=[out_block, out_block],
        out_shape=[
            jax.ShapeDtypeStruct((n_tokens_run, n_filters_run), jnp.float32),
            jax.ShapeDtypeStruct((n_tokens_run, n_filters_run), jnp.int32),
        ],
        name="conv_max",
    )(x, kernel)
    return pooled[:n_tokens, :n_filters], index[:n_tokens, :n_filters]
