"""LSTM-with-projection cell and BiLSTMLayer vs an independent NumPy time loop (float64)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.lstm import BiLSTMLayer, LSTMState
from elmo_jax.model.lstm_recurrence import lstm_recurrence

RTOL, ATOL = 1e-5, 1e-6

B, T, DIM, P = 3, 5, 6, 4  # layer input size = P, so the residual is allowed
CLIPS = {"noclip": (None, None), "clip": (0.5, 0.3)}


# ----------------------------------------------------------------------------- NumPy references


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def np_lstm_step(
    xw: np.ndarray,
    c: np.ndarray,
    h: np.ndarray,
    w_hidden: np.ndarray,
    w_proj: np.ndarray | None,
    cell_clip: float | None,
    proj_clip: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """One direction, one step: z = xw + h Wh; gates i, j, f, o; forget bias 1; clips.

    w_proj None: TF's LSTMCell without num_proj, h = sigmoid(o) tanh(c) and proj_clip unused.
    """
    z = xw + h @ w_hidden
    n = w_hidden.shape[-1] // 4
    i, j, f, o = z[..., :n], z[..., n : 2 * n], z[..., 2 * n : 3 * n], z[..., 3 * n :]
    c = np_sigmoid(f + 1.0) * c + np_sigmoid(i) * np.tanh(j)
    if cell_clip is not None:
        c = np.clip(c, -cell_clip, cell_clip)
    h = np_sigmoid(o) * np.tanh(c)
    if w_proj is None:
        return c, h
    h = h @ w_proj
    if proj_clip is not None:
        h = np.clip(h, -proj_clip, proj_clip)
    return c, h


def np_bilstm(
    x: np.ndarray,
    mask: np.ndarray,
    c0: np.ndarray,
    h0: np.ndarray,
    params: dict[str, np.ndarray],
    cell_clip: float | None,
    proj_clip: float | None,
    residual: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [2, B, T, in], mask [2, B, T], state [2, B, .] -> outputs [2, B, T, P], final c, final h.

    Direction d uses params[...][d]; both directions run over t = 0..T-1 (the backward stream
    arrives already reversed); where mask is 0 the state is left unchanged and re-emitted.
    No "W_P" in params: no projection (P = DIM).
    """
    n_dir, n_batch, n_steps, _ = x.shape
    outputs = np.zeros((n_dir, n_batch, n_steps, h0.shape[-1]))
    c_final, h_final = np.array(c0, np.float64), np.array(h0, np.float64)
    for d in range(n_dir):
        c, h = c_final[d], h_final[d]
        for t in range(n_steps):
            xw = x[d, :, t] @ params["W_input"][d] + params["B"][d]
            w_proj = params["W_P"][d] if "W_P" in params else None
            c_new, h_new = np_lstm_step(xw, c, h, params["W_hidden"][d], w_proj, cell_clip, proj_clip)
            keep = mask[d, :, t][:, None] != 0
            c, h = np.where(keep, c_new, c), np.where(keep, h_new, h)
            outputs[d, :, t] = h
        c_final[d], h_final[d] = c, h
    if residual:
        outputs = outputs + x
    return outputs, c_final, h_final


# ----------------------------------------------------------------------------- fixtures / helpers


def layer_params(in_dim: int, seed: int, scale: float = 0.5) -> dict[str, np.ndarray]:
    """Random float32 parameters with BiLSTMLayer's names and shapes (checked in a test)."""
    rng = np.random.default_rng(seed)
    shapes = {"W_input": (2, in_dim, 4 * DIM), "W_hidden": (2, P, 4 * DIM), "B": (2, 4 * DIM), "W_P": (2, DIM, P)}
    return {k: rng.normal(0.0, scale, s).astype(np.float32) for k, s in shapes.items()}


