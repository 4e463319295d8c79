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
    dots, where a float32 cotangent would promote them to float32 (measured on an H100: the
    highway and projection gradients ran as TF32 GEMMs, and with a float32 result XLA runs the
    char convolutions in TF32 as well, 2x slower). XLA:CPU's DotThunk cannot run
    bf16 x bf16 -> f32 dots at all ("Unsupported element type for DotThunk::Execute").
    """
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        return jnp.einsum(spec, a.astype(jnp.float32), b.astype(jnp.float32), preferred_element_type=jnp.float32)
    return jnp.einsum(spec, a.astype(dtype), b.astype(dtype)).astype(jnp.float32)


def conv1d_valid(x: jax.Array, kernel: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """Valid 1-D convolution (cross-correlation, as TF's conv2d) in `dtype`, float32 result.

    x: [N, C, d], kernel: [w, d, n] -> [N, C - w + 1, n]. XLA's convolution is used rather
    than an unfolded matmul: on CPU its backward pass is several times faster.
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


@jax.custom_vjp
def max_over_positions(x: jax.Array) -> jax.Array:
    """`jnp.max(x, axis=1)`: x `[N, L, n]` -> its max over L, `[N, n]` (char-CNN max pooling).

    Its reverse pass keeps only the argmax `[N, n]` and routes the cotangent to it. Autodiff of
    `jnp.max` instead keeps `x` and makes three passes over it (an equality mask, a count of ties,
    a select): at elmo_small's shapes those passes took ~20% of the CPU train step. Where positions
    tie, the whole cotangent goes to the first of them rather than being split; tied positions of
    a char-CNN output are identical character windows, so the parameters' gradients are the same.
    """
    return jnp.max(x, axis=1)


def _max_over_positions_fwd(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array, int]]:
    # Two single-output reductions (the max, then the first position holding it) rather than
    # jnp.argmax's variadic (value, index) reduction, which XLA:CPU runs several times slower.
    length = x.shape[1]
    out = jnp.max(x, axis=1)
    positions = jax.lax.broadcasted_iota(jnp.int32, (1, length, 1), 1)
    index = jnp.min(jnp.where(x == out[:, None, :], positions, length), axis=1)
    return out, (index, length)


def _max_over_positions_bwd(residuals: tuple[jax.Array, int], g: jax.Array) -> tuple[jax.Array]:
    index, length = residuals
    positions = jax.lax.broadcasted_iota(index.dtype, (1, length, 1), 1)
    return (jnp.where(positions == index[:, None, :], g[:, None, :], jnp.zeros((), g.dtype)),)


max_over_positions.defvjp(_max_over_positions_fwd, _max_over_positions_bwd)
