"""The char CNN's convolutions with max pooling over positions, with a hand-written reverse pass.

Only each pooled output's first argmax (`[N, n]` int32) is kept, not the `[N, positions, n]`
outputs, and gets the whole cotangent (tied positions are identical windows). `block=None`: XLA's
whole-batch convolutions (GPU/TPU); `block=b`: b tokens at a time as matmuls over the unfolded
windows, in the CPU caches; `fused`: the forward pass as Pallas kernels (`pallas_conv_pool`).
"""

from __future__ import annotations

import functools
import logging
from typing import Sequence

import jax
import jax.numpy as jnp

from elmo_jax.model.pallas_conv_pool import pallas_conv_max
from elmo_jax.model import platform
from elmo_jax.model.precision import conv1d_valid, matmul

CONV_KERNELS = ("auto", "xla", "pallas")  # model.conv_kernel's values (resolve_fused).
CPU_BLOCK = 16  # Tokens per block on CPU (docs/performance.md).


def resolve_block(block: int) -> int | None:
    """`model.conv_block` -> block size or None (whole batch): 0 = CPU_BLOCK on CPU, None on GPU/TPU
    (where blocks would run many small kernels in turn); -1 = None; b > 0 = blocks of b tokens."""
    if block < -1:
        raise ValueError(f"model.conv_block must be >= -1, got {block}")
    if block == 0:
        return CPU_BLOCK if platform.name() == "cpu" else None
    return None if block == -1 else block


def resolve_fused(kernel: str) -> bool:
    """`model.conv_kernel` -> whether the forward pass runs as Pallas kernels ('pallas'; interpreted
    off GPU). 'auto' takes them on GPU only, where the train step is 7-9% faster with them than with
    XLA's convolutions (docs/performance.md), and falls back to XLA's, saying so once, in a JAX
    without Pallas's Triton backend."""
    if kernel == "pallas":
        platform.check_triton("model.conv_kernel")
        return True
    if kernel != "auto" or platform.name() != "gpu":
        return False
    if platform.has_triton():
        return True
    _say_xla_convolutions()
    return False


@functools.cache
def _say_xla_convolutions() -> None:
    logging.warning(
        "JAX %s has no Pallas Triton backend: the char CNN's convolutions run as XLA's "
        "(model.conv_kernel='auto'; about 7-9%% slower steps on GPU)", jax.__version__,
    )


def _positions(length: int) -> jax.Array:
    return jax.lax.broadcasted_iota(jnp.int32, (1, length, 1), 1)