def layer_inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray, LSTMState]:
    """x [2, B, T, P], a mask with holes (different per direction), a nonzero initial state."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, B, T, P)).astype(np.float32)
    mask = np.ones((2, B, T), np.int32)
    mask[0, 0, 3:] = 0  # padded tail
    mask[0, 1, 1] = 0  # hole in the middle
    mask[1, 2, :] = 0  # empty row
    mask[1, 0, 0] = 0  # masked first step: the initial state is re-emitted
    state = LSTMState(
        rng.normal(0.0, 0.4, (2, B, DIM)).astype(np.float32),
        rng.normal(0.0, 0.2, (2, B, P)).astype(np.float32),
    )
    return x, mask, state


def to_f64(tree: Any) -> Any:
    """NumPy float64 copy of a tree."""
    return jax.tree_util.tree_map(lambda p: np.asarray(p, np.float64), tree)


def run_layer(
    params: dict[str, Any], x: Any, mask: Any, state: LSTMState, clips: tuple, residual: bool, remat: bool = False
) -> tuple[jax.Array, LSTMState]:
    """Applies BiLSTMLayer with the given parameters."""
    layer = BiLSTMLayer(DIM, P, clips[0], clips[1], residual=residual, remat=remat)
    return layer.apply({"params": params}, x, mask, state)


# Compiled once per (clips, residual, remat) and shared by the tests (shapes are all the same).
run_layer_jit = jax.jit(run_layer, static_argnums=(4, 5, 6))


# ----------------------------------------------------------------------------- one time step


def lstm_cell(
    xw: jax.Array, state: LSTMState, w_hidden: jax.Array, w_proj: jax.Array | None,
    cell_clip: float | None, proj_clip: float | None,
) -> LSTMState:
    """One step of the layer's recurrence (`lstm_recurrence` over T = 1): xw `[2, B, 4 DIM]`."""
    mask = jnp.ones((1, 2, xw.shape[1], 1), bool)
    _, (c, h) = lstm_recurrence(xw[None], w_hidden, w_proj, mask, state.c, state.h, cell_clip, proj_clip)
    return LSTMState(c, h)


def cell_inputs(seed: int = 0) -> tuple[np.ndarray, LSTMState, np.ndarray, np.ndarray]:
    """xw [2, B, 4 DIM], state, w_hidden [2, P, 4 DIM], w_proj [2, DIM, P] with large values."""
    rng = np.random.default_rng(seed)
    xw = rng.normal(0.0, 2.0, (2, B, 4 * DIM)).astype(np.float32)
    state = LSTMState(
        rng.normal(0.0, 1.0, (2, B, DIM)).astype(np.float32), rng.normal(size=(2, B, P)).astype(np.float32)
    )
    w_hidden = rng.normal(0.0, 0.7, (2, P, 4 * DIM)).astype(np.float32)
    w_proj = rng.normal(0.0, 0.7, (2, DIM, P)).astype(np.float32)
    return xw, state, w_hidden, w_proj


