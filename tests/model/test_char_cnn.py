"""Char CNN, highway and word encoder vs independent NumPy references (float64) from DESIGN.md."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.model.char_cnn import CharCNNEncoder, Highway
from elmo_jax.model.precision import conv1d_valid

RTOL, ATOL = 1e-5, 1e-6

EMBED_DIM = 4
FILTERS = ((1, 4), (2, 3), (3, 5))
N_HIGHWAY = 2
OUTPUT_DIM = 6
N_CHARS = 7


# ----------------------------------------------------------------------------- NumPy references


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function."""
    return 1.0 / (1.0 + np.exp(-x))


def np_relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0)."""
    return np.maximum(x, 0.0)


def np_conv1d_valid(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Loop convolution: out[n, p, :] = sum_k sum_d x[n, p + k, d] kernel[k, d, :]."""
    n, length, _ = x.shape
    width, _, channels = kernel.shape
    out = np.zeros((n, length - width + 1, channels))
    for p in range(length - width + 1):
        for k in range(width):
            out[:, p, :] += x[:, p + k, :] @ kernel[k]
    return out


def np_highway(x: np.ndarray, params: dict[str, np.ndarray], n_layers: int) -> np.ndarray:
    """t = sigmoid(x Wc + bc); x = t relu(x Wt + bt) + (1 - t) x, repeated."""
    for k in range(n_layers):
        t = np_sigmoid(x @ params[f"W_carry_{k}"] + params[f"b_carry_{k}"])
        x = t * np_relu(x @ params[f"W_transform_{k}"] + params[f"b_transform_{k}"]) + (1.0 - t) * x
    return x


def np_char_cnn(
    char_ids: np.ndarray,
    params: dict[str, Any],
    filters: Sequence[tuple[int, int]],
    n_highway: int,
    activation: str,
    project: bool = True,
) -> np.ndarray:
    """Embedding (row 0 = 0), valid conv per filter, max over positions, +bias, act, highway, proj."""
    act = {"relu": np_relu, "tanh": np.tanh}[activation]
    table = np.array(params["char_embed"], dtype=np.float64)
    table[0] = 0.0
    lead, n_chars = char_ids.shape[:-1], char_ids.shape[-1]
    x = table[char_ids.reshape(-1, n_chars)]
    pooled = []
    for i, _ in enumerate(filters):
        conv = np_conv1d_valid(x, params[f"W_cnn_{i}"])
        pooled.append(act(conv.max(axis=1) + params[f"b_cnn_{i}"]))
    h = np_highway(np.concatenate(pooled, axis=-1), params["highway"], n_highway)
    out = h @ params["W_proj"] + params["b_proj"] if project else h
    return out.reshape(*lead, -1)


# ----------------------------------------------------------------------------- helpers


def abstract_params(module: Any, *args: Any) -> Any:
    """Parameter shapes without running (and compiling) the random initialisers."""
    return jax.eval_shape(module.init, jax.random.key(0), *args)["params"]


def randomize(params: Any, seed: int, scale: float = 0.5) -> Any:
    """Same tree (arrays or shape structs), every leaf float32 N(0, scale^2) values."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda p: jnp.asarray(rng.normal(0.0, scale, p.shape), jnp.float32), params
    )


def to_f64(tree: Any) -> Any:
    """NumPy float64 copy of a tree of (float32) arrays."""
    return jax.tree_util.tree_map(lambda p: np.asarray(p, np.float64), tree)


def char_ids_example(seed: int = 0) -> np.ndarray:
    """[2, 3, N_CHARS] ids in [0, 262), with one all-zero ("no token") slot and zero padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, N_CHARACTERS, size=(2, 3, N_CHARS)).astype(np.int32)
    ids[0, 1, :] = 0  # no token
    ids[1, 2, 4:] = 0  # trailing padding inside a token
    ids[1, 0, 0] = N_CHARACTERS - 1  # last row of the table
    return ids


def make_encoder(activation: str = "relu", **fields: Any) -> CharCNNEncoder:
    """The small encoder used throughout (`fields`: others of CharCNNEncoder's)."""
    return CharCNNEncoder(
        embed_dim=EMBED_DIM, filters=FILTERS, activation=activation, n_highway=N_HIGHWAY,
        projection=fields.pop("projection", True), output_dim=OUTPUT_DIM, **fields,
    )


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("width", [1, 3, N_CHARS])
def test_conv1d_valid_matches_numpy_loop(width: int) -> None:
    rng = np.random.default_rng(width)
    x = rng.normal(size=(5, N_CHARS, 3)).astype(np.float32)
    kernel = rng.normal(size=(width, 3, 4)).astype(np.float32)
    out = conv1d_valid(jnp.asarray(x), jnp.asarray(kernel), jnp.float32)
    assert out.shape == (5, N_CHARS - width + 1, 4)
    ref = np_conv1d_valid(x.astype(np.float64), kernel.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)


