"""pallas_lstm_recurrence (Pallas kernels, interpret mode on CPU) vs lstm_recurrence (the XLA path):
outputs, final state and gradients in float32 to 1e-5 over clips, projection, mask holes, both time
layouts, several tile sizes and sizes the wrapper pads; bfloat16 operands vs the XLA path at the
same dtype; argument checks; lowering for Triton, also at the released models' shapes."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.triton_shared_memory import captured_modules, lstm_loss
from elmo_jax.config.recipes import recipe_module
from elmo_jax.model.lstm_recurrence import lstm_recurrence
from elmo_jax.model.pallas_lstm import default_block_hidden, pallas_lstm_recurrence
from tests.reference.lstm_recurrence import reference_recurrence
from tests.model.triton_lowering import INTERPRET, triton_checks

RTOL, ATOL = 1e-5, 1e-5
T, B, DIM, P = 6, 4, 16, 8
ARG_NAMES = ["xw", "bias", "w_hidden", "w_proj", "c0", "h0"]


def make_inputs(
    seed: int = 0, projected: bool = True, batch: int = B, dim: int = DIM, p: int = P
) -> dict[str, np.ndarray | None]:
    """Time-major inputs: xw [T, 2, batch, 4 dim], bias, weights, c0, h0 and a mask [T, 2, batch, 1]
    with frozen steps in the middle and at the end of rows (and a row without any step), on the
    rows < 4 that exist; without a projection P = dim."""
    p = p if projected else dim
    rng = np.random.default_rng(seed)
    mask = np.ones((T, 2, max(batch, 4), 1), bool)
    mask[4:, 0, 0] = False  # padded tail
    mask[2:4, 0, 1] = False  # hole in the middle
    mask[0, 1, 2] = False  # masked first step ...
    mask[3, 1, 2] = False  # ... a hole ...
    mask[5:, 1, 2] = False  # ... and a padded tail in the other direction
    mask[:, 1, 3] = False  # empty row
    return {
        "xw": rng.normal(0.0, 1.5, (T, 2, batch, 4 * dim)).astype(np.float32),
        "bias": rng.normal(0.0, 0.5, (2, 4 * dim)).astype(np.float32),
        "w_hidden": rng.normal(0.0, 0.5, (2, p, 4 * dim)).astype(np.float32),
        "w_proj": rng.normal(0.0, 0.6, (2, dim, p)).astype(np.float32) if projected else None,
        "c0": rng.normal(0.0, 0.5, (2, batch, dim)).astype(np.float32),
        "h0": rng.normal(0.0, 0.3, (2, batch, p)).astype(np.float32),
        "mask": mask[:, :, :batch],
    }


def run(fn, time_axis: int, inputs: dict, with_bias: bool, **kwargs):
    """fn (either recurrence) on time-major inputs in the given layout; time-major hs back.

    Without `with_bias` the bias is added to xw outside (the recurrence gets none)."""
    xw, mask = inputs["xw"], inputs["mask"]
    if not with_bias:
        xw = xw + inputs["bias"][:, None, :]
    if time_axis == 2:
        xw, mask = jnp.moveaxis(xw, 0, 2), np.moveaxis(mask, 0, 2)
    extra = {"bias": inputs["bias"]} if with_bias else {}
    hs, final = fn(
        xw, inputs["w_hidden"], inputs["w_proj"], mask, inputs["c0"], inputs["h0"], time_axis=time_axis,
        **extra, **kwargs,
    )
    return (jnp.moveaxis(hs, 2, 0) if time_axis == 2 else hs), final


def loss_and_grads(fn, inputs: dict, seed: int, time_axis: int, with_bias: bool, **kwargs):
    """A random linear function of (hs, c_T, h_T), its value, the outputs and its gradients w.r.t.
    xw, bias, w_hidden, w_proj, c0 and h0 (jax.grad through the custom VJP)."""
    (_, batch, p), dim = inputs["h0"].shape, inputs["c0"].shape[-1]
    rng = np.random.default_rng(seed)
    shapes = ((T, 2, batch, p), (2, batch, dim), (2, batch, p))
    a_hs, a_c, a_h = (rng.normal(size=s).astype(np.float32) for s in shapes)

    def loss(xw, bias, w_hidden, w_proj, c0, h0):
        args = dict(inputs, xw=xw, bias=bias, w_hidden=w_hidden, w_proj=w_proj, c0=c0, h0=h0)
        hs, (c, h) = run(fn, time_axis, args, with_bias, **kwargs)
        return jnp.sum(hs * a_hs) + jnp.sum(c * a_c) + jnp.sum(h * a_h), (hs, c, h)

    (value, outs), grads = jax.value_and_grad(loss, argnums=range(6), has_aux=True)(
        *(inputs[k] for k in ARG_NAMES)
    )
    return value, outs, grads


def assert_same_results(got: tuple, want: tuple) -> None:
    """Two recurrences' (value, outputs, gradients) from `loss_and_grads` equal to RTOL / ATOL, each
    array of the same shape; W_proj's gradient None in both without a projection."""
    (value, outs, grads), (ref_value, ref_outs, ref_grads) = got, want
    np.testing.assert_allclose(value, ref_value, rtol=RTOL, atol=ATOL)
    for name, a, b in zip(["hs", "c_T", "h_T", *ARG_NAMES], (*outs, *grads), (*ref_outs, *ref_grads)):
        if b is None:  # w_proj without a projection
            assert a is None, name
            continue
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)