@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_lstm_cell_matches_numpy(clip_name: str) -> None:
    cell_clip, proj_clip = CLIPS[clip_name]
    xw, state, w_hidden, w_proj = cell_inputs()
    new = lstm_cell(
        jnp.asarray(xw), LSTMState(*map(jnp.asarray, state)), jnp.asarray(w_hidden), jnp.asarray(w_proj),
        cell_clip, proj_clip,
    )
    assert new.c.shape == (2, B, DIM) and new.h.shape == (2, B, P)
    for d in range(2):
        c_ref, h_ref = np_lstm_step(
            xw[d].astype(np.float64), state.c[d].astype(np.float64), state.h[d].astype(np.float64),
            w_hidden[d].astype(np.float64), w_proj[d].astype(np.float64), cell_clip, proj_clip,
        )
        np.testing.assert_allclose(new.c[d], c_ref, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(new.h[d], h_ref, rtol=RTOL, atol=ATOL)
        if clip_name == "clip":  # the clips are active in this example
            assert np.any(np.abs(c_ref) == 0.5) and np.any(np.abs(h_ref) == 0.3)
        else:  # ... and would be without clipping
            assert np.abs(c_ref).max() > 0.5 and np.abs(h_ref).max() > 0.3


def test_lstm_cell_forget_bias_and_gate_order() -> None:
    """With only one gate block of z nonzero, each gate's role (and the +1 forget bias) shows."""
    rng = np.random.default_rng(1)
    c0 = rng.normal(size=(2, B, DIM)).astype(np.float32)
    w_hidden = np.zeros((2, P, 4 * DIM), np.float32)
    w_proj = np.tile(np.eye(DIM, P, dtype=np.float32), (2, 1, 1))
    state = LSTMState(jnp.asarray(c0), jnp.zeros((2, B, P)))

    def cell(block: int, value: float) -> LSTMState:
        xw = np.zeros((2, B, 4 * DIM), np.float32)
        xw[..., block * DIM : (block + 1) * DIM] = value
        return lstm_cell(jnp.asarray(xw), state, jnp.asarray(w_hidden), jnp.asarray(w_proj), None, None)

    sig = np_sigmoid
    # z = 0: c = sigmoid(1) c0 (forget bias +1), h = sigmoid(0) tanh(c) projected.
    np.testing.assert_allclose(cell(0, 0.0).c, sig(1.0) * c0, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(cell(0, 0.0).h, (0.5 * np.tanh(sig(1.0) * c0))[..., :P], rtol=RTOL, atol=ATOL)
    # j (block 1) = 2: input gate sigmoid(0) = 0.5 lets in tanh(2).
    np.testing.assert_allclose(cell(1, 2.0).c, sig(1.0) * c0 + 0.5 * np.tanh(2.0), rtol=RTOL, atol=ATOL)
    # i (block 0) = 2 alone changes nothing (tanh(j) = 0).
    np.testing.assert_allclose(cell(0, 2.0).c, sig(1.0) * c0, rtol=RTOL, atol=ATOL)
    # f (block 2) = -1: forget gate sigmoid(-1 + 1) = 0.5.
    np.testing.assert_allclose(cell(2, -1.0).c, 0.5 * c0, rtol=RTOL, atol=ATOL)
    # o (block 3) = 3: output gate sigmoid(3).
    np.testing.assert_allclose(cell(3, 3.0).h, (sig(3.0) * np.tanh(sig(1.0) * c0))[..., :P], rtol=RTOL, atol=ATOL)


def test_lstm_cell_directions_use_their_own_weights() -> None:
    xw, state, w_hidden, w_proj = cell_inputs(2)
    args = (jnp.asarray(xw), LSTMState(*map(jnp.asarray, state)))
    base = lstm_cell(*args, jnp.asarray(w_hidden), jnp.asarray(w_proj), None, None)
    w_hidden2, w_proj2 = w_hidden.copy(), w_proj.copy()
    w_hidden2[1] += 0.5
    w_proj2[1] *= -1.0
    other = lstm_cell(*args, jnp.asarray(w_hidden2), jnp.asarray(w_proj2), None, None)
    np.testing.assert_array_equal(other.c[0], base.c[0])
    np.testing.assert_array_equal(other.h[0], base.h[0])
    assert np.abs(np.asarray(other.c[1] - base.c[1])).max() > 1e-2
    assert np.abs(np.asarray(other.h[1] - base.h[1])).max() > 1e-2


# ----------------------------------------------------------------------------- BiLSTMLayer


def test_bilstm_param_names_and_shapes() -> None:
    x, mask, state = layer_inputs()
    shapes = jax.eval_shape(BiLSTMLayer(DIM, P).init, jax.random.key(0), x, mask, state)["params"]
    expected = layer_params(P, 0)
    assert sorted(shapes) == sorted(expected)
    for name, value in expected.items():
        assert shapes[name].shape == value.shape, name


# Clipping without the residual is also checked (with gradients) in the finite-difference test.
@pytest.mark.parametrize("clip_name,residual", [("noclip", False), ("clip", True)])
def test_bilstm_matches_numpy_time_loop(clip_name: str, residual: bool) -> None:
    clips = CLIPS[clip_name]
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    out, final = run_layer_jit(params, x, mask, state, clips, residual, False)
    ref_out, ref_c, ref_h = np_bilstm(x.astype(np.float64), mask, *to_f64(state), to_f64(params), *clips, residual)
    assert out.shape == (2, B, T, P)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.c, ref_c, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.h, ref_h, rtol=RTOL, atol=ATOL)

    # Mask freezing, checked on the module's own outputs: a masked step re-emits the previous h.
    h_seq = np.asarray(out) - (x if residual else 0.0)
    for d, b, t in zip(*np.nonzero(mask == 0)):
        previous = state.h[d, b] if t == 0 else h_seq[d, b, t - 1]
        np.testing.assert_allclose(h_seq[d, b, t], previous, rtol=0, atol=1e-6 if residual else 0)
    # The empty row keeps its initial state exactly.
    np.testing.assert_array_equal(final.c[1, 2], state.c[1, 2])
    np.testing.assert_array_equal(final.h[1, 2], state.h[1, 2])
    # The initial state matters (zero state would give something else).
    zeros = (np.zeros_like(state.c), np.zeros_like(state.h))
    ref_zero, _, _ = np_bilstm(x.astype(np.float64), mask, *zeros, to_f64(params), *clips, residual)
    assert np.abs(ref_zero - ref_out).max() > 1e-3
    if clip_name == "clip":
        assert np.any(np.abs(ref_c) == 0.5)


def test_bilstm_all_masked_keeps_initial_state() -> None:
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    out, final = run_layer_jit(params, x, np.zeros_like(mask), state, CLIPS["noclip"], False, False)
    np.testing.assert_array_equal(final.c, state.c)
    np.testing.assert_array_equal(final.h, state.h)
    np.testing.assert_array_equal(out, np.broadcast_to(state.h[:, :, None], out.shape))


def test_bilstm_from_input_gates_equals_call() -> None:
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    layer = BiLSTMLayer(DIM, P, *CLIPS["clip"])
    words = x.reshape(-1, x.shape[-1])[:5]  # Inputs that repeat: 5 rows of x, each position one of them.
    ids = np.random.default_rng(3).integers(0, 5, size=x.shape[:3])
    gates = layer.apply({"params": params}, jnp.asarray(words), method=BiLSTMLayer.input_gates)
    first_gates = jnp.stack([gates[d][ids[d]] for d in range(2)])
    out, final = layer.apply({"params": params}, first_gates, mask, state, method=BiLSTMLayer.from_input_gates)
    want_out, want_final = run_layer_jit(params, words[ids], mask, state, CLIPS["clip"], False, False)
    np.testing.assert_allclose(out, want_out, rtol=RTOL, atol=ATOL)
    for got, want in zip(final, want_final):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="residual"):
        BiLSTMLayer(DIM, P, residual=True).apply(
            {"params": params}, first_gates, mask, state, method=BiLSTMLayer.from_input_gates
        )


