"""Block sizes, zero padding and the `pallas_call` of the Pallas kernels that lower with Triton
(`pallas_lstm`, `pallas_conv_pool`).

Triton takes only tensors with a power-of-two number of elements, and its tensor-core dots need
every operand dimension >= MIN_BLOCK. So the kernels' wrappers zero-pad each dimension the grid
blocks to a multiple of a power-of-two block >= MIN_BLOCK, and each dimension an in-kernel array
spans whole to a power of two >= MIN_BLOCK, and slice the results back. In interpret mode smaller
explicit blocks work too.
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
    """The smallest power of two >= max(n, MIN_BLOCK): the size a dimension that in-kernel arrays
    span whole is padded to."""
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
    """Raises ValueError unless `block` > 0 and, for the Triton lowering (not `interpret`), a power
    of two >= MIN_BLOCK."""
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