CASES = {  # name: (projected, cell_clip, proj_clip, time_axis, with_bias, block_batch, block_hidden)
    "clips_t0_bias_bb2_bh4": (True, 0.5, 0.5, 0, True, 2, 4),
    "noclip_t2_bb4_bh8": (True, None, None, 2, False, 4, 8),
    "cell_clip_t2_bias_bb1_one_tile": (True, 0.5, None, 2, True, 1, 16),
    "proj_clip_t0_bb4_bh2": (True, None, 0.5, 0, False, 4, 2),
    "default_blocks_clips_t2": (True, 0.5, 0.5, 2, True, None, None),
    "no_projection_clips_t0_bias_bb2_bh8": (False, 0.5, 0.2, 0, True, 2, 8),  # proj_clip is ignored
    "no_projection_noclip_t2_bb4_bh4": (False, None, None, 2, False, 4, 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_lstm_recurrence(case: str) -> None:
    projected, cell_clip, proj_clip, time_axis, with_bias, block_batch, block_hidden = CASES[case]
    inputs = make_inputs(projected=projected)
    mask = inputs["mask"]
    clips = {"cell_clip": cell_clip, "proj_clip": proj_clip}
    interpret = INTERPRET if block_batch is None else True  # explicit blocks below 16: interpreted only
    pallas_kw = dict(clips, interpret=interpret, block_batch=block_batch, block_hidden=block_hidden)

    def everything():
        """Both recurrences' values, outputs and gradients, and the pallas primal alone (its
        forward kernel without residuals), in one jit: compilation is the bulk of the time."""
        got = loss_and_grads(pallas_lstm_recurrence, inputs, 1, time_axis, with_bias, **pallas_kw)
        want = loss_and_grads(lstm_recurrence, inputs, 1, time_axis, with_bias, **clips)
        primal = run(pallas_lstm_recurrence, time_axis, inputs, with_bias, **pallas_kw)
        return got, want, primal

    with jax.default_matmul_precision("highest"):  # no TF32 in the XLA path on a GPU
        (value, outs, grads), (ref_value, ref_outs, ref_grads), (hs_primal, final_primal) = jax.jit(everything)()

    np.testing.assert_allclose(value, ref_value, rtol=RTOL, atol=ATOL)
    for name, a, b in zip(["hs", "c_T", "h_T"], outs, ref_outs):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)
    # The inference kernel (no residuals) computes exactly what the training one does, compiled for a
    # GPU; interpreted, XLA:CPU emits the two programs' fusions apart, and the tests' elemental IR
    # emitters (tests/entry_points.TEST_XLA_FLAGS) round their tanh and exp by fusion, within 1e-7.
    exact = 0.0 if not interpret else 1e-6
    for name, a, b in zip(["hs", "c_T", "h_T"], (hs_primal, *final_primal), outs):
        np.testing.assert_allclose(a, b, rtol=0, atol=exact, err_msg=name)
    for name, a, b in zip(ARG_NAMES, grads, ref_grads):
        if name == "w_proj" and not projected:
            assert a is None and b is None
            continue
        assert np.abs(np.asarray(b)).max() > 1e-2, name  # every gradient is nontrivial
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)

    # Masked steps: no gradient into xw, and the output re-emits the frozen h; the empty row keeps
    # its state.
    hs, c_t, h_t = (np.asarray(a) for a in outs)
    np.testing.assert_array_equal(np.asarray(grads[0])[np.broadcast_to(~mask, inputs["xw"].shape)], 0.0)
    for t, d, b in zip(*np.nonzero(~mask[..., 0])):
        np.testing.assert_array_equal(hs[t, d, b], inputs["h0"][d, b] if t == 0 else hs[t - 1, d, b])
    np.testing.assert_array_equal(c_t[1, 3], inputs["c0"][1, 3])
    np.testing.assert_array_equal(h_t[1, 3], inputs["h0"][1, 3])

    # Each clip that is on bites on both sides (pre-clip values of the scan reference, on live steps).
    xw_b = inputs["xw"] + inputs["bias"][:, None, :]
    _, (c_raw, h_raw) = reference_recurrence(
        xw_b, inputs["w_hidden"], inputs["w_proj"], mask, inputs["c0"], inputs["h0"], cell_clip,
        proj_clip if projected else None,
    )
    for clip, raw in ((cell_clip, c_raw), (proj_clip if projected else None, h_raw)):
        if clip is not None:
            live = np.abs(np.asarray(raw))[np.broadcast_to(mask, raw.shape)]
            assert np.any(live > clip) and np.any(live < clip)
    if not projected and proj_clip is not None:
        assert np.abs(hs).max() > proj_clip  # proj_clip would bite, but is not applied
    if cell_clip is None:
        assert np.abs(np.asarray(c_raw)).max() > 1.0  # the unclipped cases would be clipped at 0.5
    if projected and proj_clip is None:
        assert np.abs(np.asarray(h_raw)).max() > 1.0


