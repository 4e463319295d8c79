"""The whole BiLM forward pass vs a NumPy reference built from DESIGN.md and the Flax params."""

from __future__ import annotations

import functools
from typing import Any, Callable

import flax.errors
import jax
from flax.core import FrozenDict
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.config import schema
from elmo_jax.config.overrides import apply_overrides
from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM, bilm_from_config
from elmo_jax.model.lstm import LSTMState
from tests.model.test_char_cnn import np_char_cnn
from tests.model.test_lstm import np_bilstm
from tests.training.helpers import shaped_params

RTOL, ATOL = 1e-5, 1e-6

VOCAB, B, T, C = 20, 2, 4, 6
EMBED, FILTERS, N_HIGHWAY = 4, ((1, 4), (2, 4)), 1
DIM, P, N_LAYERS = 6, 5, 2
CELL_CLIP, PROJ_CLIP = 1.0, 0.8
DROPOUT = 0.5  # every test model has dropout: train=False must ignore it


def make_model(token_encoder: str = "char_cnn", skip: bool = True, dropout: float = DROPOUT) -> BiLM:
    """The tiny biLM used throughout."""
    return BiLM(
        vocab_size=VOCAB, token_encoder=token_encoder, width=P, dropout=dropout,
        char_cnn=FrozenDict(CHAR_CNN_DEFAULTS, embed_dim=EMBED, filters=FILTERS, n_highway=N_HIGHWAY),
        contextualizer_fields=FrozenDict(dim=DIM, n_layers=N_LAYERS, cell_clip=CELL_CLIP, proj_clip=PROJ_CLIP, use_skip_connections=skip),
    )


def make_inputs(seed: int = 0, steps: int = T) -> dict[str, np.ndarray]:
    """Random token and char ids for both directions, with a mask that has holes."""
    rng = np.random.default_rng(seed)
    mask = np.ones((2, B, steps), np.int32)
    mask[0, 1, steps - 1] = 0
    mask[1, 0, 1] = 0
    return {
        "token_ids": rng.integers(0, VOCAB, (2, B, steps)).astype(np.int32),
        "char_ids": rng.integers(1, N_CHARACTERS, (2, B, steps, C)).astype(np.int32),
        "mask": mask,
    }


def random_state(seed: int) -> list[LSTMState]:
    """Nonzero carried states for every layer."""
    rng = np.random.default_rng(seed)
    return [
        LSTMState(
            rng.normal(0.0, 0.3, (2, B, DIM)).astype(np.float32),
            rng.normal(0.0, 0.3, (2, B, P)).astype(np.float32),
        )
        for _ in range(N_LAYERS)
    ]


def random_params(model: BiLM, seed: int, scale: float = 0.5) -> Any:
    """Parameters of the model's shapes (no initialiser is run), N(0, scale^2) float32: any values
    serve a test that compares two ways of computing the same thing, and `model.init`, run eagerly,
    costs 10-20 s of compilations on CPU (the Transformer's most)."""
    return shaped_params(model, C, seed, scale)


@functools.lru_cache(maxsize=None)
def jitted_apply(token_encoder: str, skip: bool) -> Callable[..., Any]:
    """One compiled apply per model variant (train is static), shared by the tests."""
    return jax.jit(make_model(token_encoder, skip).apply, static_argnames="train")