def loss_and_grads(remat: bool, residual: bool = False) -> tuple[tuple[jax.Array, Any], Any]:
    """value_and_grad (outputs, final state as aux) of a weighted sum of outputs and final state
    w.r.t. (params, x, state), clipping on."""
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    r_out, r_c, r_h = readout_weights()

    def loss(p: Any, x_: jax.Array, s: LSTMState) -> jax.Array:
        out, final = run_layer(p, x_, mask, s, CLIPS["clip"], residual, remat)
        return jnp.sum(out * r_out) + jnp.sum(final.c * r_c) + jnp.sum(final.h * r_h), (out, final)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(params, x, state)


def readout_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed random weights turning (outputs, final c, final h) into a scalar loss."""
    rng = np.random.default_rng(9)
    return (
        rng.normal(size=(2, B, T, P)).astype(np.float32),
        rng.normal(size=(2, B, DIM)).astype(np.float32),
        rng.normal(size=(2, B, P)).astype(np.float32),
    )


@pytest.fixture(scope="module")
def plain_grads() -> tuple[tuple[jax.Array, Any], Any]:
    """Loss and gradients without remat (shared by two tests)."""
    return loss_and_grads(remat=False)


def test_bilstm_remat_same_outputs_and_gradients(plain_grads: tuple[tuple[jax.Array, Any], Any]) -> None:
    (loss_a, (out_a, final_a)), grads_a = plain_grads
    (loss_b, (out_b, final_b)), grads_b = loss_and_grads(remat=True)
    np.testing.assert_allclose(out_b, out_a, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(final_b.c, final_a.c, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(final_b.h, final_a.h, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(loss_b, loss_a, rtol=1e-6)
    for ga, gb in zip(jax.tree_util.tree_leaves(grads_a), jax.tree_util.tree_leaves(grads_b)):
        np.testing.assert_allclose(gb, ga, rtol=1e-5, atol=1e-6)


def test_bilstm_gradients_match_finite_differences(plain_grads: tuple[tuple[jax.Array, Any], Any]) -> None:
    """Per argument leaf: <jax.grad, v> vs a float64 central difference of the NumPy reference."""
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    r_out, r_c, r_h = readout_weights()
    (loss_value, (out, final)), grads = plain_grads
    primal = to_f64((params, x, state))
    flat, treedef = jax.tree_util.tree_flatten(primal)
    ref_out, ref_c, ref_h = np_bilstm(*to_f64((x, mask, state.c, state.h, params)), *CLIPS["clip"], residual=False)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.c, ref_c, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.h, ref_h, rtol=RTOL, atol=ATOL)
    assert np.any(np.abs(ref_c) == 0.5) and np.any(np.abs(ref_out) == 0.3)  # clipping is active

    def ref_loss(leaves: list[np.ndarray]) -> float:
        p, x_, s = treedef.unflatten(leaves)
        out, c, h = np_bilstm(x_, mask, s[0], s[1], p, *CLIPS["clip"], residual=False)
        return float(np.sum(out * r_out) + np.sum(c * r_c) + np.sum(h * r_h))

    np.testing.assert_allclose(loss_value, ref_loss(flat), rtol=1e-5)
    rng = np.random.default_rng(10)
    eps = 1e-6
    grad_leaves = jax.tree_util.tree_leaves(grads)
    assert len(grad_leaves) == len(flat)
    for k, (leaf, g) in enumerate(zip(flat, grad_leaves)):
        assert np.all(np.isfinite(g))
        v = rng.normal(size=leaf.shape)
        plus = [f + eps * v if i == k else f for i, f in enumerate(flat)]
        minus = [f - eps * v if i == k else f for i, f in enumerate(flat)]
        fd = (ref_loss(plus) - ref_loss(minus)) / (2 * eps)
        analytic = float(np.sum(np.asarray(g, np.float64) * v))
        np.testing.assert_allclose(analytic, fd, rtol=1e-4, atol=1e-5, err_msg=f"leaf {k}")
    # Without the residual, masked input steps influence nothing.
    g_x = np.asarray(grads[1])
    np.testing.assert_array_equal(g_x[mask == 0], 0.0)
    assert np.all(np.abs(g_x[mask == 1]).sum(-1) > 0)


# ----------------------------------------------------------------------------- without projection


def test_lstm_cell_without_projection_matches_numpy_and_ignores_proj_clip() -> None:
    """w_proj=None (projection_dim == dim): h = sigmoid(o) tanh(c), of DIM units, never clipped."""
    xw, state, _, _ = cell_inputs(3)
    rng = np.random.default_rng(4)
    h = rng.normal(size=(2, B, DIM)).astype(np.float32)
    w_hidden = rng.normal(0.0, 0.7, (2, DIM, 4 * DIM)).astype(np.float32)
    args = (jnp.asarray(xw), LSTMState(jnp.asarray(state.c), jnp.asarray(h)), jnp.asarray(w_hidden), None, 0.5)
    new, unclipped = lstm_cell(*args, 0.05), lstm_cell(*args, None)
    assert new.h.shape == (2, B, DIM)
    np.testing.assert_array_equal(new.h, unclipped.h)
    for d in range(2):
        c_ref, h_ref = np_lstm_step(
            *(a[d].astype(np.float64) for a in (xw, state.c, h, w_hidden)), None, 0.5, 0.05
        )
        np.testing.assert_allclose(new.c[d], c_ref, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(new.h[d], h_ref, rtol=RTOL, atol=ATOL)
    assert np.abs(np.asarray(new.h)).max() > 0.2  # proj_clip 0.05 would have bitten


def no_projection_params(seed: int) -> dict[str, np.ndarray]:
    """Random float32 parameters of BiLSTMLayer(DIM, DIM) with input size DIM (no W_P)."""
    rng = np.random.default_rng(seed)
    shapes = {"W_input": (2, DIM, 4 * DIM), "W_hidden": (2, DIM, 4 * DIM), "B": (2, 4 * DIM)}
    return {k: rng.normal(0.0, 0.5, s).astype(np.float32) for k, s in shapes.items()}


def test_bilstm_without_projection_has_no_w_p_and_matches_numpy() -> None:
    """projection_dim == dim: no 'W_P' param; outputs [2, B, T, DIM] as the NumPy loop, masked steps
    frozen, proj_clip ignored, the residual added; gradients flow to every parameter."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, B, T, DIM)).astype(np.float32)
    _, mask, _ = layer_inputs()
    state = LSTMState(*(rng.normal(0.0, 0.4, (2, B, DIM)).astype(np.float32) for _ in range(2)))
    layer = BiLSTMLayer(DIM, DIM, cell_clip=0.5, proj_clip=0.05, residual=True)
    assert not layer.projected and BiLSTMLayer(DIM, P).projected
    shapes = jax.eval_shape(layer.init, jax.random.key(0), x, mask, state)["params"]
    params = no_projection_params(6)
    assert {k: v.shape for k, v in shapes.items()} == {k: v.shape for k, v in params.items()}

    def loss(p: Any) -> tuple[jax.Array, tuple[jax.Array, LSTMState]]:
        out, final = layer.apply({"params": p}, x, mask, state)
        return jnp.sum(out**2) + jnp.sum(final.c), (out, final)

    (_, (out, final)), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    ref_out, ref_c, ref_h = np_bilstm(*to_f64((x, mask, state.c, state.h, params)), 0.5, 0.05, residual=True)
    assert out.shape == (2, B, T, DIM)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.c, ref_c, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(final.h, ref_h, rtol=RTOL, atol=ATOL)
    assert np.abs(ref_h).max() > 0.2 and np.any(np.abs(ref_c) == 0.5)  # proj_clip ignored, cell_clip active
    h_seq = np.asarray(out) - x
    for d, b, t in zip(*np.nonzero(mask == 0)):
        previous = state.h[d, b] if t == 0 else h_seq[d, b, t - 1]
        np.testing.assert_allclose(h_seq[d, b, t], previous, rtol=0, atol=1e-6)
    assert sorted(grads) == sorted(params)
    assert all(np.abs(np.asarray(g)).max() > 1e-3 for g in grads.values())