def _max_and_first_argmax(y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """y `[N, L, n]` -> (max over L `[N, n]`, first position holding it `[N, n]` int32): two
    single-output reductions, which XLA:CPU runs several times faster than jnp.argmax's one."""
    length = y.shape[1]
    out = jnp.max(y, axis=1)
    index = jnp.min(jnp.where(y == out[:, None, :], _positions(length), length), axis=1)
    return out, index


def _at_argmax(index: jax.Array, g: jax.Array, length: int) -> jax.Array:
    """The cotangent of the max: g `[N, n]` at position index `[N, n]`, zero elsewhere: `[N, L, n]`."""
    return jnp.where(_positions(length) == index[:, None, :], g[:, None, :], jnp.zeros((), g.dtype))


def _unfold(x: jax.Array, width: int) -> jax.Array:
    """x `[N, C, d]` -> the character windows `[N, C - width + 1, width * d]`."""
    length = x.shape[1] - width + 1
    return jnp.concatenate([x[:, k : k + length, :] for k in range(width)], axis=-1)


def _fold(windows: jax.Array, width: int, n_chars: int) -> jax.Array:
    """The adjoint of `_unfold`: `[N, L, width * d]` -> `[N, n_chars, d]`, overlapping windows summed."""
    dim = windows.shape[-1] // width
    return sum(
        jnp.pad(windows[:, :, k * dim : (k + 1) * dim], ((0, 0), (k, n_chars - windows.shape[1] - k), (0, 0)))
        for k in range(width)
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def conv_max_over_positions(
    x: jax.Array, kernels: Sequence[jax.Array], dtype: jnp.dtype, block: int | None, fused: bool = False
) -> list[jax.Array]:
    """Max over positions of each valid convolution in `dtype` (float32 results): x `[N, C, d]`,
    kernels `[w_i, d, n_i]` -> `[N, n_i]` each. block, fused: the module docstring's."""
    return _forward(x, kernels, dtype, block, fused)[0]


def _forward(x, kernels, dtype, block, fused):
    if fused:  # One Pallas kernel per filter width, without the `[N, L, n]` outputs.
        interpret = platform.interprets_pallas()
        pooled, indices = _unzip([pallas_conv_max(x, k, jnp.dtype(dtype), interpret=interpret) for k in kernels])
    elif block is None:
        pooled, indices = _unzip([_max_and_first_argmax(conv1d_valid(x, k, dtype)) for k in kernels])
    else:
        pooled, indices = _blocked_max(x, kernels, dtype, block)
    return pooled, (x, list(kernels), indices)


def _unzip(pairs: list[tuple[jax.Array, jax.Array]]) -> tuple[list[jax.Array], list[jax.Array]]:
    """Per filter width (max, argmax) -> (the maxima, the argmaxes)."""
    return [out for out, _ in pairs], [index for _, index in pairs]


def _blocked_max(x, kernels, dtype, block):
    """The maxima and argmaxes as matmuls over the unfolded windows, `block` tokens at a time."""
    n_tokens = x.shape[0]

    def body(x_b):
        return _unzip([
            _max_and_first_argmax(
                matmul("blk,kn->bln", _unfold(x_b, kernel.shape[0]), kernel.reshape(-1, kernel.shape[2]), dtype)
            )
            for kernel in kernels
        ])

    pooled, indices = jax.lax.map(body, _blocks(x, block))

    def unblock(a: jax.Array) -> jax.Array:
        return a.reshape(-1, *a.shape[2:])[:n_tokens]

    return [unblock(p) for p in pooled], [unblock(i) for i in indices]


def _blocks(a: jax.Array, block: int) -> jax.Array:
    """`[N, ...]` -> `[ceil(N / block), block, ...]`, zero-padded."""
    n_blocks = -(-a.shape[0] // block)
    a = jnp.pad(a, ((0, n_blocks * block - a.shape[0]),) + ((0, 0),) * (a.ndim - 1))
    return a.reshape(n_blocks, block, *a.shape[1:])


def _backward(dtype, block, fused, residuals, cotangents):
    x, kernels, indices = residuals
    if block is None:
        return _whole_batch_grads(x, kernels, indices, cotangents, dtype)
    return _blocked_grads(x, kernels, indices, cotangents, dtype, block)


def _whole_batch_grads(x, kernels, indices, cotangents, dtype):
    """XLA's convolution gradients for the cotangents routed to the argmax positions."""
    dx, d_kernels = jnp.zeros_like(x), []
    for kernel, index, g in zip(kernels, indices, cotangents):
        _, conv_vjp = jax.vjp(lambda x, k: conv1d_valid(x, k, dtype), x, kernel)
        dx_k, d_kernel = conv_vjp(_at_argmax(index, g, x.shape[1] - kernel.shape[0] + 1))
        dx = dx + dx_k
        d_kernels.append(d_kernel)
    return dx, d_kernels


def _blocked_grads(x, kernels, indices, cotangents, dtype, block):
    """The same gradients as matmuls over the unfolded windows, `block` tokens at a time."""
    n_tokens, n_chars, dim = x.shape

    def body(d_kernels, xs):
        x_b, indices_b, cotangents_b = xs
        dx_b, new_d_kernels = jnp.zeros_like(x_b), []
        for kernel, d_kernel, index, g in zip(kernels, d_kernels, indices_b, cotangents_b):
            width, _, channels = kernel.shape
            windows = _unfold(x_b, width)  # [b, L, w*d]
            dy = _at_argmax(index, g, windows.shape[1])  # [b, L, n]
            d_w = matmul("blk,bln->kn", windows, dy, dtype).reshape(kernel.shape)
            new_d_kernels.append(d_kernel + d_w)
            dx_b = dx_b + _fold(matmul("bln,kn->blk", dy, kernel.reshape(-1, channels), dtype), width, n_chars)
        return new_d_kernels, dx_b

    init = [jnp.zeros(k.shape, jnp.float32) for k in kernels]
    xs = (_blocks(x, block), [_blocks(i, block) for i in indices], [_blocks(g, block) for g in cotangents])
    d_kernels, dx = jax.lax.scan(body, init, xs)
    dx = dx.reshape(-1, n_chars, dim)[:n_tokens]
    return dx.astype(x.dtype), [d.astype(k.dtype) for d, k in zip(d_kernels, kernels)]


conv_max_over_positions.defvjp(_forward, _backward)