def test_highway_init_and_shapes() -> None:
    x = jnp.ones((5, 6))
    params = Highway(n_layers=2).init(jax.random.key(0), x)["params"]
    assert sorted(params) == sorted(
        f"{name}_{k}" for k in range(2) for name in ("W_carry", "b_carry", "W_transform", "b_transform")
    )
    for k in range(2):
        assert params[f"W_carry_{k}"].shape == (6, 6)
        assert params[f"W_transform_{k}"].shape == (6, 6)
        np.testing.assert_array_equal(params[f"b_carry_{k}"], np.full((6,), -2.0, np.float32))
        np.testing.assert_array_equal(params[f"b_transform_{k}"], np.zeros((6,), np.float32))


@pytest.mark.parametrize("n_layers", [1, 3])
def test_highway_matches_numpy(n_layers: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 6)).astype(np.float32)
    module = Highway(n_layers=n_layers)
    params = randomize(abstract_params(module, x), seed=2, scale=0.7)
    out = module.apply({"params": params}, jnp.asarray(x))
    ref = np_highway(x.astype(np.float64), to_f64(params), n_layers)
    assert out.shape == x.shape
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
    assert not np.allclose(ref, x, atol=1e-2)  # the layer does something


def test_highway_zero_layers_is_identity() -> None:
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    variables = Highway(n_layers=0).init(jax.random.key(0), x)
    assert not variables.get("params")
    np.testing.assert_array_equal(Highway(n_layers=0).apply(variables, x), x)


def test_char_cnn_param_shapes_and_init() -> None:
    params = abstract_params(make_encoder(), jnp.asarray(char_ids_example()))
    assert params["char_embed"].shape == (N_CHARACTERS, EMBED_DIM)
    for i, (width, channels) in enumerate(FILTERS):
        assert params[f"W_cnn_{i}"].shape == (width, EMBED_DIM, channels)
        assert params[f"b_cnn_{i}"].shape == (channels,)
    n_filters = sum(c for _, c in FILTERS)
    assert params["W_proj"].shape == (n_filters, OUTPUT_DIM)
    assert params["b_proj"].shape == (OUTPUT_DIM,)
    for k in range(N_HIGHWAY):
        assert params["highway"][f"b_carry_{k}"].shape == (n_filters,)
        assert params["highway"][f"W_carry_{k}"].shape == (n_filters, n_filters)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(params))


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_cnn_matches_numpy(activation: str) -> None:
    ids = char_ids_example()
    module = make_encoder(activation)
    params = randomize(abstract_params(module, jnp.asarray(ids)), seed=3)
    # Row 0 of the stored table is nonzero here: the module must treat it as zero anyway.
    assert float(jnp.max(jnp.abs(params["char_embed"][0]))) > 0
    out = jax.jit(module.apply)({"params": params}, jnp.asarray(ids))
    ref = np_char_cnn(ids, to_f64(params), FILTERS, N_HIGHWAY, activation)
    assert out.shape == (2, 3, OUTPUT_DIM)
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
    # The "no token" slot sees an all-zero embedding, i.e. act(b_cnn) before the highway.
    p64 = to_f64(params)
    act = {"relu": np_relu, "tanh": np.tanh}[activation]
    pooled = np.concatenate([act(p64[f"b_cnn_{i}"]) for i in range(len(FILTERS))])
    no_token = np_highway(pooled, p64["highway"], N_HIGHWAY) @ p64["W_proj"] + p64["b_proj"]
    np.testing.assert_allclose(out[0, 1], no_token, rtol=RTOL, atol=ATOL)


def test_char_cnn_without_projection_is_the_highway_output() -> None:
    """projection=False (Kim et al.): no W_proj / b_proj, embeddings sum(channels) wide."""
    ids = char_ids_example()
    module = make_encoder("tanh", projection=False)
    params = randomize(abstract_params(module, jnp.asarray(ids)), seed=4)
    assert "W_proj" not in params and "b_proj" not in params
    out = jax.jit(module.apply)({"params": params}, jnp.asarray(ids))
    ref = np_char_cnn(ids, to_f64(params), FILTERS, N_HIGHWAY, "tanh", project=False)
    assert out.shape == (2, 3, sum(c for _, c in FILTERS))
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)


def test_char_cnn_rejects_unknown_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        abstract_params(make_encoder("gelu"), jnp.asarray(char_ids_example()))