def np_bilm(
    inputs: dict[str, np.ndarray], params: Any, state: list[LSTMState], token_encoder: str, skip: bool
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """Layer 0 = token embedding; layer j = LSTM j over layer j-1 (+ layer j-1 when j >= 2 and skip)."""
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
    if token_encoder == "char_cnn":
        x = np_char_cnn(inputs["char_ids"], p["encoder"], FILTERS, N_HIGHWAY, "relu")
    else:
        x = p["encoder"]["embedding"][inputs["token_ids"]]
    layers, new_state = [x], []
    for j in range(N_LAYERS):
        c0, h0 = (np.asarray(a, np.float64) for a in state[j])
        residual = skip and j > 0
        x, c, h = np_bilstm(x, inputs["mask"], c0, h0, p[f"lstm_{j}"], CELL_CLIP, PROJ_CLIP, residual)
        layers.append(x)
        new_state.append((c, h))
    return layers, new_state


@pytest.mark.parametrize("token_encoder,skip", [("char_cnn", True), ("char_cnn", False), ("word", True)])
def test_bilm_forward_matches_numpy(token_encoder: str, skip: bool) -> None:
    model = make_model(token_encoder, skip)
    params = random_params(model, seed=1)
    inputs, state = make_inputs(), random_state(2)
    layers, top, new_state = jitted_apply(token_encoder, skip)({"params": params}, inputs, state, train=False)
    ref_layers, ref_state = np_bilm(inputs, params, state, token_encoder, skip)
    assert len(layers) == N_LAYERS + 1
    for j, (got, want) in enumerate(zip(layers, ref_layers)):
        assert got.shape == (2, B, T, P)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"layer {j}")
    np.testing.assert_array_equal(top, layers[-1])  # no dropout when train=False (rate is 0.5)
    for got, (c, h) in zip(new_state, ref_state):
        np.testing.assert_allclose(got.c, c, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(got.h, h, rtol=RTOL, atol=ATOL)
    # Without the skip, layer 2 is an LSTM output, bounded by proj_clip; with it, it goes beyond.
    beyond_clip = np.abs(np.asarray(layers[2])).max() > PROJ_CLIP + 1e-6
    assert beyond_clip == skip


def test_bilm_directions_have_separate_lstm_weights_and_shared_encoder() -> None:
    params = random_params(make_model(), seed=1)
    inputs, state = make_inputs(), random_state(2)
    # Same tokens in both directions: the shared encoder gives the same layer 0.
    same = dict(inputs, char_ids=np.broadcast_to(inputs["char_ids"][:1], inputs["char_ids"].shape).copy())
    apply = jitted_apply("char_cnn", True)
    layers, _, _ = apply({"params": params}, same, state, train=False)
    np.testing.assert_array_equal(layers[0][0], layers[0][1])
    # Changing the backward weights (index 1) of layer 1 changes only the backward outputs.
    changed = jax.tree_util.tree_map(np.copy, params)
    changed["lstm_0"]["W_hidden"][1] += 0.3
    base, _, base_state = apply({"params": params}, inputs, state, train=False)
    other, _, other_state = apply({"params": changed}, inputs, state, train=False)
    for j in (1, 2):
        np.testing.assert_array_equal(other[j][0], base[j][0])
        assert np.abs(np.asarray(other[j][1] - base[j][1])).max() > 1e-3
    np.testing.assert_array_equal(other_state[0].c[0], base_state[0].c[0])


def test_bilm_carried_state_equals_one_long_call() -> None:
    params = random_params(make_model(), seed=3)
    inputs, state = make_inputs(4, steps=2 * T), random_state(5)
    apply = jitted_apply("char_cnn", True)
    full_layers, _, full_state = apply({"params": params}, inputs, state, train=False)
    first = {k: v[:, :, :T] for k, v in inputs.items()}
    second = {k: v[:, :, T:] for k, v in inputs.items()}
    layers_a, _, state_a = apply({"params": params}, first, state, train=False)
    layers_b, _, state_b = apply({"params": params}, second, state_a, train=False)
    for j in range(N_LAYERS + 1):
        two_calls = np.concatenate([layers_a[j], layers_b[j]], axis=2)
        np.testing.assert_allclose(two_calls, full_layers[j], rtol=RTOL, atol=ATOL)
    for got, want in zip(state_b, full_state):
        np.testing.assert_allclose(got.c, want.c, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(got.h, want.h, rtol=RTOL, atol=ATOL)
    # A fresh (zero) state for the second half would differ: the carry is what makes them equal.
    layers_z, _, _ = apply({"params": params}, second, make_model().initial_state(B), train=False)
    assert np.abs(np.asarray(layers_z[1] - layers_b[1])).max() > 1e-3


def test_initial_state_is_zero_with_the_right_shapes() -> None:
    state = make_model().initial_state(B)
    assert len(state) == N_LAYERS
    for layer_state in state:
        assert layer_state.c.shape == (2, B, DIM) and layer_state.h.shape == (2, B, P)
        assert not np.any(np.asarray(layer_state.c)) and not np.any(np.asarray(layer_state.h))


def test_dropout_only_in_training() -> None:
    rate = make_model().dropout
    assert rate == 0.5
    params = random_params(make_model(), seed=6)
    inputs, state = make_inputs(), random_state(7)
    apply = jitted_apply("char_cnn", True)
    eval_layers, eval_top, _ = apply({"params": params}, inputs, state, train=False)
    ref_layers, _ = np_bilm(inputs, params, state, "char_cnn", True)
    np.testing.assert_allclose(eval_layers[-1], ref_layers[-1], rtol=RTOL, atol=ATOL)  # deterministic
    np.testing.assert_array_equal(eval_top, eval_layers[-1])

    with pytest.raises(flax.errors.InvalidRngError):
        apply({"params": params}, inputs, state, train=True)

    layers, top, _ = apply({"params": params}, inputs, state, train=True, rngs={"dropout": jax.random.key(0)})
    np.testing.assert_array_equal(layers[0], eval_layers[0])  # the token embedding itself is not dropped
    assert np.abs(np.asarray(layers[1] - eval_layers[1])).max() > 1e-3  # LSTM inputs are
    # top = inverted dropout of the last layer: zeros, or the value scaled by 1 / (1 - rate).
    top, last = np.asarray(top), np.asarray(layers[-1])
    kept = top != 0
    np.testing.assert_allclose(top[kept], last[kept] / (1.0 - rate), rtol=RTOL, atol=ATOL)
    assert 0.3 < 1.0 - kept.mean() < 0.7
    again, _, _ = apply({"params": params}, inputs, state, train=True, rngs={"dropout": jax.random.key(0)})
    np.testing.assert_array_equal(again[-1], layers[-1])
    other, _, _ = apply({"params": params}, inputs, state, train=True, rngs={"dropout": jax.random.key(1)})
    assert np.abs(np.asarray(other[-1] - layers[-1])).max() > 1e-3


def small_model_config(**overrides: Any) -> Any:
    """configs/default.py's model section with tiny shapes (and any overrides)."""
    config = schema.get_config().model
    config.char_cnn.embed_dim = EMBED
    config.char_cnn.filters = [list(f) for f in FILTERS]
    config.char_cnn.n_highway = N_HIGHWAY
    config.lstm.dim, config.width, config.lstm.n_layers = DIM, P, N_LAYERS
    config.lstm.cell_clip, config.lstm.proj_clip = CELL_CLIP, PROJ_CLIP
    config.dropout = DROPOUT
    apply_overrides(config, overrides)
    return config


def test_bilm_from_config_builds_the_same_model() -> None:
    model = bilm_from_config(small_model_config(), VOCAB)
    # Every field equal to the model whose forward pass is checked against NumPy above (the options
    # of the config hold every LSTM field; make_model's take the defaults of the others).
    assert model.clone(contextualizer_fields=FrozenDict()) == make_model().clone(contextualizer_fields=FrozenDict())
    assert model.stack_spec == make_model().stack_spec
    assert model.stack_spec != make_model(skip=False).stack_spec  # (equality does compare fields)
    shapes = jax.eval_shape(model.init, jax.random.key(0), make_inputs(), model.initial_state(B))["params"]
    assert jax.tree_util.tree_map(lambda a: a.shape, shapes) == jax.tree_util.tree_map(
        lambda a: a.shape, random_params(make_model(), seed=0)
    )


def test_bilm_from_config_conversions() -> None:
    model = bilm_from_config(
        small_model_config(**{"lstm.cell_clip": 0.0, "lstm.proj_clip": 0.0, "dtype": "bfloat16", "remat": True,
                              "token_encoder": "word", "lstm.use_skip_connections": False}),
        VOCAB,
    )
    lstm = model.stack_spec
    assert lstm.cell_clip is None and lstm.proj_clip is None  # 0 = no clipping
    assert model.dtype == jnp.bfloat16 and model.remat and model.token_encoder == "word"
    assert not lstm.use_skip_connections and model.vocab_size == VOCAB
    assert model.char_cnn["filters"] == FILTERS and model.width == P


def test_conv_block_reaches_the_encoder_and_keeps_the_outputs_and_gradients() -> None:
    """Blocked (3 tokens), whole-batch and automatic passes of the char CNN agree."""
    inputs, state = make_inputs(), random_state(1)
    params = random_params(make_model(), seed=2)
    grads, outputs = {}, {}
    for block in (3, -1, 0):
        model = bilm_from_config(small_model_config(conv_block=block), VOCAB)
        assert model.conv_block == block
        outputs[block] = model.apply({"params": params}, inputs, state)[0]

        def loss(p: Any) -> jax.Array:
            layers, _, _ = model.apply({"params": p}, inputs, state)
            return sum(jnp.sum(layer * jnp.cos(jnp.arange(layer.size).reshape(layer.shape))) for layer in layers)

        grads[block] = jax.jit(jax.grad(loss))(params)
    for block in (-1, 0):
        for a, b in zip(jax.tree.leaves((outputs[3], grads[3])), jax.tree.leaves((outputs[block], grads[block]))):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(grads[3]["encoder"]["W_cnn_1"])).max() > 0


def repeated_word_inputs(seed: int, n_words: int = 5) -> dict[str, np.ndarray]:
    """make_inputs with every token one of n_words random words."""
    inputs = make_inputs(seed)
    rng = np.random.default_rng(seed)
    words = rng.integers(1, N_CHARACTERS, (n_words, C))
    inputs["char_ids"] = words[rng.integers(0, n_words, (2, B, T))].astype(np.int32)
    return inputs


def test_each_distinct_word_once_keeps_the_outputs_and_gradients() -> None:
    """5 distinct words in 16 tokens: fractions 0.5 and 1 encode 5 rows, 0.25 (room for 4) and 0
    every token; all give the same layers and gradients."""
    inputs, state = repeated_word_inputs(3), random_state(1)
    params = random_params(make_model(), seed=2)
    results = {}
    for fraction in (0.0, 0.25, 0.5, 1.0):
        model = bilm_from_config(small_model_config(distinct_fraction=fraction), VOCAB)
        assert model.distinct_fraction == fraction

        def loss(p: Any) -> tuple[jax.Array, Any]:
            layers, _, _ = model.apply({"params": p}, inputs, state)
            weights = [jnp.cos(jnp.arange(layer.size).reshape(layer.shape)) for layer in layers]
            return sum(jnp.sum(layer * w) for layer, w in zip(layers, weights)), layers

        results[fraction] = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    for fraction in (0.25, 0.5, 1.0):
        for a, b in zip(jax.tree.leaves(results[0.0]), jax.tree.leaves(results[fraction])):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_character_vocabularys_table_and_ids_beyond_bytes() -> None:
    """n_characters rows in the char table; ids that differ by multiples of 512 only (equal in the 9
    bits of bilm-tf's ids) are different words, whether each distinct word is encoded once or not."""
    n_characters = N_CHARACTERS + 3000
    inputs = make_inputs(3)
    words = np.full((4, C), 5, np.int32)
    words[:, 1] = [700, 700 + 512, 700 + 1024, 700 + 2048]
    inputs["char_ids"] = words[np.random.default_rng(0).integers(0, 4, (2, B, T))]
    models = [bilm_from_config(small_model_config(distinct_fraction=f), VOCAB, n_characters) for f in (0.0, 1.0)]
    params = models[0].init(jax.random.key(0), inputs, models[0].initial_state(B))["params"]
    assert params["encoder"]["char_embed"].shape == (n_characters, EMBED)
    every_token, each_word_once = (m.apply({"params": params}, inputs, m.initial_state(B))[0][0] for m in models)
    np.testing.assert_allclose(each_word_once, every_token, rtol=1e-5, atol=1e-6)
    flat, ids = np.asarray(every_token).reshape(-1, P), inputs["char_ids"].reshape(-1, C)
    assert len(np.unique(flat.round(5), axis=0)) == len(np.unique(ids, axis=0)) == 4


def test_bilm_rejects_bad_token_encoder() -> None:
    # bilm_from_config builds the module lazily; the check runs in setup (first init/apply).
    with pytest.raises(ValueError, match="token_encoder"):
        model = bilm_from_config(small_model_config(token_encoder="chars"), VOCAB)
        jax.eval_shape(model.init, jax.random.key(0), make_inputs(), model.initial_state(B))


# ----------------------------------------------------------------------------- token dropout
def _first_layer_input(model: BiLM, params: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(token embeddings, the dropped-out input of the first LSTM layer) in a training pass."""
    (layers, _, _), state = model.apply(
        {"params": params}, make_inputs(), model.initial_state(B), train=True,
        rngs={"dropout": jax.random.PRNGKey(seed)}, capture_intermediates=True,
        mutable=["intermediates"],
    )
    dropped = state["intermediates"]["token_drop"]["__call__"][0]
    return np.asarray(layers[0]), np.asarray(dropped)


@pytest.mark.parametrize("token_dropout", [None, 0.0, 0.5])
def test_token_dropout_rate_applies_to_the_first_layer_input_only(token_dropout: float | None) -> None:
    model = make_model().clone(token_dropout=token_dropout)
    params = random_params(model, seed=0)
    embeddings, dropped = _first_layer_input(model, params, seed=3)
    rate = DROPOUT if token_dropout is None else token_dropout
    if rate == 0.0:
        np.testing.assert_array_equal(dropped, embeddings)
    else:  # inverted dropout: every value is 0 or x / (1 - rate), and some of each
        kept = dropped != 0
        assert 0 < kept.mean() < 1
        np.testing.assert_allclose(dropped[kept], embeddings[kept] / (1 - rate), rtol=1e-6)


def test_token_dropout_config_key() -> None:
    config = schema.get_config()
    assert bilm_from_config(config.model, VOCAB).token_dropout is None  # -1: same as model.dropout
    config.model.token_dropout = 0.0
    assert bilm_from_config(config.model, VOCAB).token_dropout == 0.0


# ----------------------------------------------------------------------------- init_range
@pytest.mark.parametrize("token_encoder", ["char_cnn", "word"])
def test_init_range_draws_every_weight_from_one_uniform(token_encoder: str) -> None:
    """Kim et al.'s initialisation: weights U(-r, r), biases as before (highway carry -2)."""
    r = 0.05
    model = make_model(token_encoder).clone(init_range=r)
    params = model.init(jax.random.PRNGKey(0), make_inputs(), model.initial_state(B))["params"]
    weights = {
        jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_flatten_with_path(params)[0]
        if not any(name in jax.tree_util.keystr(k) for name in ("'b", "'B'"))
    }
    assert len(weights) >= (12 if token_encoder == "char_cnn" else 7)  # encoder, LSTMs, softmax
    for name, w in weights.items():
        assert np.abs(w).max() <= r, name
    everything = np.concatenate([w.ravel() for w in weights.values()])
    np.testing.assert_allclose(everything.var(), r * r / 3, rtol=0.1)  # uniform's variance
    if token_encoder == "char_cnn":
        np.testing.assert_array_equal(params["encoder"]["highway"]["b_carry_0"], -2.0)


def test_init_range_zero_keeps_bilm_tf_initializers() -> None:
    model = make_model()
    params = model.init(jax.random.PRNGKey(0), make_inputs(), model.initial_state(B))["params"]
    assert np.abs(params["encoder"]["char_embed"]).max() > 0.5  # U(-1, 1)
    assert model.init_range == 0.0


def tiny_model(contextualizer: str, **overrides: Any) -> BiLM:
    config = schema.get_config()
    apply_overrides(config, {
        "model.char_cnn.embed_dim": EMBED, "model.char_cnn.filters": [list(f) for f in FILTERS],
        "model.char_cnn.n_highway": N_HIGHWAY, "model.lstm.dim": DIM, "model.width": P,
        "model.contextualizer": contextualizer, **overrides,
    })
    return bilm_from_config(config.model, VOCAB)


def abstract_params(model: BiLM) -> Any:
    """The params' shapes and dtypes (nothing initialised or compiled): enough for a method that
    refuses the model before reading them."""
    return jax.eval_shape(model.init, jax.random.key(0), make_inputs(0, steps=T), model.initial_state(B))["params"]


def test_lstm_param_tree_is_unchanged_and_gated_cnn_has_its_own() -> None:
    """'lstm' (the default) keeps the checkpoints' param names; 'gated_cnn' replaces lstm_i by
    gated_cnn/glu_i (model.gated_cnn.n_layers of them), encoder and softmax as they were."""
    inputs = make_inputs(0, steps=T)

    def tree(model: BiLM) -> dict:
        variables = jax.eval_shape(lambda: model.init(jax.random.key(0), inputs, model.initial_state(B)))
        return jax.tree.map(lambda s: s.shape, variables["params"])

    lstm = tree(tiny_model("lstm"))
    assert tree(make_model()).keys() == lstm.keys() == {"encoder", "lstm_0", "lstm_1", "softmax"}
    assert lstm["lstm_1"] == {"W_input": (2, P, 4 * DIM), "W_hidden": (2, P, 4 * DIM), "B": (2, 4 * DIM),
                              "W_P": (2, DIM, P)}
    gated = tree(tiny_model("gated_cnn", **{"model.gated_cnn.n_layers": 4, "model.gated_cnn.kernel_width": 2}))
    assert gated.keys() == {"encoder", "gated_cnn", "softmax"} and gated["encoder"] == lstm["encoder"]
    assert sorted(gated["gated_cnn"]) == ["glu_0", "glu_1", "glu_2", "glu_3"]
    assert gated["gated_cnn"]["glu_0"] == {"W": (2, 2, P, P), "V": (2, 2, P, P), "b": (2, P), "c": (2, P)}


def test_gated_cnn_bilm_carried_state_equals_one_long_call() -> None:
    """`initial_state` is the gated CNN's buffers; two windows with the carried state give the
    layers of one call over both; the layers keep the LSTM's `[2, B, T, P]` contract."""
    model = tiny_model("gated_cnn", **{"model.char_cnn.projection": False})
    inputs = make_inputs(4, steps=2 * T)
    params = model.init(jax.random.key(1), inputs, model.initial_state(B))["params"]
    apply = jax.jit(functools.partial(model.apply, train=False))
    state = model.initial_state(B)
    assert [s.shape for s in state] == [(2, B, 2, 4 + 4), (2, B, 2, P), (2, B, 2, P)]
    full, _, full_state = apply({"params": params}, inputs, state)
    first, state_a = apply({"params": params}, {k: v[:, :, :T] for k, v in inputs.items()}, state)[::2]
    second, state_b = apply({"params": params}, {k: v[:, :, T:] for k, v in inputs.items()}, state_a)[::2]
    assert [x.shape[-1] for x in full] == [8, P, P, P]
    for j in range(4):
        np.testing.assert_allclose(np.concatenate([first[j], second[j]], axis=2), full[j], rtol=RTOL, atol=ATOL)
    for got, want in zip(state_b, full_state):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_lstm_only_methods_refuse_a_gated_cnn_and_bad_contextualizer_is_an_error() -> None:
    model = tiny_model("gated_cnn")
    params = abstract_params(model)
    with pytest.raises(ValueError, match=r"^BiLM.contextualize_from_gates is for LSTM biLMs"):
        model.apply({"params": params}, jnp.zeros((2, B, T, 4 * DIM)), jnp.ones((2, B, T), bool),
                    model.initial_state(B), method=BiLM.contextualize_from_gates)
    with pytest.raises(ValueError, match="^config key model.contextualizer='rnn' is not one of 'lstm', 'gated_cnn'"):
        BiLM(vocab_size=VOCAB, contextualizer="rnn").init(jax.random.key(0), make_inputs(0, steps=T), [])


TRANSFORMER = {"model.transformer.n_heads": 5, "model.transformer.ff_dim": 12, "model.transformer.n_layers": 3}


def test_transformer_param_tree_and_state() -> None:
    """'transformer' replaces lstm_i by transformer/directions/block_i (model.transformer.n_layers,
    weights per direction unless shared), P wide; its state is the memory of every layer."""
    inputs = make_inputs(0, steps=T)
    model = tiny_model("transformer", **TRANSFORMER, **{"model.transformer.positions": "learned"})
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), inputs, model.initial_state(B)))["params"]
    assert params.keys() == {"encoder", "transformer", "softmax"}
    stack = params["transformer"]["directions"]
    assert sorted(stack) == ["block_0", "block_1", "block_2", "final_norm", "positions"]
    assert stack["positions"].shape == (2, 20 + 20, P)
    shared = tiny_model("transformer", **TRANSFORMER, **{"model.transformer.shared_directions": True})
    shared_params = jax.eval_shape(lambda: shared.init(jax.random.key(0), inputs, shared.initial_state(B)))["params"]
    assert shared_params["transformer"]["directions"]["block_0"]["feed_forward"]["W_1"].shape == (P, 12)
    state = model.initial_state(B)
    assert state.inputs.shape == (2, B, 3, 20, P) and state.mask.shape == (2, B, 20) and not state.mask.any()


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none"])
def test_transformer_bilm_runs_inputs_longer_than_max_window_as_windows(positions: str) -> None:
    """T > max_window runs as windows carrying the memory: the same layers and state as calls of
    one window each; with a memory as long as the windows and no positions (which number each
    window from the memory's length), the same as one window over everything."""
    window = {**TRANSFORMER, "model.transformer.positions": positions, "model.transformer.max_window": T,
              "model.transformer.memory_length": T}
    model = tiny_model("transformer", **window)
    inputs = make_inputs(4, steps=2 * T)
    params = random_params(model, seed=1)  # Not model.init: run eagerly, the Transformer's costs 20 s.
    apply = jax.jit(functools.partial(model.apply, {"params": params}, train=False))
    full, _, full_state = apply(inputs, model.initial_state(B))
    first, state_a = apply({k: v[:, :, :T] for k, v in inputs.items()}, model.initial_state(B))[::2]
    second, state_b = apply({k: v[:, :, T:] for k, v in inputs.items()}, state_a)[::2]
    assert [x.shape for x in full] == [(2, B, 2 * T, P)] * 4
    for j in range(4):
        np.testing.assert_allclose(np.concatenate([first[j], second[j]], axis=2), full[j], rtol=RTOL, atol=ATOL)
    jax.tree.map(lambda got, want: np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL), state_b, full_state)
    if positions == "none":
        wide = tiny_model("transformer", **{**window, "model.transformer.max_window": 2 * T})
        one_window = wide.apply({"params": params}, inputs, wide.initial_state(B))[0]
        for j in range(4):
            np.testing.assert_allclose(one_window[j], full[j], rtol=1e-4, atol=1e-5)


