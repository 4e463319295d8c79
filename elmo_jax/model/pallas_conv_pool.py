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

Matmul operands are cast to `dtype`; products accumulate in float32. On the GPU lowering
(interpret=False) block sizes and d must be powers of two >= 16 (Triton's dot shapes); in
interpret mode (CPU, tests) any sizes work. Tokens are zero-padded to a multiple of
block_tokens, so N is free. Speed on a GPU is not measured yet.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

DEFAULT_BLOCK_TOKENS = 32
MAX_BLOCK_FILTERS = 128


def default_block_filters(n_filters: int) -> int:
    """The largest power of two <= MAX_BLOCK_FILTERS that divides n_filters (1 if it is odd)."""
    block = MAX_BLOCK_FILTERS
    while n_filters % block:
        block //= 2
    return block


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
    convolution `[N, n]` float32, the first position holding it `[N, n]` int32)."""
    n_tokens, n_chars, dim = x.shape
    width, kernel_dim, n_filters = kernel.shape
    if kernel_dim != dim:
        raise ValueError(f"kernel {kernel.shape} does not match characters of dim {dim}")
    if width > n_chars:
        raise ValueError(f"a filter of width {width} needs >= {width} characters, got {n_chars}")
    block_filters = block_filters or default_block_filters(n_filters)
    if n_filters % block_filters:
        raise ValueError(f"block_filters={block_filters} does not divide the {n_filters} filters")
    n_blocks = -(-n_tokens // block_tokens)
    x = jnp.pad(x, ((0, n_blocks * block_tokens - n_tokens), (0, 0), (0, 0)))
    out_block = pl.BlockSpec((block_tokens, block_filters), lambda i, j: (i, j))
    extra = {}
    if not interpret:  # Triton, not the Mosaic GPU backend.
        from jax.experimental.pallas import triton as pl_triton

        extra["compiler_params"] = pl_triton.CompilerParams()
    pooled, index = pl.pallas_call(
        partial(_kernel, width=width, n_positions=n_chars - width + 1, dtype=jnp.dtype(dtype)),
        grid=(n_blocks, n_filters // block_filters),
        in_specs=[
            pl.BlockSpec((block_tokens, n_chars, dim), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((width, dim, block_filters), lambda i, j: (0, 0, j)),
        ],
        out_specs=[out_block, out_block],
        out_shape=[
            jax.ShapeDtypeStruct((n_blocks * block_tokens, n_filters), jnp.float32),
            jax.ShapeDtypeStruct((n_blocks * block_tokens, n_filters), jnp.int32),
        ],
        interpret=interpret,
        name="conv_max",
        **extra,
    )(x, kernel)
    return pooled[:n_tokens], index[:n_tokens]