PADDED_CASES = {  # name: (batch, dim, P, projected, time_axis, block_batch, block_hidden)
    "batch1_default_blocks_t2": (1, 16, 8, True, 2, None, None),
    "batch3_odd_widths_default_blocks_t0": (3, 24, 7, True, 0, None, None),
    "batch5_odd_widths_bb2_bh4_t2": (5, 5, 3, True, 2, 2, 4),
    "no_projection_batch3_odd_dim_default_blocks_t2": (3, 5, 5, False, 2, None, None),
    "no_projection_batch5_bb2_bh16_t0": (5, 24, 24, False, 0, 2, 16),
}


@pytest.mark.parametrize("case", list(PADDED_CASES))
def test_padded_sizes_match_lstm_recurrence(case: str) -> None:
    """Batches, hidden and projection sizes that the kernels' blocks do not divide (batch 1 as at
    model init, 3 and 5; odd dim and P): the wrapper pads them and slices the results back, and the
    outputs, final state and gradients are lstm_recurrence's (float32, 1e-5), so no padded row,
    hidden unit or h unit leaks into them. At the default blocks the kernels run as Triton
    compiles them where JAX's backend is a GPU (`INTERPRET`), else interpreted."""
    batch, dim, p, projected, time_axis, block_batch, block_hidden = PADDED_CASES[case]
    inputs = make_inputs(7, projected, batch, dim, p)
    clips = {"cell_clip": 0.5, "proj_clip": 0.5}
    interpret = INTERPRET if block_batch is None else True  # explicit blocks below 16: interpreted only
    pallas_kw = dict(clips, interpret=interpret, block_batch=block_batch, block_hidden=block_hidden)

    def both():
        got = loss_and_grads(pallas_lstm_recurrence, inputs, 8, time_axis, True, **pallas_kw)
        return got, loss_and_grads(lstm_recurrence, inputs, 8, time_axis, True, **clips)

    with jax.default_matmul_precision("highest"):  # no TF32 in the XLA path on a GPU
        assert_same_results(*jax.jit(both)())


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="XLA:GPU rounds bfloat16 dot results (see docstring)")
def test_bfloat16_operands_match_xla_bfloat16() -> None:
    """bfloat16 matmul operands (float32 state, gate math and accumulation) vs lstm_recurrence at
    the same dtype, and both vs float32.

    Tolerance: both paths round the same dot operands to bfloat16; a bfloat16 product is exact in
    float32 and both accumulate in float32 here (the Pallas dots by `preferred_element_type`;
    `precision.matmul`'s bfloat16 dot result would be rounded to bfloat16, but XLA:CPU computes
    bfloat16 dots in float32 and drops the f32 -> bf16 -> f32 round trip of the result: measured
    differences <= 5e-7). So on CPU the two differ only by float32 summation order, and 1e-4 of each
    array's largest magnitude is a wide margin, while a rounding of dot results to bfloat16 in
    either path (2^-9 relative per step) would show as ~1e-2 after T steps and fail it. On a GPU,
    where XLA does round those results, the paths would differ by about that much; the general
    guard is the second check: the Pallas error vs float32 no larger than 2x the XLA path's
    (+1e-3 of the scale; both are ~1e-2 of it here). Finally bfloat16 must really be used (the
    results differ from float32's by > 1e-4 of the scale) and float32 must agree to 1e-5."""
    inputs = make_inputs(3)
    kw = {"cell_clip": 0.5, "proj_clip": 0.5}

    def everything():
        out = {}
        for name, dtype in (("32", jnp.float32), ("16", jnp.bfloat16)):
            pallas_kw = dict(kw, dtype=dtype, interpret=True, block_batch=2, block_hidden=8)
            out["pallas" + name] = loss_and_grads(pallas_lstm_recurrence, inputs, 4, 2, True, **pallas_kw)
            out["xla" + name] = loss_and_grads(lstm_recurrence, inputs, 4, 2, True, dtype=dtype, **kw)
        return out

    out = jax.jit(everything)()
    leaves = {k: [np.asarray(a) for a in jax.tree_util.tree_leaves(v)] for k, v in out.items()}
    for n in range(len(leaves["xla32"])):
        ref32 = leaves["xla32"][n]
        p16, x16, p32 = leaves["pallas16"][n], leaves["xla16"][n], leaves["pallas32"][n]
        assert p16.dtype == np.float32
        scale = np.abs(ref32).max()
        np.testing.assert_allclose(p16, x16, rtol=0, atol=1e-4 * scale, err_msg=str(n))
        err_pallas, err_xla = np.abs(p16 - ref32).max(), np.abs(x16 - ref32).max()
        assert err_pallas <= 2 * err_xla + 1e-3 * scale, (n, err_pallas, err_xla)
        assert np.abs(p16 - p32).max() > 1e-4 * scale, n  # bfloat16 was used
        np.testing.assert_allclose(p32, ref32, rtol=RTOL, atol=ATOL * max(1.0, scale), err_msg=str(n))


