"""GatedCNNStack vs a NumPy GLU block (float64), causality by gradients, masks and carried buffers,
with contiguous (dilation 1) and dilated taps."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.gated_cnn import GatedCNNStack, GatedConvLayer, initial_buffers, receptive_field

B, T, F, P, K = 3, 6, 5, 4, 3


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def np_windows(x: np.ndarray, buffer: np.ndarray, dilation: int) -> np.ndarray:
    """[T, F] with [(k-1) r, F] before it -> [T, k F]: x_{t-(k-1)r}, .., x_{t-r}, x_t."""
    z = np.concatenate([buffer, x])
    k = buffer.shape[0] // dilation + 1
    return np.stack([np.concatenate([z[t + j * dilation] for j in range(k)]) for t in range(x.shape[0])])


def np_glu_block(x, buffer, w, v, b, c, residual, dilation):
    """One direction: h_t = (win_t W + b) * sigmoid(win_t V + c) (+ x_t). w, v: [k, F, P]."""
    win = np_windows(x, buffer, dilation)
    a = win @ w.reshape(-1, w.shape[-1]) + b
    g = np_sigmoid(win @ v.reshape(-1, v.shape[-1]) + c)
    h = a * g
    return (h + x if residual else h), (win, a, g)


def np_glu_block_grads(x, buffer, w, v, b, c, residual, dilation, d_out):
    """Gradients of sum(out * d_out) w.r.t. x, W, V, b, c, written out by hand."""
    _, (win, a, g) = np_glu_block(x, buffer, w, v, b, c, residual, dilation)
    da, dg_pre = d_out * g, d_out * a * g * (1 - g)
    d_win = da @ w.reshape(-1, w.shape[-1]).T + dg_pre @ v.reshape(-1, v.shape[-1]).T  # [T, k F]
    k, f = w.shape[0], w.shape[1]
    dx = d_out.copy() if residual else np.zeros_like(x)
    d_win = d_win.reshape(-1, k, f)
    for t in range(x.shape[0]):
        for j in range(k):
            s = t - (k - 1 - j) * dilation  # Position of window slot j in x (negative: the buffer).
            if s >= 0:
                dx[s] += d_win[t, j]
    dw = (win.T @ da).reshape(w.shape)
    dv = (win.T @ dg_pre).reshape(v.shape)
    return dx, dw, dv, da.sum(0), dg_pre.sum(0)


def layer_params(residual: bool, d_in: int, dilation: int) -> tuple[GatedConvLayer, Any]:
    layer = GatedConvLayer(P, K, residual=residual, dilation=dilation)
    x, buf = jnp.zeros((2, B, T, d_in)), jnp.zeros((2, B, (K - 1) * dilation, d_in))
    params = layer.init(jax.random.key(0), x, buf)["params"]
    rng = np.random.default_rng(1)  # Non-zero biases, so the reference checks them too.
    params = {**params, "b": jnp.asarray(rng.normal(size=(2, P)), jnp.float32)}
    params["c"] = jnp.asarray(rng.normal(size=(2, P)), jnp.float32)
    return layer, params


@pytest.mark.parametrize("residual,dilation", [(False, 1), (True, 1), (False, 2), (True, 3)])
def test_glu_block_outputs_and_gradients_match_numpy(residual: bool, dilation: int) -> None:
    d_in = P if residual else F
    layer, params = layer_params(residual, d_in, dilation)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, B, T, d_in)).astype(np.float32)
    buf = rng.normal(size=(2, B, (K - 1) * dilation, d_in)).astype(np.float32)
    d_out = rng.normal(size=(2, B, T, P)).astype(np.float32)

    def loss(params, x):
        return jnp.sum(layer.apply({"params": params}, x, buf) * d_out)

    out = layer.apply({"params": params}, x, buf)
    grads, dx = jax.grad(loss, argnums=(0, 1))(params, x)
    p64 = {name: np.asarray(value, np.float64) for name, value in params.items()}
    for d in range(2):
        for r in range(B):
            args = (x[d, r].astype(np.float64), buf[d, r].astype(np.float64), p64["W"][d], p64["V"][d])
            args = (*args, p64["b"][d], p64["c"][d], residual, dilation)
            want, _ = np_glu_block(*args)
            np.testing.assert_allclose(out[d, r], want, rtol=1e-5, atol=1e-5)
            want_dx, *_ = np_glu_block_grads(*args, d_out[d, r].astype(np.float64))
            np.testing.assert_allclose(dx[d, r], want_dx, rtol=1e-4, atol=1e-5)
        # Weight gradients sum over the rows of one direction.
        sums = [sum(g) for g in zip(*(np_glu_block_grads(
            x[d, r].astype(np.float64), buf[d, r].astype(np.float64), p64["W"][d], p64["V"][d], p64["b"][d],
            p64["c"][d], residual, dilation, d_out[d, r].astype(np.float64))[1:] for r in range(B)))]
        for name, want in zip(("W", "V", "b", "c"), sums):
            np.testing.assert_allclose(grads[name][d], want, rtol=1e-4, atol=1e-4, err_msg=name)


def stack_and_params(n_layers: int = 3, residual: bool = True, dilation_base: int = 1) -> tuple[GatedCNNStack, Any]:
    stack = GatedCNNStack(P, n_layers, K, residual=residual, dilation_base=dilation_base)
    x, mask = jnp.zeros((2, B, T, F)), jnp.ones((2, B, T), bool)
    params = stack.init(jax.random.key(0), x, mask, initial_buffers(B, F, P, n_layers, K, dilation_base))["params"]
    return stack, params


def run_stack(stack, params, x, mask, state=None):
    if state is None:
        state = initial_buffers(x.shape[1], x.shape[-1], P, stack.n_layers, K, stack.dilation_base)
    return stack.apply({"params": params}, x, mask, state)


@pytest.mark.parametrize("dilation_base", [1, 2])
def test_each_direction_sees_only_its_side_of_its_stream_within_the_receptive_field(dilation_base: int) -> None:
    """d out[d, b, t] / d x[d', b', s] != 0 exactly when d' == d, b' == b and t - s is in
    [0, receptive field): both directions' stacks read their stream in order; the backward stream
    holds the reversed text (data/batching.py), so the backward output at text position t depends
    only on text positions >= t."""
    stack, params = stack_and_params(dilation_base=dilation_base)
    reach = receptive_field(3, K, dilation_base)
    assert reach == (7 if dilation_base == 1 else 15)
    n_steps = reach + 3
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, B, n_steps, F)), jnp.float32)
    mask = jnp.ones((2, B, n_steps), bool)
    for d in range(2):
        for t in range(n_steps):
            grad = jax.grad(lambda x: run_stack(stack, params, x, mask)[0][-1][d, 1, t].sum())(x)
            depends = np.abs(np.asarray(grad)).sum(-1) > 0
            want = np.zeros((2, B, n_steps), bool)
            want[d, 1, max(0, t - reach + 1) : t + 1] = True
            np.testing.assert_array_equal(depends, want, err_msg=f"direction {d}, position {t}")


@pytest.mark.parametrize("dilation_base", [1, 2])
def test_padding_never_reaches_a_real_position(dilation_base: int) -> None:
    """Masked positions (here in the middle of a row) are skipped: the real positions' outputs are
    those of the row without them, and do not depend on the padded inputs."""
    stack, params = stack_and_params(dilation_base=dilation_base)
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(2, B, T, F)), jnp.float32)
    mask = np.ones((2, B, T), bool)
    mask[:, 0, 2:4] = False
    mask[:, 2, 4:] = False
    out, _ = run_stack(stack, params, x, jnp.asarray(mask))
    grad = jax.grad(lambda x: sum(o[jnp.asarray(mask)].sum() for o in run_stack(stack, params, x, mask)[0]))(x)
    assert np.all(np.asarray(grad)[~mask] == 0)
    real = np.flatnonzero(mask[0, 0])
    alone, _ = run_stack(stack, params, x[:, :1, real], jnp.ones((2, 1, len(real)), bool))
    for layer, layer_alone in zip(out, alone):
        np.testing.assert_allclose(layer[:, 0, real], layer_alone[:, 0], rtol=1e-6, atol=1e-6)
        assert np.all(np.asarray(layer)[~mask] == 0)


@pytest.mark.parametrize("masked_tail", [False, True])
@pytest.mark.parametrize("dilation_base", [1, 2])
def test_two_windows_with_the_carried_buffers_equal_one_pass(masked_tail: bool, dilation_base: int) -> None:
    """One pass over 2T positions == two windows of T, the second starting from the first's state
    (with a masked tail in the first window: the buffer holds the last real inputs). Dilated, the
    last layer's buffer (8 positions) is longer than a window."""
    stack, params = stack_and_params(dilation_base=dilation_base)
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(2, B, 2 * T, F)), jnp.float32)
    mask = np.ones((2, B, 2 * T), bool)
    if masked_tail:
        mask[:, 1, T - 2 : T] = False
    mask = jnp.asarray(mask)
    whole, whole_state = run_stack(stack, params, x, mask)
    first, state = run_stack(stack, params, x[:, :, :T], mask[:, :, :T])
    second, final = run_stack(stack, params, x[:, :, T:], mask[:, :, T:], state)
    for layer, a, b in zip(whole, first, second):
        np.testing.assert_allclose(layer, jnp.concatenate([a, b], axis=2), rtol=1e-6, atol=1e-6)
    for a, b in zip(whole_state, final):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_initial_buffers_shapes() -> None:
    shapes = [s.shape for s in initial_buffers(B, F, P, 3, K)]
    assert shapes == [(2, B, K - 1, F), (2, B, K - 1, P), (2, B, K - 1, P)]
    shapes = [s.shape for s in initial_buffers(B, F, P, 3, K, dilation_base=2)]
    assert shapes == [(2, B, K - 1, F), (2, B, 2 * (K - 1), P), (2, B, 4 * (K - 1), P)]


