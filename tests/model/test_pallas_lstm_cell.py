"""fused_cell_recurrence (XLA's time loop, each step's gates and cell update one Pallas kernel and
its reverse another, interpreted on CPU) vs lstm_recurrence: outputs, final state and gradients in float32 to 1e-5 over
clips, projection or none, mask holes, both time layouts, blocks and sizes the wrapper pads, an
unrolled loop; bfloat16 operands; argument checks; the Triton lowering at the models' shapes."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.triton_shared_memory import captured_modules, lstm_loss
from elmo_jax.config.recipes import recipe_module
from elmo_jax.model.lstm_recurrence import lstm_recurrence
from elmo_jax.model.pallas_lstm_cell import default_blocks, fused_cell_recurrence
from tests.model.test_pallas_lstm import ARG_NAMES, assert_same_results, loss_and_grads, make_inputs
from tests.model.triton_lowering import INTERPRET, triton_checks

CASES = {  # name: (batch, dim, P, projected, clips, time_axis, with_bias, blocks (batch, cells, k), unroll)
    "clips_t2_bias_blocks_2_4_4": (4, 16, 8, True, (0.5, 0.5), 2, True, (2, 4, 4), 1),
    "noclip_t0_one_block_each": (4, 16, 8, True, (None, None), 0, False, (4, 16, 8), 1),
    "cell_clip_t2_unroll3_blocks_2_8_2": (4, 16, 8, True, (0.5, None), 2, True, (2, 8, 2), 3),
    "odd_sizes_padded_default_blocks_t2": (5, 24, 7, True, (0.5, 0.5), 2, True, (None,) * 3, 1),
    "no_projection_t0_blocks_2_4_8": (4, 16, 16, False, (0.5, 0.2), 0, True, (2, 4, 8), 1),  # proj_clip ignored
    "no_projection_odd_dim_default_blocks_t2": (3, 5, 5, False, (None, None), 2, True, (None,) * 3, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_lstm_recurrence(case: str) -> None:
    """Values, outputs and gradients w.r.t. xw, bias, W_hidden, W_proj, c0 and h0 equal the XLA
    recurrence's: the forward kernel's z (the four gates of its cells accumulated over h's blocks)
    and its activated gates, written over xw, are `cell_step`'s; the reverse kernel's dm (over dh's
    blocks) and gate cotangents, written over the gates, `cell_grads`'. Masked steps take no
    gradient into xw. At the default blocks the kernels run as Triton compiles them on a GPU."""
    batch, dim, p, projected, (cell_clip, proj_clip), time_axis, with_bias, blocks, unroll = CASES[case]
    inputs = make_inputs(11, projected, batch, dim, p)
    clips = {"cell_clip": cell_clip, "proj_clip": proj_clip}
    block_batch, block_cells, block_k = blocks
    kw = dict(clips, interpret=INTERPRET if block_batch is None else True, unroll=unroll,
              block_batch=block_batch, block_cells=block_cells, block_k=block_k)

    def both():
        got = loss_and_grads(fused_cell_recurrence, inputs, 2, time_axis, with_bias, **kw)
        return got, loss_and_grads(lstm_recurrence, inputs, 2, time_axis, with_bias, **clips)

    with jax.default_matmul_precision("highest"):  # no TF32 in the XLA path on a GPU
        got, want = jax.jit(both)()
    assert_same_results(got, want)
    for name, b in zip(ARG_NAMES, want[2]):
        assert b is None or np.abs(np.asarray(b)).max() > 1e-2, name  # every gradient is nontrivial
    mask = np.broadcast_to(inputs["mask"], inputs["xw"].shape)
    np.testing.assert_array_equal(np.asarray(got[2][0])[~mask], 0.0)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="XLA:GPU rounds bfloat16 dot results")
def test_bfloat16_operands_match_xla_bfloat16() -> None:
    """bfloat16 matmul operands (float32 accumulation, state and gate math): XLA:CPU computes the
    XLA path's bfloat16 dots in float32 too (test_pallas_lstm's test of the same name says why), so
    the two differ only by summation order, 1e-4 of each array's largest magnitude, while bfloat16
    was really used (> 1e-4 of the scale away from float32's results)."""
    inputs = make_inputs(12)
    kw = {"cell_clip": 0.5, "proj_clip": 0.5, "time_axis": 2, "with_bias": True}

    def everything():
        blocks = dict(interpret=True, block_batch=2, block_cells=4, block_k=4)
        return [
            loss_and_grads(fused_cell_recurrence, inputs, 4, dtype=jnp.bfloat16, **blocks, **kw),
            loss_and_grads(lstm_recurrence, inputs, 4, dtype=jnp.bfloat16, **kw),
            loss_and_grads(lstm_recurrence, inputs, 4, dtype=jnp.float32, **kw),
        ]

    fused16, xla16, xla32 = ([np.asarray(a) for a in jax.tree_util.tree_leaves(r)] for r in jax.jit(everything)())
    for n, (a, b, ref) in enumerate(zip(fused16, xla16, xla32)):
        scale = np.abs(ref).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * scale, err_msg=str(n))
        assert np.abs(a - ref).max() > 1e-4 * scale, n


