"""Block sizes, zero padding and `pallas_call` of the Triton-lowered kernels (`pallas_lstm`, `pallas_conv_pool`).

Triton takes only power-of-two tensors and dots of at least MIN_BLOCK in every dimension, so the
wrappers zero-pad each blocked dimension to a multiple of such a block and each dimension an
in-kernel array spans whole to a power of two >= MIN_BLOCK, and slice the results back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

MIN_BLOCK = 16  # Triton's smallest dot dimension (M, N and K of a tensor-core dot).


def round_up(n: int, multiple: int) -> int:
    """The smallest multiple of `multiple` >= n."""
    return -(-n // multiple) * multiple


def padded_width(n: int) -> int:
    """The smallest power of two >= max(n, MIN_BLOCK), for dimensions in-kernel arrays span whole."""
    width = MIN_BLOCK
    while width < n:
        width *= 2
    return width


def largest_block(size: int, max_block: int, fits: Callable[[int], bool] = lambda block: True) -> int:
    """The largest power of two in [MIN_BLOCK, max_block] that divides `size` and `fits`; MIN_BLOCK
    if none does (the caller pads `size` to a multiple of the result)."""
    best, block = MIN_BLOCK, MIN_BLOCK
    while block <= max_block:
        if size % block == 0 and fits(block):
            best = block
        block *= 2
    return best


def check_block(name: str, block: int, interpret: bool) -> None:
    """ValueError unless `block` > 0 and, for Triton (not `interpret`), a power of two >= MIN_BLOCK."""
    if block <= 0:
        raise ValueError(f"{name}={block} must be positive")
    if not interpret and (block & (block - 1) or block < MIN_BLOCK):
        raise ValueError(
            f"{name}={block}: the Triton lowering needs a power of two >= {MIN_BLOCK} (or use interpret=True)"
        )


def pad_to(a: jax.Array, shape: Sequence[int]) -> jax.Array:
    """`a` zero-padded at the end of each axis to `shape` (each >= a's)."""
    return jnp.pad(a, [(0, size - n) for n, size in zip(a.shape, shape)])


def pallas_call(
    kernel: Callable[..., None], *, interpret: bool, num_warps: int | None = None, num_stages: int | None = None,
    **specs: Any,
) -> Callable[..., Any]:
    """`pl.pallas_call(kernel, **specs)`, lowered with Triton (not the Mosaic GPU backend) unless
    `interpret`; num_warps / num_stages: Triton's compiler parameters (None: Pallas's defaults)."""
    if not interpret:
        from jax.experimental.pallas import triton as pl_triton

        specs["compiler_params"] = pl_triton.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    return pl.pallas_call(kernel, interpret=interpret, **specs)


def sync_threads(interpret: bool) -> None:
    """A barrier of the program's threads (Triton), between one's stores to a ref and another's
    loads of them; nothing in the interpreter, which runs the program in order."""
    if not interpret:
        from jax.experimental.pallas import triton as pl_triton

        pl_triton.debug_barrier()
