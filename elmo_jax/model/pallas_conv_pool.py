"""A char-CNN convolution and its max over positions as one Pallas kernel (GPU/Triton lowering).

`pallas_conv_max(x, kernel)` returns what `conv_pool`'s forward pass returns for one filter
width: the max over positions of the valid convolution, `[N, n]`, and the first position that
holds it, `[N, n]` int32 (the reverse pass routes each cotangent there). XLA's convolution writes
the whole `[N, positions, n]` output to memory and reads it back for the max: for ELMo original's
2048 filters, a batch of 128 x 20 tokens in both directions and 50 characters, about 1 GB per
step in bfloat16. Here each program keeps a `[block_tokens, block_filters]` running max and its
argmax on chip while it walks the positions, and writes only those.

Grid (token block i, filter block j). Program (i, j) reads its tokens' characters `[block_tokens,
C, d]` and the kernel's filter columns `[w, d, block_filters]`; at position p the convolution is
`sum_k x[:, p + k, :] @ W[k]` (w dots of `[block_tokens, d] x [d, block_filters]`, accumulated in
float32), then the running max and argmax are updated (a strictly larger value moves the argmax,
so ties keep the first position, as `conv_pool._max_and_first_argmax`).

Matmul operands are cast to `dtype`; products accumulate in float32. Triton lowers only
power-of-two tensor sizes and dots with every dimension >= 16, so the wrapper zero-pads
(`triton_blocks`): the tokens to a multiple of block_tokens, the filters to a multiple of
block_filters and the character embedding d to a power of two >= 16; the results are sliced back.
That is exact: a padded embedding channel is zero in both x and the kernel, so it adds 0 to every
product, and padded tokens and filters only fill their own outputs, which are dropped (each
output's max runs over its own token's positions for its own filter). The character positions
are not padded: the kernel reads one position `[block_tokens, d]` at a time, so C is no dimension
of an in-kernel array, and the max runs over exactly the C - w + 1 positions of the valid
convolution. In interpret mode (CPU, tests) smaller explicit blocks work too. On an H200 the
elmo_original bfloat16 step at batch 128 took 13.98 ms with it against 15.25 ms with XLA's
convolutions (docs/performance.md).
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from elmo_jax.model.triton_blocks import MIN_BLOCK, check_block, largest_block, pad_to, padded_width, round_up

DEFAULT_BLOCK_TOKENS = 32
MAX_BLOCK_FILTERS = 128


def default_block_filters(n_filters: int) -> int:
    """The largest power of two in [16, MAX_BLOCK_FILTERS] that divides n_filters rounded up to a
    multiple of 16."""
    return largest_block(round_up(n_filters, MIN_BLOCK), MAX_BLOCK_FILTERS)


@dataclasses.dataclass(frozen=True)
class _Blocks:
    """The sizes the kernel runs at (tokens N, char embedding d, filters n: padded) and its blocks."""

    n_tokens: int
    dim: int
    n_filters: int
    block_tokens: int
    block_filters: int


def _blocks(
    n_tokens: int, dim: int, n_filters: int, block_tokens: int, block_filters: int | None, interpret: bool
) -> _Blocks:
    """The blocks and the padded sizes: N a multiple of block_tokens, n of block_filters (default
    `default_block_filters`), d a power of two >= 16."""
    block_filters = default_block_filters(n_filters) if block_filters is None else block_filters
    check_block("block_tokens", block_tokens, interpret)
    check_block("block_filters", block_filters, interpret)
    return _Blocks(
        round_up(n_tokens, block_tokens), padded_width(dim), round_up(n_filters, block_filters), block_tokens,
        block_filters,
    )


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
    convolution `[N, n]` float32, the first position holding it `[N, n]` int32).

    block_tokens / block_filters: tokens and filters per program (block_filters default:
    `default_block_filters`); N, n and d are zero-padded to what the kernel runs at (module
    docstring), so any sizes work. Without `interpret` both blocks must be powers of two >= 16.
    """
    n_tokens, n_chars, dim = x.shape
    width, kernel_dim, n_filters = kernel.shape
    if kernel_dim != dim:
        raise ValueError(f"kernel {kernel.shape} does not match characters of dim {dim}")
    if width > n_chars:
        raise ValueError(f"a filter of width {width} needs >= {width} characters, got {n_chars}")
    blocks = _blocks(n_tokens, dim, n_filters, block_tokens, block_filters, interpret)
    x = pad_to(x, (blocks.n_tokens, n_chars, blocks.dim))
    kernel = pad_to(kernel, (width, blocks.dim, blocks.n_filters))
    out_block = pl.BlockSpec((blocks.block_tokens, blocks.block_filters), lambda i, j: (i, j))
    extra = {}
    if not interpret:  # Triton, not the Mosaic GPU backend.
        from jax.experimental.pallas import triton as pl_triton

        extra["compiler_params"] = pl_triton.CompilerParams()
    pooled, index = pl.pallas_call(
        partial(_kernel, width=width, n_positions=n_chars - width + 1, dtype=jnp.dtype(dtype)),
        grid=(blocks.n_tokens // blocks.block_tokens, blocks.n_filters // blocks.block_filters),
        in_specs=[
            pl.BlockSpec((blocks.block_tokens, n_chars, blocks.dim), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((width, blocks.dim, blocks.block_filters), lambda i, j: (0, 0, j)),
        ],
        out_specs=[out_block, out_block],
        out_shape=[
            jax.ShapeDtypeStruct((blocks.n_tokens, blocks.n_filters), jnp.float32),
            jax.ShapeDtypeStruct((blocks.n_tokens, blocks.n_filters), jnp.int32),
        ],
        interpret=interpret,
        name="conv_max",
        **extra,
    )(x, kernel)
    return pooled[:n_tokens, :n_filters], index[:n_tokens, :n_filters]
