"""lstm_recurrence (hand-written VJP) vs plain autodiff of a reference lax.scan, plus a bf16 smoke test;
without a projection (w_proj=None) also vs an independent NumPy loop and its finite differences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.lstm import BiLSTMLayer, LSTMState
from elmo_jax.model.lstm_recurrence import resolve_unroll, lstm_recurrence
from tests.reference.lstm_recurrence import reference_recurrence

RTOL, ATOL = 1e-5, 1e-6
T, B, DIM, P = 7, 4, 5, 3


def make_inputs(seed: int = 0, projected: bool = True) -> tuple[np.ndarray | None, ...]:
    """xw [T, 2, B, 4 DIM], weights, a partial mask [T, 2, B, 1] and a nonzero initial state.

    Without projection w_proj is None and h has DIM (not P) units.
    """
    p = P if projected else DIM
    rng = np.random.default_rng(seed)
    xw = rng.normal(0.0, 1.5, (T, 2, B, 4 * DIM)).astype(np.float32)
    w_hidden = rng.normal(0.0, 0.6, (2, p, 4 * DIM)).astype(np.float32)
    w_proj = rng.normal(0.0, 0.8, (2, DIM, P)).astype(np.float32) if projected else None
    mask = np.ones((T, 2, B, 1), bool)
    mask[4:, 0, 0] = False  # padded tail
    mask[2:4, 0, 1] = False  # hole in the middle
    mask[0, 1, 2] = False  # masked first step
    mask[5:, 1, 2] = False  # ... and a padded tail in the other direction
    mask[:, 1, 3] = False  # empty row
    c0 = rng.normal(0.0, 0.5, (2, B, DIM)).astype(np.float32)
    h0 = rng.normal(0.0, 0.3, (2, B, p)).astype(np.float32)
    return xw, w_hidden, w_proj, mask, c0, h0


def cotangents(seed: int = 1, p: int = P) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random cotangents for hs, the final c and the final h (h of size p)."""
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(T, 2, B, p)).astype(np.float32),
        rng.normal(size=(2, B, DIM)).astype(np.float32),
        rng.normal(size=(2, B, p)).astype(np.float32),
    )


def to_time_axis_2(a: np.ndarray) -> np.ndarray:
    """[T, 2, B, .] -> [2, B, T, .]."""
    return np.moveaxis(np.asarray(a), 0, 2)