def test_lstm_only_methods_refuse_a_transformer() -> None:
    model = tiny_model("transformer", **TRANSFORMER)
    params = abstract_params(model)
    with pytest.raises(ValueError, match="LSTM biLMs; this one's contextualizer is 'transformer'"):
        model.apply({"params": params}, jnp.zeros((P,)), method=BiLM.first_layer_gates)


WINDOW = 3  # max_window of the windowed-Transformer tests below.


def windowed_transformer(positions: str = "learned", memory_length: int = 2, dropout: float = 0.1) -> BiLM:
    """A tiny Transformer biLM whose windows are WINDOW positions long, of 2 blocks (as many as it takes
    for each layer to carry a memory of its own: each block costs seconds of compilation)."""
    return tiny_model("transformer", **{**TRANSFORMER, "model.transformer.n_layers": 2}, **{
        "model.transformer.positions": positions, "model.transformer.max_window": WINDOW,
        "model.transformer.memory_length": memory_length, "model.dropout": dropout, "model.token_dropout": dropout,
    })


def holey_inputs(seed: int, steps: int) -> dict[str, np.ndarray]:
    """`make_inputs` with a whole window of padding in row 0 of the forward stream (its memory
    must pass over it unchanged) and a stream that ends early in row 1 of the backward one."""
    inputs = make_inputs(seed, steps)
    inputs["mask"][0, 0, WINDOW : 2 * WINDOW] = 0
    inputs["mask"][1, 1, steps - WINDOW - 1 :] = 0
    return inputs