def test_clip_none_is_no_clip_zero_is_refused_int_mask_and_no_steps() -> None:
    inputs = make_inputs(5)
    args = (inputs["xw"], inputs["w_hidden"], inputs["w_proj"])
    state = (inputs["c0"], inputs["h0"])
    kw = {"interpret": True, "block_batch": 4, "block_hidden": 8}
    hs_none, _ = pallas_lstm_recurrence(*args, inputs["mask"], *state, None, None, **kw)
    hs_int_mask, _ = pallas_lstm_recurrence(*args, inputs["mask"].astype(np.int32), *state, None, None, **kw)
    np.testing.assert_array_equal(hs_int_mask, hs_none)
    assert np.abs(np.asarray(hs_none)).max() > 1.0  # unclipped: a clip at 0 would have zeroed it
    with pytest.raises(ValueError, match="cell_clip must be None"):
        pallas_lstm_recurrence(*args, inputs["mask"], *state, 0.0, None, **kw)

    empty = (inputs["xw"][:0], inputs["w_hidden"], inputs["w_proj"], inputs["mask"][:0])
    for time_axis in (0, 2):
        xw, mask = (a if time_axis == 0 else np.moveaxis(a, 0, 2) for a in (empty[0], empty[3]))
        hs, (c, h) = pallas_lstm_recurrence(xw, empty[1], empty[2], mask, *state, 0.5, 0.5, time_axis=time_axis, **kw)
        assert hs.shape == ((0, 2, B, P) if time_axis == 0 else (2, B, 0, P))
        np.testing.assert_array_equal(c, inputs["c0"])
        np.testing.assert_array_equal(h, inputs["h0"])


def test_argument_checks() -> None:
    inputs = make_inputs(6)
    args = [inputs[k] for k in ("xw", "w_hidden", "w_proj", "mask", "c0", "h0")] + [0.5, 0.5]
    with pytest.raises(ValueError, match="time_axis"):
        pallas_lstm_recurrence(*args, time_axis=1, interpret=True)
    with pytest.raises(ValueError, match="block_batch=0 must be positive"):
        pallas_lstm_recurrence(*args, interpret=True, block_batch=0, block_hidden=8)
    with pytest.raises(ValueError, match="block_hidden=-2 must be positive"):
        pallas_lstm_recurrence(*args, interpret=True, block_batch=4, block_hidden=-2)
    # Explicit blocks for the Triton lowering must be powers of two >= 16 (checked before lowering,
    # on any backend).
    with pytest.raises(ValueError, match="block_batch=4.*power of two"):
        pallas_lstm_recurrence(*args, block_batch=4, block_hidden=16)
    with pytest.raises(ValueError, match="block_hidden=24.*power of two"):
        pallas_lstm_recurrence(*args, block_batch=16, block_hidden=24)