def test_remat_recomputes_the_layers_with_the_same_params_outputs_and_gradients() -> None:
    """model.remat: each layer's forward pass again in the backward pass, nothing else changed."""
    stack, params = stack_and_params()
    rematted = stack.clone(remat=True)
    x = jax.random.normal(jax.random.key(1), (2, B, T, F))
    mask = jnp.ones((2, B, T), bool).at[:, 0, -2:].set(False)
    state = initial_buffers(B, F, P, stack.n_layers, K)
    assert jax.tree.structure(rematted.init(jax.random.key(0), x, mask, state)["params"]) == jax.tree.structure(params)

    def loss(module: GatedCNNStack, p: Any) -> jax.Array:
        outputs, _ = module.apply({"params": p}, x, mask, state)
        return sum(jnp.sum(jnp.sin(o)) for o in outputs)

    plain, remat = jax.value_and_grad(lambda p: loss(stack, p))(params), jax.value_and_grad(lambda p: loss(rematted, p))(params)
    np.testing.assert_allclose(remat[0], plain[0], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(remat[1]), jax.tree.leaves(plain[1])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    grad_fn = jax.grad(lambda p: loss(rematted, p))
    assert "remat" in str(jax.make_jaxpr(grad_fn)(params))  # The layers are recomputed, not stored.