def test_argument_checks() -> None:
    inputs = make_inputs(13)
    args = [inputs[k] for k in ("xw", "w_hidden", "w_proj", "mask", "c0", "h0")] + [0.5, 0.5]
    with pytest.raises(ValueError, match="time_axis"):
        fused_cell_recurrence(*args, time_axis=1, interpret=True)
    with pytest.raises(ValueError, match="block_cells=0 must be positive"):
        fused_cell_recurrence(*args, interpret=True, block_cells=0)
    with pytest.raises(ValueError, match="block_k=24.*power of two"):
        fused_cell_recurrence(*args, block_k=24)  # for Triton, checked before lowering on any backend
    with pytest.raises(ValueError, match="cell kernel does not run with reset"):
        lstm_recurrence(*args, reset=inputs["mask"], cell=object())


def test_default_blocks() -> None:
    """Rows, cells and h's units per dot step: the largest powers of two <= 64, 32 and 128 dividing
    the sizes rounded up to 16s."""
    assert default_blocks(128, 4096, 512) == (64, 32, 128)  # ELMo original at batch 128
    assert default_blocks(3, 24, 7) == (16, 32, 16)  # padded: 16 rows, 32 cells, 16 units
    assert default_blocks(48, 48, 48) == (16, 16, 16)


@pytest.mark.parametrize("batch", [1, 128])
@pytest.mark.parametrize("recipe", ["elmo_small", "elmo_original"])
def test_lowers_to_triton_at_the_model_shapes(recipe: str, batch: int) -> None:
    """As `BiLSTMLayer` calls it (time on axis 2, bias inside, the recipe's widths and clips,
    bfloat16 operands), the recurrence lowers for CUDA with one Triton call in its time loop and
    its gradient with two (the forward step; the reverse step in the reverse loop), each writing
    over its sequence operand (an output aliased to operand 1), to Triton modules that pass MLIR
    verification with dots of at least 16 in every dimension: four in the forward (one per gate,
    in the loop over h's blocks), one in the reverse (dm, in the loop over dh's)."""
    loss, args = lstm_loss(recipe_module(recipe).get_config(), batch, fused_cell_recurrence)
    count_dots = lambda module: module.operation.get_asm(enable_debug_info=False).count(" tt.dot ")
    with triton_checks() as checks, captured_modules(count_dots) as dots:
        texts = [jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
                 for fn in (loss, jax.grad(loss, argnums=range(6)))]
    assert checks == [[], [], []]
    assert dots == [4, 4, 1]
    alias = r"output_operand_aliases = \[#stablehlo.output_operand_alias<output_tuple_indices = \[0\], operand_index = 1"
    for text, n_kernels in zip(texts, (1, 2)):
        assert text.count("__gpu$xla.gpu.triton") == n_kernels
        assert len(re.findall(alias, text)) == n_kernels
