"""pallas_conv_max (interpret mode on CPU) vs NumPy: the max over positions and its first argmax,
also at sizes the wrapper pads; bfloat16 operands; argument checks; lowering to Triton for CUDA
without a GPU, also at the released models' shapes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.config.recipes import recipe_module
from elmo_jax.model.pallas_conv_pool import default_block_filters, pallas_conv_max
from tests.model.test_char_cnn import np_conv1d_valid
from tests.model.triton_lowering import INTERPRET, triton_checks


def example(n_tokens: int, n_chars: int, dim: int, width: int, n_filters: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_tokens, n_chars, dim)).astype(np.float32)
    if n_tokens > 1:
        x[1, 2:] = x[1, 1]  # Identical characters from 1 on (as padding): those windows tie.
    kernel = rng.normal(size=(width, dim, n_filters)).astype(np.float32)
    return x, kernel


@pytest.mark.parametrize(
    "n_tokens,n_chars,dim,width,n_filters,block_tokens,block_filters",
    [
        (7, 9, 3, 1, 4, 4, 2),  # tokens padded to 8; two filter blocks
        (7, 9, 3, 4, 6, 32, None),  # one token block; default filter block (16: filters padded)
        (5, 6, 2, 6, 3, 2, 3),  # width = all characters: one position
        (16, 12, 16, 3, 32, 16, 16),  # the GPU lowering's shapes
        (16, 12, 16, 3, 24, 16, 16),  # filters padded to 32
        (1, 9, 3, 2, 5, None, None),  # default blocks from here: one token, d and filters padded
        (3, 11, 5, 7, 33, None, None),  # filters padded to 48 (three blocks of 16)
        (5, 50, 16, 7, 130, None, None),  # the model's characters, 130 filters padded to 144
    ],
)
def test_matches_numpy_max_and_first_argmax(n_tokens, n_chars, dim, width, n_filters, block_tokens, block_filters):
    """At the default blocks the kernel runs as Triton compiles it where JAX's backend is a GPU
    (`INTERPRET`), else interpreted; explicit blocks below 16 run interpreted."""
    x, kernel = example(n_tokens, n_chars, dim, width, n_filters)
    blocks = {} if block_tokens is None else {"block_tokens": block_tokens, "block_filters": block_filters}
    with jax.default_matmul_precision("highest"):  # no TF32 on a GPU, in Triton's dots or XLA's
        pooled, index = pallas_conv_max(
            jnp.asarray(x), jnp.asarray(kernel), jnp.float32, **blocks, interpret=INTERPRET if not blocks else True
        )
    conv = np_conv1d_valid(x.astype(np.float64), kernel.astype(np.float64))  # [N, L, n]
    assert pooled.shape == index.shape == (n_tokens, n_filters) and index.dtype == jnp.int32
    np.testing.assert_allclose(pooled, conv.max(axis=1), rtol=1e-5, atol=1e-5)
    # The argmax's window gives the max (ties within float32 rounding may pick either)...
    picked = np.take_along_axis(conv, np.asarray(index)[:, None, :], axis=1)[:, 0]
    np.testing.assert_allclose(picked, conv.max(axis=1), rtol=1e-5, atol=1e-5)
    # ... and where windows tie exactly, it is the first of them.
    if n_tokens > 1 and n_chars - width >= 2:
        tied = conv[1, 1:].max(axis=0) >= conv[1, 0]  # token 1's best window is one of the tied ones
        np.testing.assert_array_equal(np.asarray(index)[1][tied], 1)


def test_bfloat16_operands_close_to_float32():
    x, kernel = example(9, 10, 4, 3, 8, seed=1)
    out32, _ = pallas_conv_max(jnp.asarray(x), jnp.asarray(kernel), jnp.float32, 4, interpret=True)
    out16, _ = pallas_conv_max(jnp.asarray(x), jnp.asarray(kernel), jnp.bfloat16, 4, interpret=True)
    assert out16.dtype == jnp.float32
    scale = float(jnp.max(jnp.abs(out32)))
    np.testing.assert_allclose(out16, out32, rtol=0, atol=2e-2 * scale)
    assert float(jnp.max(jnp.abs(out16 - out32))) > 0  # bfloat16 was used


def test_argument_checks():
    x = jnp.zeros((4, 5, 3))
    with pytest.raises(ValueError, match="does not match"):
        pallas_conv_max(x, jnp.zeros((2, 4, 8)), interpret=True)
    with pytest.raises(ValueError, match="needs >= 6 characters"):
        pallas_conv_max(x, jnp.zeros((6, 3, 8)), interpret=True)
    with pytest.raises(ValueError, match="block_filters=0 must be positive"):
        pallas_conv_max(x, jnp.zeros((2, 3, 8)), block_filters=0, interpret=True)
    # Explicit blocks for the Triton lowering must be powers of two >= 16 (checked before lowering).
    with pytest.raises(ValueError, match="block_tokens=8.*power of two"):
        pallas_conv_max(x, jnp.zeros((2, 3, 8)), block_tokens=8)
    with pytest.raises(ValueError, match="block_filters=48.*power of two"):
        pallas_conv_max(x, jnp.zeros((2, 3, 8)), block_filters=48)


def test_default_block_filters():
    """The filters are padded to a multiple of the result, a power of two in [16, 128]."""
    assert default_block_filters(1024) == 128  # ELMo's widest filter count
    assert default_block_filters(32) == 32
    assert default_block_filters(96) == 32
    assert default_block_filters(7) == 16
    assert default_block_filters(130) == 16  # padded to 144


@pytest.mark.parametrize("shape,block_tokens", [((40, 50, 16, 7, 256), 32), ((1, 9, 3, 2, 5), None)])
def test_lowers_to_triton_for_gpu(shape, block_tokens) -> None:
    """The kernel lowers through Pallas's Triton lowering to a Triton module that passes MLIR
    verification and has no dot dimension below 16, without a GPU (cross-platform lowering for
    CUDA): every primitive it uses has a Triton lowering rule, and sizes it cannot take (one token,
    d = 3, 5 filters) are padded. Compiling it to PTX and its speed need a GPU."""
    n_tokens, n_chars, dim, width, n_filters = shape
    x = jax.ShapeDtypeStruct((n_tokens, n_chars, dim), jnp.float32)
    kernel = jax.ShapeDtypeStruct((width, dim, n_filters), jnp.float32)
    blocks = {} if block_tokens is None else {"block_tokens": block_tokens}
    fn = jax.jit(lambda x, k: pallas_conv_max(x, k, jnp.bfloat16, **blocks))
    with triton_checks() as checks:
        text = fn.trace(x, kernel).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 1
    assert checks == [[]]


@pytest.mark.parametrize("batch", [1, 3, 128])
@pytest.mark.parametrize("recipe", ["elmo_small", "elmo_original"])
def test_lowers_to_triton_at_the_model_shapes(recipe: str, batch: int) -> None:
    """Every filter width of the recipe's char CNN lowers to a Triton module that passes MLIR
    verification and has no dot dimension below 16, for the 2 x batch x unroll_steps tokens of a
    batch of 1 (model init), 3 (an evaluation batch) and 128, with bfloat16 operands. Inputs are
    abstract."""
    config = recipe_module(recipe).get_config()
    cnn, n_chars = config.model.char_cnn, config.data.max_chars_per_token
    x = jax.ShapeDtypeStruct((2 * batch * config.train.unroll_steps, n_chars, cnn.embed_dim), jnp.float32)
    with triton_checks() as checks:
        for width, n_filters in cnn.filters:
            kernel = jax.ShapeDtypeStruct((width, cnn.embed_dim, n_filters), jnp.float32)
            fn = jax.jit(lambda x, k: pallas_conv_max(x, k, jnp.bfloat16))
            fn.trace(x, kernel).lower(lowering_platforms=("cuda",))
    assert checks == [[]] * len(cnn.filters)