def one_call_per_window(apply: Callable[..., Any], params: Any, inputs: dict, state: Any) -> tuple[list, Any]:
    """The layers and state of one `apply(params, inputs, state)` per window of WINDOW positions
    in turn, each from the state the one before ended with: the windows as separate programs."""
    parts = []
    for start in range(0, inputs["mask"].shape[2], WINDOW):
        layers, _, state = apply(params, {k: v[:, :, start : start + WINDOW] for k, v in inputs.items()}, state)
        parts.append(layers)
    return [jnp.concatenate(layer, axis=2) for layer in zip(*parts)], state


@pytest.mark.parametrize("positions,memory_length", [("learned", 2), ("sinusoidal", 5), ("none", 0)])
def test_transformer_windows_in_one_call_equal_one_call_per_window(positions: str, memory_length: int) -> None:
    """Several windows and a last partial one in one call give each window's layers and the
    carried memory of one call per window, also when the next call continues from that memory."""
    model = windowed_transformer(positions, memory_length)
    params = random_params(model, seed=1)
    apply = jax.jit(lambda params, inputs, state: model.apply({"params": params}, inputs, state))
    state = want_state = model.initial_state(B)
    for seed, steps in ((4, 4 * WINDOW + 2), (5, 2 * WINDOW + 1), (6, 3 * WINDOW)):
        inputs = holey_inputs(seed, steps)
        layers, _, state = apply(params, inputs, state)
        want, want_state = one_call_per_window(apply, params, inputs, want_state)
        assert len(layers) == len(want) == 3  # The token layer and 2 blocks.
        for j in range(len(want)):
            np.testing.assert_allclose(layers[j], want[j], rtol=RTOL, atol=1e-5, err_msg=f"{steps} steps, layer {j}")
        jax.tree.map(lambda got, expected: np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-5),
                     state, want_state)
    assert np.asarray(state.mask).sum() == 2 * B * memory_length


