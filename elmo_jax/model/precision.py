"""Mixed precision: matmul operands in the compute dtype, results in float32."""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}  # model.dtype's values, the compute dtypes.


def _in_dtype(op: Callable[..., jax.Array], a: jax.Array, b: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """`op(a, b)` with the operands cast to `dtype`, as float32 (see `matmul`)."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        return op(a.astype(jnp.float32), b.astype(jnp.float32), preferred_element_type=jnp.float32)
    return op(a.astype(dtype), b.astype(dtype)).astype(jnp.float32)


def matmul(spec: str, a: jax.Array, b: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """float32 `einsum(spec, a, b)` with the operands cast to `dtype`. Other than float32 the result
    is rounded to `dtype` then cast, rather than `preferred_element_type=float32`, so the backward
    pass stays in `dtype` too (docs/performance.md); XLA:CPU cannot run bf16 x bf16 -> f32 dots."""
    return _in_dtype(partial(jnp.einsum, spec), a, b, dtype)


def conv1d_valid(x: jax.Array, kernel: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """Valid 1-D convolution (cross-correlation, as TF's conv2d) in `dtype`, float32 result:
    x `[N, C, d]`, kernel `[w, d, n]` -> `[N, C - w + 1, n]`."""
    conv = partial(
        jax.lax.conv_general_dilated, window_strides=(1,), padding="VALID", dimension_numbers=("NWC", "WIO", "NWC")
    )
    return _in_dtype(conv, x, kernel, dtype)