CASES = {  # name: (cell_clip, proj_clip, time_axis, with_bias, unroll, projected)
    "clip": (0.5, 0.5, 0, False, 1, True),
    "noclip_time_axis_2_bias_unrolled": (None, None, 2, True, T, True),
    "cell_clip_only_time_axis_2_unroll_3": (0.5, None, 2, False, 3, True),
    "no_projection_clips": (0.5, 0.2, 0, False, 1, False),  # proj_clip is ignored
    "no_projection_noclip_time_axis_2_bias_unroll_3": (None, None, 2, True, 3, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_autodiff_reference(case: str) -> None:
    cell_clip, proj_clip, time_axis, with_bias, unroll, projected = CASES[case]
    xw, w_hidden, w_proj, mask, c0, h0 = make_inputs(projected=projected)
    d_hs, d_c, d_h = cotangents(p=h0.shape[-1])
    bias = np.random.default_rng(2).normal(0.0, 0.5, (2, 4 * DIM)).astype(np.float32)

    def reference(xw, w_hidden, w_proj, c0, h0, bias):
        return reference_recurrence(xw + bias[:, None, :], w_hidden, w_proj, mask, c0, h0, cell_clip, proj_clip)

    def custom(xw, w_hidden, w_proj, c0, h0, bias):
        """The same function of time-major inputs, through lstm_recurrence in the case's layout."""
        extra = {"bias": bias} if with_bias else {}
        if not with_bias:
            xw = xw + bias[:, None, :]
        if time_axis == 2:
            xw, m = jnp.moveaxis(xw, 0, 2), to_time_axis_2(mask)
        else:
            m = mask
        hs, final = lstm_recurrence(
            xw, w_hidden, w_proj, m, c0, h0, cell_clip, proj_clip, time_axis=time_axis, unroll=unroll, **extra
        )
        return ((jnp.moveaxis(hs, 2, 0) if time_axis == 2 else hs), final), ()

    def value_and_vjp(fn, args, cts):
        out, vjp, aux = jax.vjp(fn, *args, has_aux=True)
        return out, vjp(cts), aux

    # Both in one jit: XLA:CPU compilation is the bulk of this test's time.
    both = jax.jit(lambda args, cts: tuple(value_and_vjp(fn, args, cts) for fn in (reference, custom)))
    (ref_out, ref_grads, (c_raw, h_raw)), (out, grads, _) = both(
        (xw, w_hidden, w_proj, c0, h0, bias), (d_hs, (d_c, d_h))
    )

    for name, a, b in zip(["hs", "c_T", "h_T"], jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref_out)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)
    for name, a, b in zip(["xw", "w_hidden", "w_proj", "c0", "h0", "bias"], grads, ref_grads):
        if name == "w_proj" and not projected:
            assert a is None and b is None
            continue
        assert np.abs(np.asarray(b)).max() > 1e-2, name  # every gradient is nontrivial
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)

    # Masked steps: no gradient into xw, and the output re-emits the frozen h.
    np.testing.assert_array_equal(np.asarray(grads[0])[np.broadcast_to(~mask, xw.shape)], 0.0)
    hs = np.asarray(out[0])
    for t, d, b in zip(*np.nonzero(~mask[..., 0])):
        np.testing.assert_array_equal(hs[t, d, b], h0[d, b] if t == 0 else hs[t - 1, d, b])
    np.testing.assert_array_equal(out[1][0][1, 3], c0[1, 3])  # the empty row keeps its state

    # Both sides of each clip are exercised (pre-clip values of the reference, on steps that count);
    # without a projection proj_clip is ignored, but would bite.
    for clip, raw in ((cell_clip, c_raw), (proj_clip, h_raw)):
        if clip is not None:
            live = np.abs(np.asarray(raw))[np.broadcast_to(mask, raw.shape)]
            assert np.any(live > clip) and np.any(live < clip)
    if not projected and proj_clip is not None:
        assert np.abs(hs).max() > proj_clip  # ... and it is not applied


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def numpy_recurrence_no_projection(
    xw: np.ndarray, w_hidden: np.ndarray, mask: np.ndarray, c0: np.ndarray, h0: np.ndarray, cell_clip: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 time-major loop of TF's LSTMCell without num_proj: h = sigmoid(o) tanh(c), never clipped.

    xw `[T, 2, B, 4 DIM]`, w_hidden `[2, DIM, 4 DIM]`, mask `[T, 2, B, 1]`, c0 / h0 `[2, B, DIM]`
    -> hs `[T, 2, B, DIM]`, final c, final h; a masked step keeps (and re-emits) the state.
    """
    c, h = np.array(c0, np.float64), np.array(h0, np.float64)
    hs = []
    for xw_t, m_t in zip(np.asarray(xw, np.float64), mask):
        z = xw_t + np.einsum("dbp,dpg->dbg", h, w_hidden)
        i, j, f, o = np.split(z, 4, axis=-1)
        c_new = np_sigmoid(f + 1.0) * c + np_sigmoid(i) * np.tanh(j)
        if cell_clip is not None:
            c_new = np.clip(c_new, -cell_clip, cell_clip)
        c, h = np.where(m_t, c_new, c), np.where(m_t, np_sigmoid(o) * np.tanh(c_new), h)
        hs.append(h)
    return np.stack(hs), c, h


@pytest.mark.parametrize("time_axis", [0, 2])
def test_no_projection_matches_numpy_and_finite_differences(time_axis: int) -> None:
    """w_proj=None: values vs the NumPy loop; the VJP vs float64 central differences of it
    (directional, per argument); proj_clip is ignored; masked steps get no gradient."""
    cell_clip, proj_clip = 0.5, 0.05  # proj_clip would bite everywhere if it were applied
    xw, w_hidden, _, mask, c0, h0 = make_inputs(5, projected=False)
    d_hs, d_c, d_h = cotangents(6, p=DIM)
    bias = np.random.default_rng(7).normal(0.0, 0.5, (2, 4 * DIM)).astype(np.float32)

    def custom(xw, w_hidden, c0, h0, bias):
        """Time-major in and out; the bias goes through lstm_recurrence's `bias` argument."""
        m = mask if time_axis == 0 else to_time_axis_2(mask)
        xw = xw if time_axis == 0 else jnp.moveaxis(xw, 0, 2)
        hs, final = lstm_recurrence(
            xw, w_hidden, None, m, c0, h0, cell_clip, proj_clip, time_axis=time_axis, bias=bias, unroll=2
        )
        return (hs if time_axis == 0 else jnp.moveaxis(hs, 2, 0)), final

    (hs, (c_t, h_t)), vjp = jax.vjp(custom, xw, w_hidden, c0, h0, bias)
    grads = vjp((d_hs, (d_c, d_h)))

    def reference(args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xw_, w_hidden_, c0_, h0_, bias_ = args
        return numpy_recurrence_no_projection(xw_ + bias_[:, None, :], w_hidden_, mask, c0_, h0_, cell_clip)

    primal = [np.asarray(a, np.float64) for a in (xw, w_hidden, c0, h0, bias)]
    ref_hs, ref_c, ref_h = reference(primal)
    for name, a, b in (("hs", hs, ref_hs), ("c_T", c_t, ref_c), ("h_T", h_t, ref_h)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)
    assert np.abs(ref_hs).max() > 10 * proj_clip and np.any(np.abs(ref_c) == cell_clip)

    def loss(args: list[np.ndarray]) -> float:
        out, c, h = reference(args)
        return float(np.sum(out * d_hs) + np.sum(c * d_c) + np.sum(h * d_h))

    rng, eps = np.random.default_rng(8), 1e-6
    for k, name in enumerate(["xw", "w_hidden", "c0", "h0", "bias"]):
        v = rng.normal(size=primal[k].shape)
        plus = [a + eps * v if i == k else a for i, a in enumerate(primal)]
        minus = [a - eps * v if i == k else a for i, a in enumerate(primal)]
        fd = (loss(plus) - loss(minus)) / (2 * eps)
        analytic = float(np.sum(np.asarray(grads[k], np.float64) * v))
        assert abs(fd) > 1e-2, name  # a nontrivial direction
        np.testing.assert_allclose(analytic, fd, rtol=1e-4, atol=1e-5, err_msg=name)

    # Masked steps: no gradient into xw, and the output re-emits the frozen h.
    np.testing.assert_array_equal(np.asarray(grads[0])[np.broadcast_to(~mask, xw.shape)], 0.0)
    for t, d, b in zip(*np.nonzero(~mask[..., 0])):
        np.testing.assert_array_equal(hs[t, d, b], h0[d, b] if t == 0 else hs[t - 1, d, b])
    # Exactly the same as without proj_clip.
    args = (xw + bias[:, None, :], w_hidden, None, mask, c0, h0, cell_clip)
    np.testing.assert_array_equal(lstm_recurrence(*args, proj_clip)[0], lstm_recurrence(*args, None)[0])


def test_automatic_unroll_is_one_and_negative_unroll_is_an_error() -> None:
    assert resolve_unroll(0, T) == 1
    assert resolve_unroll(100, T) == T
    with pytest.raises(ValueError, match="model.lstm.unroll"):
        resolve_unroll(-1, T)


def test_clip_none_is_no_clip_zero_is_refused_and_any_mask_dtype() -> None:
    """None is no clipping (the config's 0 arrives as None); a clip of 0 would zero the layer."""
    xw, w_hidden, w_proj, mask, c0, h0 = make_inputs(3)
    hs_none, _ = lstm_recurrence(xw, w_hidden, w_proj, mask, c0, h0, None, None)
    hs_int_mask, _ = lstm_recurrence(xw, w_hidden, w_proj, mask.astype(np.int32), c0, h0, None, None)
    np.testing.assert_array_equal(hs_int_mask, hs_none)
    hs_huge, _ = lstm_recurrence(xw, w_hidden, w_proj, mask, c0, h0, 1e6, 1e6)
    np.testing.assert_allclose(hs_huge, hs_none, rtol=1e-6, atol=1e-6)
    for clips in ((0.0, None), (None, 0.0)):
        with pytest.raises(ValueError, match="must be None \\(no clipping\\) or > 0, got 0.0"):
            lstm_recurrence(xw, w_hidden, w_proj, mask, c0, h0, *clips)


def test_bilstm_bfloat16_runs_on_cpu_and_is_close_to_float32() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, B, T, P)).astype(np.float32)
    mask = np.ones((2, B, T), np.int32)
    mask[0, 0, 5:] = 0
    state = LSTMState(np.zeros((2, B, DIM), np.float32), np.zeros((2, B, P), np.float32))
    layers = [BiLSTMLayer(DIM, P, 3.0, 3.0, dtype=dt) for dt in (jnp.float32, jnp.bfloat16)]
    shapes = {"W_input": (2, P, 4 * DIM), "W_hidden": (2, P, 4 * DIM), "B": (2, 4 * DIM), "W_P": (2, DIM, P)}
    params = {"params": {k: rng.uniform(-0.5, 0.5, s).astype(np.float32) for k, s in shapes.items()}}

    def loss(layer: BiLSTMLayer, p, x):
        out, final = layer.apply(p, x, mask, state)
        return jnp.sum(out**2) + jnp.sum(final.c)

    both = jax.jit(lambda p, x: tuple(jax.value_and_grad(loss, argnums=(1, 2))(l, p, x) for l in layers))
    (l32, g32), (l16, g16) = both(params, x)
    assert np.isfinite(l16)
    np.testing.assert_allclose(l16, l32, rtol=2e-2)
    for a, b in zip(jax.tree_util.tree_leaves(g16), jax.tree_util.tree_leaves(g32)):
        assert a.dtype == jnp.float32
        scale = np.abs(np.asarray(b)).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-2 * scale + 1e-6)