def test_char_cnn_pallas_conv_kernel_same_outputs_and_gradients() -> None:
    """conv_kernel='pallas' (the fused forward kernel, interpreted on CPU) gives the XLA path's
    embeddings and parameter gradients; an unknown kernel is refused.

    To float32 rounding of each array's scale: the kernel's dots run over the char embedding
    zero-padded to 16 (`pallas_conv_pool`), which XLA:CPU sums in another order than the unpadded
    convolution, so pooled values differ in their last bit, and the sums downstream turn that into
    absolute differences of about 1e-7 of an array's largest magnitude (~10 here), in elements of
    any size."""
    ids = jnp.asarray(char_ids_example(5))
    plain = make_encoder()
    fused = make_encoder(conv_kernel="pallas")
    params = randomize(abstract_params(plain, ids), seed=6)
    readout = jax.random.normal(jax.random.key(7), (2, 3, OUTPUT_DIM))

    def loss(module, p):
        out = module.apply({"params": p}, ids)
        return jnp.sum(out * readout), out

    (_, out_x), grads_x = jax.value_and_grad(lambda p: loss(plain, p), has_aux=True)(params)
    (_, out_p), grads_p = jax.value_and_grad(lambda p: loss(fused, p), has_aux=True)(params)
    assert float(jnp.max(jnp.abs(grads_x["W_cnn_0"]))) > 0
    for got, want in zip(jax.tree.leaves((out_p, grads_p)), jax.tree.leaves((out_x, grads_x))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * max(1.0, float(jnp.max(jnp.abs(want)))))
    with pytest.raises(ValueError, match="model.conv_kernel"):
        abstract_params(make_encoder(conv_kernel="cudnn"), ids)


@pytest.fixture(scope="module")
def cnn_grads() -> dict[str, Any]:
    """jax.grad of sum(out * weights) for the tanh encoder, with everything needed to check it."""
    ids = char_ids_example()
    module = make_encoder("tanh")
    params = randomize(abstract_params(module, jnp.asarray(ids)), seed=5)
    weights = np.random.default_rng(6).normal(size=(2, 3, OUTPUT_DIM))

    def loss(p: Any) -> jax.Array:
        return jnp.sum(module.apply({"params": p}, jnp.asarray(ids)) * weights.astype(np.float32))

    grads = jax.jit(jax.grad(loss))(params)
    return {"ids": ids, "params": params, "weights": weights, "grads": grads}


def test_char_cnn_gradients_row0_zero_and_finite(cnn_grads: dict[str, Any]) -> None:
    grads, ids = cnn_grads["grads"], cnn_grads["ids"]
    for leaf in jax.tree_util.tree_leaves(grads):
        assert np.all(np.isfinite(leaf))
    g_embed = np.asarray(grads["char_embed"])
    assert 0 in ids  # the "no token" id is used, yet row 0 gets no gradient
    np.testing.assert_array_equal(g_embed[0], np.zeros(EMBED_DIM, np.float32))
    used = np.setdiff1d(np.unique(ids), [0])
    # Rows that reach a max-pool winner get a gradient (some may lose every max: zero is fine).
    assert np.mean(np.abs(g_embed[used]).sum(-1) > 0) > 0.5
    unused = np.setdiff1d(np.arange(N_CHARACTERS), ids)
    np.testing.assert_array_equal(g_embed[unused], 0.0)
    for leaf in jax.tree_util.tree_leaves(grads):
        assert np.abs(np.asarray(leaf)).max() > 0


def test_char_cnn_gradient_matches_finite_differences(cnn_grads: dict[str, Any]) -> None:
    """Directional derivative of jax.grad vs a float64 central difference of the NumPy reference."""
    ids, weights = cnn_grads["ids"], cnn_grads["weights"]
    flat, treedef = jax.tree_util.tree_flatten(to_f64(cnn_grads["params"]))
    rng = np.random.default_rng(7)
    directions = [rng.normal(size=leaf.shape) for leaf in flat]
    eps = 1e-6

    def ref_loss(step: float) -> float:
        shifted = treedef.unflatten([leaf + step * d for leaf, d in zip(flat, directions)])
        return float(np.sum(np_char_cnn(ids, shifted, FILTERS, N_HIGHWAY, "tanh") * weights))

    fd = (ref_loss(eps) - ref_loss(-eps)) / (2 * eps)
    analytic = sum(
        float(np.sum(np.asarray(g, np.float64) * d))
        for g, d in zip(jax.tree_util.tree_leaves(cnn_grads["grads"]), directions)
    )
    np.testing.assert_allclose(analytic, fd, rtol=1e-4)
