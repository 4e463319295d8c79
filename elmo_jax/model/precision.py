"""Mixed precision: matmul operands in the compute dtype, results in float32."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def matmul(spec: str, a: jax.Array, b: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """float32 `einsum(spec, a, b)` with the operands cast to `dtype`.

    For float32 this is a plain float32 dot. For other dtypes the dot is computed in `dtype` and
    the result cast to float32 (GPUs and TPUs accumulate in float32; the result is rounded to
    `dtype` before the cast). The cast, rather than `preferred_element_type=float32`, keeps the
    backward pass in `dtype` too: the cotangent is cast back to `dtype` before the transposed
    dots, where a float32 cotangent would promote them to float32 (TF32 on GPUs, for the gradient
    dots and, with a float32 result, the char convolutions too; see docs/performance.md).
    XLA:CPU's DotThunk cannot run bf16 x bf16 -> f32 dots at all ("Unsupported element type for
    DotThunk::Execute").
    """
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        return jnp.einsum(spec, a.astype(jnp.float32), b.astype(jnp.float32), preferred_element_type=jnp.float32)
    return jnp.einsum(spec, a.astype(dtype), b.astype(dtype)).astype(jnp.float32)


def conv1d_valid(x: jax.Array, kernel: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """Valid 1-D convolution (cross-correlation, as TF's conv2d) in `dtype`, float32 result.

    x: [N, C, d], kernel: [w, d, n] -> [N, C - w + 1, n]. XLA's convolution rather than an
    unfolded matmul: its forward pass is faster on CPU too (the char CNN computes the gradients
    itself, see conv_pool).
    """
    dims = ("NWC", "WIO", "NWC")
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        return jax.lax.conv_general_dilated(
            x.astype(jnp.float32), kernel.astype(jnp.float32), (1,), "VALID", dimension_numbers=dims,
            preferred_element_type=jnp.float32,
        )
    out = jax.lax.conv_general_dilated(x.astype(dtype), kernel.astype(dtype), (1,), "VALID", dimension_numbers=dims)
    return out.astype(jnp.float32)