def test_default_block_hidden() -> None:
    """Sized for H100 shared memory: the W_hidden gate tile [P, block_hidden] <= 64 KiB; dim is
    padded to a multiple of the result, so it is a power of two in [16, 128] whatever dim is."""
    assert default_block_hidden(4096, 512, jnp.bfloat16) == 64  # ELMo original
    assert default_block_hidden(1024, 128, jnp.bfloat16) == 128  # ELMo small
    assert default_block_hidden(4096, 512, jnp.float32) == 32
    assert default_block_hidden(4096, 4096, jnp.float32) == 16  # never below a dot's minimum
    assert default_block_hidden(24, 16, jnp.float32) == 32  # dim padded to 32
    assert default_block_hidden(48, 16, jnp.float32) == 16  # 48 is a multiple of 16: no padding
    assert default_block_hidden(5, 16, jnp.float32) == 16


@pytest.mark.parametrize(
    "projected,time_axis,b,dim,p,block",
    [
        (True, 0, 32, 32, 16, 16),
        (True, 2, 32, 32, 16, 16),
        (False, 2, 32, 32, 32, 16),
        (True, 0, 3, 24, 7, None),  # padded: batch, dim and P (default blocks)
        (False, 2, 5, 5, 5, None),
    ],
)
def test_lowers_to_triton_for_gpu(
    projected: bool, time_axis: int, b: int, dim: int, p: int, block: int | None
) -> None:
    """The kernels (forward, and the training forward and reverse ones under jax.grad) lower through
    Pallas's Triton lowering to Triton modules that pass MLIR verification (Triton's tensor-size and
    op verifiers) and have no dot dimension below 16, without a GPU: cross-platform lowering for
    CUDA. This checks that every primitive the kernels use has a Triton lowering rule; it does not
    compile them to PTX (shared memory, registers, Triton's own passes), which needs a GPU."""
    steps = (3, 2, b) if time_axis == 0 else (2, b, 3)
    shapes = [steps + (4 * dim,), (2, p, 4 * dim), (2, dim, p), (2, b, dim), (2, b, p)]
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    if not projected:
        args[2] = None

    def loss(xw, w_hidden, w_proj, c0, h0):
        hs, (c, h) = pallas_lstm_recurrence(
            xw, w_hidden, w_proj, jnp.ones(steps + (1,), bool), c0, h0, 3.0, 3.0, dtype=jnp.bfloat16,
            time_axis=time_axis, block_batch=block, block_hidden=block,
        )
        return jnp.sum(hs) + jnp.sum(c) + jnp.sum(h)

    with triton_checks() as checks:
        for fn, n_kernels in ((loss, 1), (jax.grad(loss, argnums=(0, 1, 2, 3, 4)), 2)):
            text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
            assert text.count("__gpu$xla.gpu.triton") == n_kernels
    assert checks == [[], [], []]


@pytest.mark.parametrize("batch", [1, 3, 128])
@pytest.mark.parametrize("recipe", ["elmo_small", "elmo_original"])
def test_lowers_to_triton_at_the_model_shapes(recipe: str, batch: int) -> None:
    """The kernels as `BiLSTMLayer` calls them (time on axis 2, bias inside, the recipe's widths,
    clips and unroll_steps, bfloat16 operands) lower to Triton modules that pass MLIR verification
    and have no dot dimension below 16, at batch 1 (model init), 3 (an evaluation batch) and 128:
    the wrapper pads what Triton cannot take. Inputs are abstract (no memory for the weights). Each
    kernel asks for one pipeline stage: at 3, Pallas's default, Triton keeps extra copies of every
    weight tile of the time loop in shared memory (2.6 MB at elmo_small's shapes on an H200).

    Each module has 5 dots whatever the widths (forward: 4 gates and the projection; backward: the
    projection's and 4 gates'): the hidden tiles are a loop, not unrolled, which at
    `elmo_original`'s 64 tiles made 320 dots per module and kept Triton compiling for over 15 min."""
    loss, args = lstm_loss(recipe_module(recipe).get_config(), batch)
    count_dots = lambda module: module.operation.get_asm(enable_debug_info=False).count(" tt.dot ")
    with triton_checks() as checks, captured_modules(count_dots) as dots:
        texts = [jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
                 for fn in (loss, jax.grad(loss, argnums=range(6)))]
    assert checks == [[], [], []]
    assert dots == [5, 5, 5]
    assert [re.findall(r"num_stages = (\d+)", text) for text in texts] == [["1"], ["1", "1"]]