@pytest.mark.parametrize("time_axis", [0, 2])
@pytest.mark.parametrize("start", ["zeros", "given"])
def test_reset_runs_packed_sequences_as_separate_ones(time_axis: int, start: str) -> None:
    """Two sequences one after another in each row, the state reset where the second starts (to
    zeros, or to a given state per direction): the outputs and gradients equal those of two
    separate runs, the second from that state."""
    xw, w_hidden, w_proj, _, c0, h0 = make_inputs(9)
    split = 3  # Steps [0, 3) are the first sequence, [3, T) the second.
    mask = np.ones((T, 2, B, 1), bool)
    mask[5:, 0, 1] = False  # The second sequence of one row ends early.
    reset = np.zeros_like(mask)
    reset[split] = True
    rng = np.random.default_rng(11)
    reset_state = None
    if start == "given":
        reset_state = tuple(rng.normal(0, 0.5, (2, 1, n)).astype(np.float32) for n in (DIM, P))
        second_start = tuple(np.broadcast_to(a, b.shape) for a, b in zip(reset_state, (c0, h0)))
    else:
        second_start = (np.zeros_like(c0), np.zeros_like(h0))
    args = (0.5, 0.5)

    def layout(a):
        return a if time_axis == 0 else jnp.moveaxis(a, 0, 2)

    def packed(xw, w_hidden, w_proj, c0, h0):
        hs, final = lstm_recurrence(
            layout(xw), w_hidden, w_proj, layout(mask), c0, h0, *args, time_axis=time_axis, reset=layout(reset),
            reset_state=reset_state,
        )
        return (hs if time_axis == 0 else jnp.moveaxis(hs, 2, 0)), final

    def separate(xw, w_hidden, w_proj, c0, h0):
        first, _ = lstm_recurrence(xw[:split], w_hidden, w_proj, mask[:split], c0, h0, *args)
        second, final = lstm_recurrence(xw[split:], w_hidden, w_proj, mask[split:], *second_start, *args)
        return jnp.concatenate([first, second]), final

    inputs = (xw, w_hidden, w_proj, c0, h0)
    got, want = packed(*inputs), separate(*inputs)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    # Without the reset the second sequence would continue from the first's state.
    unreset, _ = lstm_recurrence(xw, w_hidden, w_proj, mask, c0, h0, *args)
    assert not np.allclose(unreset[split:], want[0][split:], atol=1e-3)

    d_hs, d_c, d_h = cotangents(10)

    def loss(fn, *a):
        hs, (c, h) = fn(*a)
        return jnp.sum(hs * d_hs) + jnp.sum(c * d_c) + jnp.sum(h * d_h)

    grads = [jax.grad(lambda *a: loss(fn, *a), argnums=range(5))(*inputs) for fn in (packed, separate)]
    for name, a, b in zip(["xw", "w_hidden", "w_proj", "c0", "h0"], *grads):
        assert np.abs(b).max() > 1e-3, name
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