@pytest.mark.parametrize("kernel", ["pallas", "pallas_cell"])
def test_bilstm_pallas_kernels_same_outputs_and_gradients(
    plain_grads: tuple[tuple[jax.Array, Any], Any], kernel: str
) -> None:
    """kernel='pallas' and 'pallas_cell' (Pallas's interpreter on CPU) give the XLA time loop's
    outputs and gradients; an unknown kernel is refused."""
    x, mask, state = layer_inputs()
    params = layer_params(P, seed=1)
    r_out, r_c, r_h = readout_weights()
    layer = BiLSTMLayer(DIM, P, *CLIPS["clip"], kernel=kernel)

    def loss(p: Any, x_: jax.Array, s: LSTMState) -> jax.Array:
        out, final = layer.apply({"params": p}, x_, mask, s)
        return jnp.sum(out * r_out) + jnp.sum(final.c * r_c) + jnp.sum(final.h * r_h), (out, final)

    (loss_p, (out_p, final_p)), grads_p = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(params, x, state)
    (loss_x, (out_x, final_x)), grads_x = plain_grads
    np.testing.assert_allclose(loss_p, loss_x, rtol=1e-5)
    for got, want in zip(jax.tree.leaves((out_p, final_p, grads_p)), jax.tree.leaves((out_x, final_x, grads_x))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="model.lstm.kernel"):
        BiLSTMLayer(DIM, P, kernel="cudnn").init(jax.random.key(0), x, mask, state)