def test_transformer_windows_in_one_call_train_like_one_call_per_window() -> None:
    """Training's path: without dropout, the gradient of windows in one call is that of one call
    per window; with dropout, each window draws its own mask."""
    model = windowed_transformer(dropout=0.0)
    inputs = holey_inputs(7, 2 * WINDOW + 1)  # A whole window, one of padding (row 0), a partial one.
    params = random_params(model, seed=1)

    def apply(params: Any, inputs: dict, state: Any) -> tuple:
        return model.apply({"params": params}, inputs, state, train=True)

    @functools.partial(jax.jit, static_argnums=1)
    @functools.partial(jax.grad)
    def gradient(params: Any, one_call: bool) -> jax.Array:
        state = model.initial_state(B)
        layers = apply(params, inputs, state)[0] if one_call else one_call_per_window(apply, params, inputs, state)[0]
        return sum(jnp.sum(jnp.sin(layer)) for layer in layers[1:])

    got, want = gradient(params, True), gradient(params, False)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), got, want)
    dropped = windowed_transformer(memory_length=0, dropout=0.5)  # Windows independent of each other.
    same = {k: np.concatenate([v[:, :, :WINDOW]] * 3, axis=2) for k, v in make_inputs(8, WINDOW).items()}
    dropped_params = random_params(dropped, seed=1)
    top = jax.jit(functools.partial(dropped.apply, train=True))(  # Jitted: eagerly, seconds more.
        {"params": dropped_params}, same, dropped.initial_state(B), rngs={"dropout": jax.random.key(2)})[1]
    first, second = np.asarray(top[:, :, :WINDOW]), np.asarray(top[:, :, WINDOW : 2 * WINDOW])
    assert np.abs(first - second).max() > 1e-3


def test_transformer_program_does_not_grow_with_the_windows() -> None:
    """Long inputs compile one loop over the windows, not a copy of the stack per window: the
    contextualizer's program of 40 windows is as long as that of 4 (with and without a last
    partial window)."""
    model = windowed_transformer()
    params = random_params(model, seed=1)

    def program_lines(steps: int) -> int:
        x, mask = jnp.zeros((2, B, steps, P)), jnp.ones((2, B, steps), bool)
        contextualize = functools.partial(model.apply, {"params": params}, method=BiLM.contextualize)
        return len(str(jax.make_jaxpr(contextualize)(x, mask, model.initial_state(B))).splitlines())

    assert program_lines(40 * WINDOW) == program_lines(4 * WINDOW)
    assert program_lines(40 * WINDOW + 1) == program_lines(4 * WINDOW + 1)
