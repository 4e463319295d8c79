"""conv_max_over_positions vs NumPy loops: values, and gradients routed to the first argmax."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model import conv_pool, platform
from elmo_jax.model.conv_pool import CPU_BLOCK, conv_max_over_positions, resolve_block, resolve_fused
from tests.model.test_char_cnn import np_conv1d_valid

FILTERS = ((1, 3), (2, 4), (4, 5))
N_TOKENS, N_CHARS, DIM = 7, 9, 3


def np_conv_max_grads(x: np.ndarray, kernels: list[np.ndarray], cotangents: list[np.ndarray]):
    """Gradients of sum_i <g_i, max_p conv(x, k_i)>: each g goes to the window at the first argmax."""
    dx = np.zeros_like(x)
    d_kernels = [np.zeros_like(k) for k in kernels]
    for kernel, d_kernel, g in zip(kernels, d_kernels, cotangents):
        width = kernel.shape[0]
        first = np.argmax(np_conv1d_valid(x, kernel), axis=1)  # np.argmax: the first maximum
        for n in range(x.shape[0]):
            for c in range(kernel.shape[2]):
                p = first[n, c]
                d_kernel[:, :, c] += g[n, c] * x[n, p : p + width, :]
                dx[n, p : p + width, :] += g[n, c] * kernel[:, :, c]
    return dx, d_kernels


def example(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_TOKENS, N_CHARS, DIM)).astype(np.float32)
    x[2, 1:] = x[2, 0]  # All characters identical (as in padding): every window of token 2 ties.
    kernels = [rng.normal(size=(w, DIM, n)).astype(np.float32) for w, n in FILTERS]
    cotangents = [rng.normal(size=(N_TOKENS, n)).astype(np.float32) for _, n in FILTERS]
    return x, kernels, cotangents


@pytest.mark.parametrize(
    "block,fused", [(None, False), (1, False), (3, False), (CPU_BLOCK, False), (None, True), (3, True)]
)
def test_values_and_gradients_match_numpy(block, fused):
    """fused: the forward pass by pallas_conv_pool's kernel (interpreted on CPU), the reverse as block says."""
    x, kernels, cotangents = example()
    f = jax.jit(lambda x, k: conv_max_over_positions(x, k, jnp.float32, block, fused))
    pooled, vjp = jax.vjp(f, jnp.asarray(x), [jnp.asarray(k) for k in kernels])
    x64, k64 = x.astype(np.float64), [k.astype(np.float64) for k in kernels]
    for out, kernel in zip(pooled, k64):
        np.testing.assert_allclose(out, np_conv1d_valid(x64, kernel).max(axis=1), rtol=1e-5, atol=1e-5)
    dx, d_kernels = vjp([jnp.asarray(g) for g in cotangents])
    ref_dx, ref_d_kernels = np_conv_max_grads(x64, k64, [g.astype(np.float64) for g in cotangents])
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-5, atol=1e-5)
    for d_kernel, ref in zip(d_kernels, ref_d_kernels):
        np.testing.assert_allclose(d_kernel, ref, rtol=1e-5, atol=1e-5)
    # Token 2's tied windows: all of the cotangent went to the first one (a split would reach its
    # last character too).
    assert np.abs(np.asarray(dx)[2, 0]).sum() > 0 and np.abs(np.asarray(dx)[2, -1]).sum() == 0.0


def test_blocked_bfloat16_gradients_are_close_to_float32():
    x, kernels, cotangents = example(1)
    grads = {}
    for dtype, block in ((jnp.float32, None), (jnp.bfloat16, 3)):
        _, vjp = jax.vjp(lambda x, k: conv_max_over_positions(x, k, dtype, block), jnp.asarray(x), [jnp.asarray(k) for k in kernels])
        grads[dtype] = vjp([jnp.asarray(g) for g in cotangents])
    for a, b in zip(jax.tree.leaves(grads[jnp.float32]), jax.tree.leaves(grads[jnp.bfloat16])):
        assert b.dtype == jnp.float32
        np.testing.assert_allclose(b, a, rtol=0.05, atol=0.05 * float(jnp.max(jnp.abs(a))))


def test_resolve_fused_takes_the_pallas_kernels_on_gpu_only_when_automatic():
    assert resolve_fused("pallas") and not resolve_fused("xla")
    assert resolve_fused("auto") == (jax.default_backend() == "gpu")
    with platform.lowering_for("cuda"):
        assert resolve_fused("auto") and not resolve_fused("xla")
    with platform.lowering_for("tpu"):
        assert not resolve_fused("auto")


@pytest.fixture
def without_triton(monkeypatch):
    """A JAX without Pallas's Triton backend (deprecated in 0.11, to be removed): its module unimportable."""
    monkeypatch.setitem(sys.modules, "jax.experimental.pallas.triton", None)
    conv_pool._say_xla_convolutions.cache_clear()  # Said once a process: once again for this test.
    yield
    conv_pool._say_xla_convolutions.cache_clear()


def test_without_the_triton_backend_auto_falls_back_to_xla_saying_so_once(without_triton, caplog):
    assert not platform.has_triton()
    with platform.lowering_for("cuda"):
        assert not resolve_fused("auto") and not resolve_fused("auto")
        with pytest.raises(ValueError, match=r"^model.conv_kernel='pallas' needs Pallas's Triton backend, which JAX "):
            resolve_fused("pallas")
    assert resolve_fused("pallas")  # Off GPU, Pallas's interpreter runs the kernel.
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "no Pallas Triton backend: the char CNN's convolutions run as XLA's" in warnings[0]


def test_resolve_block():
    assert resolve_block(0) == (CPU_BLOCK if jax.default_backend() == "cpu" else None)
    assert resolve_block(-1) is None
    assert resolve_block(8) == 8
    with pytest.raises(ValueError, match="model.conv_block"):
        resolve_block(-2)
