"""elmo_jax.elmo.Elmo against the embedder's layers mixed by hand; frozen vs fine-tuned biLM weights,
fixed mixes, padding, stateful calls, dropout, vocab_to_cache's word ids against char ids (ids outside
it: the char CNN or an error, never NaN), char ids outside the 262 (an error), batches without tokens,
weight files holding NaN, and the tagger of docs/elmo_in_flax.md. AllenNLP's own tests of Elmo, ported:
tests/test_elmo_allennlp.py."""

from __future__ import annotations

import functools
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import elmo_jax.elmo
from elmo_jax.elmo import CACHE_NAME, Elmo, ElmoBiLM, _check_bilm, batch_to_ids, batch_to_word_ids, with_bilm_params
from elmo_jax.inference.embedder import embedder_from_bilm_files, embedder_from_workdir
from elmo_jax.workdir.runs import load_params
from elmo_jax.model.bilm import BiLM
from tests.reference.bilm_numpy import ReferenceBiLM, random_bilm_weights, write_bilm_files
from tests.doc_blocks import code_blocks
from tests.inference.test_embedder import ATOL, RTOL, options
from tests.training.helpers import make_checkpoint_workdir

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "elmo_in_flax.md")
# An empty row, a one-token row, non-ASCII: at most 6 tokens, so every batch here is [B, <= 6, 50].
SENTENCES = [
    ["the", "cat", "sat", "on", "the", "mat"],
    [],
    ["a"],
    ["naïve", "café", "中文", "é"],
]
# vocab_to_cache: AllenNLP's padding entry at 0, every word of SENTENCES (one twice) and a word none has.
VOCAB = ("@@PADDING@@", "the", "cat", "sat", "on", "mat", "a", "naïve", "café", "中文", "é", "the", "unused")
# Per output representation: scalar parameters (4 layers) and gamma, far from the initial ones.
MIXES = [([0.3, -1.2, 0.8, 0.1], 1.7), ([-0.5, 0.4, 1.1, -2.0], 0.6)]


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    """(options path, weights path, NumPy reference) of a random 3-layer biLM with skip connections,
    LSTM 12 -> 6 (as tests/inference/test_embedder.py's `skip_bilm`)."""
    directory = tmp_path_factory.mktemp("model")
    opts = options(True)
    options_path, weights_path = str(directory / "options.json"), str(directory / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=2), options_path, weights_path)
    return options_path, weights_path, ReferenceBiLM.from_files(options_path, weights_path)


def elmo_of(files, n: int = 2, **elmo_options) -> tuple[Elmo, dict]:
    """(Elmo of the files, its biLM's weights)."""
    elmo = Elmo(files[0], files[1], n, **elmo_options)
    return elmo, elmo.bilm_params


def init(model: nn.Module, bilm_params: dict, rows: int = 1, max_chars: int = 50) -> dict:
    """Variables of `model` (an Elmo or a model holding one) with the pretrained biLM, made without
    running the biLM (a real `init` costs seconds on CPU; `init_cached` and the docs' example run
    one): the structure of `model.init` on `rows` rows, random 'params', zero LSTM states."""
    char_ids = batch_to_ids([["init"]] * rows, max_chars)
    shapes = jax.eval_shape(model.init, jax.random.key(0), char_ids)
    rng = np.random.default_rng(0)

    def fill(collection: str, s: jax.ShapeDtypeStruct) -> jax.Array:
        return jnp.asarray(rng.normal(size=s.shape) if collection == "params" else np.zeros(s.shape), s.dtype)

    variables = {col: jax.tree.map(functools.partial(fill, col), tree) for col, tree in shapes.items()}
    return with_bilm_params(variables, bilm_params)


@functools.cache
def apply_fn(module: nn.Module, deterministic: bool = True, mutable: tuple[str, ...] | bool = False):
    """`module.apply(variables, char_ids, deterministic, mutable=mutable, rngs=...)`, jitted (once
    per module and arguments)."""
    return jax.jit(functools.partial(module.apply, deterministic=deterministic, mutable=mutable))


def embedder_layers(files, sentences) -> list[np.ndarray]:
    """The embedder's stateless layers `[L + 1, n, 2P]` of each sentence."""
    return embedder_from_bilm_files(files[0], files[1], batch_size=len(sentences), stateful=False).embed_batch(
        sentences
    )


def reference_layers_with_boundaries(reference, tokens: list[str]) -> np.ndarray:
    """The NumPy reference's layers `[L + 1, n + 2, 2P]` of `<S> tokens </S>` (its `embed`, boundaries kept)."""
    state = reference.zero_state()
    x = np.stack([reference.token_embedding(w) for w in ["<S>", *tokens, "</S>"]])
    forward = reference._lstm(0, x, state)
    backward = [y[::-1] for y in reference._lstm(1, x[::-1], state)]
    return np.stack([np.concatenate([x, x], axis=-1)] + [np.concatenate(fb, axis=-1) for fb in zip(forward, backward)])


def mix(layers: np.ndarray, scalars, gamma: float) -> np.ndarray:
    """Peters et al. 2018, eq. 1 in NumPy: gamma * sum_j softmax(s)_j * layers[j]; layers `[L + 1, ..., D]`."""
    s = np.asarray(scalars, np.float64)
    weights = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    return gamma * np.tensordot(weights, np.asarray(layers, np.float64), axes=1)


def with_mixes(variables: dict, mixes=MIXES) -> dict:
    params = {
        f"scalar_mix_{k}": {"scalar_parameters": jnp.asarray(s, jnp.float32), "gamma": jnp.asarray(g, jnp.float32)}
        for k, (s, g) in enumerate(mixes)
    }
    return {**variables, "params": params}


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


class TaskModel(nn.Module):
    """A head on each of two ELMo representations: scores [batch, time, 3] and the mask."""

    elmo: Elmo

    @nn.compact
    def __call__(self, char_ids, word_ids=None, *, deterministic: bool = True):
        out = self.elmo(char_ids, word_ids, deterministic=deterministic)
        a, b = out["elmo_representations"]
        return nn.Dense(3, name="head")(a) + nn.Dense(3, name="head_b")(b * b), out["mask"]


def task_loss(model: TaskModel, variables: dict, char_ids, word_ids=None) -> jax.Array:
    scores, mask = model.apply(variables, char_ids, word_ids)
    return jnp.sum(jnp.sin(scores) * mask[..., None]) / jnp.sum(mask)


@pytest.mark.parametrize("keep", [False, True], ids=["no_boundaries", "boundaries"])
def test_outputs_are_scalar_mixes_of_the_embedder_layers(bilm, keep):
    elmo, bilm_params = elmo_of(bilm, 2, keep_sentence_boundaries=keep)
    variables = with_mixes(init(elmo, bilm_params))
    char_ids = batch_to_ids(SENTENCES)
    out = apply_fn(elmo)(variables, char_ids)
    layers = embedder_layers(bilm, SENTENCES)
    lengths = np.array([len(s) for s in SENTENCES])
    offset = 1 if keep else 0  # <S> at position 0 when kept
    steps = char_ids.shape[1] + 2 * offset
    want_mask = (np.arange(steps)[None] < (lengths + 2 * offset)[:, None]) & (lengths > 0)[:, None]
    np.testing.assert_array_equal(out["mask"], want_mask)
    assert len(out["elmo_representations"]) == 2
    for rep, (scalars, gamma) in zip(out["elmo_representations"], MIXES):
        rep = np.asarray(rep)
        assert rep.shape == (len(SENTENCES), steps, 12) and rep.dtype == np.float32
        assert np.all(rep[~want_mask] == 0.0)
        for row, n in enumerate(lengths):
            got = rep[row, offset : offset + n]
            np.testing.assert_allclose(got, mix(layers[row], scalars, gamma), rtol=RTOL, atol=ATOL, err_msg=row)
            if keep and n:  # <S> and </S> too, from the NumPy reference.
                want = mix(reference_layers_with_boundaries(bilm[2], SENTENCES[row]), scalars, gamma)
                np.testing.assert_allclose(rep[row, : n + 2], want, rtol=RTOL, atol=ATOL, err_msg=row)
    # Two mixes, two outputs.
    assert not np.allclose(out["elmo_representations"][0], out["elmo_representations"][1], atol=1e-3)


def test_layer_norm_uses_the_batch_statistics_with_boundaries(bilm):
    elmo, bilm_params = elmo_of(bilm, 1, do_layer_norm=True)
    variables = with_mixes(init(elmo, bilm_params), MIXES[:1])
    sentences = [SENTENCES[0], SENTENCES[2]]
    out = apply_fn(elmo)(variables, batch_to_ids(sentences))["elmo_representations"][0]
    full = [reference_layers_with_boundaries(bilm[2], s) for s in sentences]  # [L + 1, n + 2, 2P] each
    every = np.concatenate(full, axis=1)  # every unmasked position of the batch, <S> and </S> included
    mean = every.mean(axis=(1, 2), keepdims=True)
    std = np.sqrt(every.var(axis=(1, 2), keepdims=True) + 1e-12)
    for row, (s, layers) in enumerate(zip(sentences, full)):
        want = mix((layers - mean) / std, *MIXES[0])[1 : len(s) + 1]
        np.testing.assert_allclose(out[row, : len(s)], want, rtol=1e-4, atol=1e-5)


def test_bilm_is_frozen_by_default(bilm):
    elmo, bilm_params = elmo_of(bilm, 2)
    model = TaskModel(elmo)
    variables = init(model, bilm_params)
    assert set(variables) == {"params", "elmo_bilm"}
    assert set(variables["params"]) == {"elmo", "head", "head_b"}
    assert set(variables["params"]["elmo"]) == {"scalar_mix_0", "scalar_mix_1"}
    frozen = {"elmo_bilm": variables["elmo_bilm"]}
    assert jax.tree.structure(frozen["elmo_bilm"]["elmo"]["bilm"]) == jax.tree.structure(bilm_params)
    for got, want in zip(leaves(frozen["elmo_bilm"]["elmo"]["bilm"]), leaves(bilm_params)):
        np.testing.assert_array_equal(got, want)

    # The gradient w.r.t. 'params' reaches every mix scalar, gamma and head weight; w.r.t. the
    # frozen collection it is zero (stop_gradient).
    def loss(params, frozen):
        return task_loss(model, {"params": params, **frozen}, batch_to_ids(SENTENCES))

    grads, frozen_grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(variables["params"], frozen)
    assert jax.tree.structure(grads) == jax.tree.structure(variables["params"])
    assert all(np.any(g != 0) for g in leaves(grads))
    assert all(np.all(g == 0) for g in leaves(frozen_grads))

    # An optax step over 'params' (weight decay included) changes every mix scalar, gamma and head
    # weight; the biLM is not in 'params': the optimizer keeps no state for it and cannot reach it.
    tx = optax.adamw(0.1, weight_decay=0.5)
    opt_state = tx.init(variables["params"])
    n_params = sum(g.size for g in leaves(variables["params"]))
    assert n_params == 2 * (4 + 1) + 2 * (12 * 3 + 3)
    assert sum(np.size(s) for s in leaves(opt_state)) == 2 * n_params + 1  # mu, nu, count
    updates, _ = tx.update(grads, opt_state, variables["params"])
    new_params = optax.apply_updates(variables["params"], updates)
    assert jax.tree.structure(new_params) == jax.tree.structure(variables["params"])
    assert all(np.all(a != b) for a, b in zip(leaves(new_params), leaves(variables["params"])))


def test_requires_grad_fine_tunes_the_bilm(bilm):
    elmo, bilm_params = elmo_of(bilm, 2, requires_grad=True)
    model = TaskModel(elmo)
    variables = init(model, bilm_params)
    assert set(variables) == {"params"}
    assert set(variables["params"]["elmo"]) == {"bilm", "scalar_mix_0", "scalar_mix_1"}
    loaded = variables["params"]["elmo"]["bilm"]
    for got, want in zip(leaves(loaded), leaves(bilm_params)):
        np.testing.assert_array_equal(got, want)
    char_ids = batch_to_ids(SENTENCES)
    grads = jax.jit(jax.grad(lambda p: task_loss(model, {"params": p}, char_ids)))(variables["params"])
    bilm_grads = jax.tree_util.tree_leaves_with_path(grads["elmo"]["bilm"])
    assert len(bilm_grads) == len(jax.tree.leaves(bilm_params))
    for path, g in bilm_grads:
        assert np.all(np.isfinite(g)) and np.any(g != 0), jax.tree_util.keystr(path)
    tx = optax.sgd(0.1)
    updates, _ = tx.update(grads, tx.init(variables["params"]), variables["params"])
    new_bilm = optax.apply_updates(variables["params"], updates)["elmo"]["bilm"]
    assert all(np.any(a != b) for a, b in zip(leaves(new_bilm), leaves(loaded)))


def test_scalar_mix_parameters_fix_the_mix(bilm):
    fixed = (1.0, -0.5, 0.3, 2.0)
    elmo, bilm_params = elmo_of(bilm, 2, scalar_mix_parameters=fixed)
    variables = init(elmo, bilm_params)
    assert set(variables) == {"elmo_bilm"}  # no params at all: nothing trains
    out = apply_fn(elmo)(variables, batch_to_ids(SENTENCES))
    layers = embedder_layers(bilm, SENTENCES)
    for rep in out["elmo_representations"]:
        for row, sentence in enumerate(SENTENCES):
            want = mix(layers[row], fixed, 1.0)
            np.testing.assert_allclose(rep[row, : len(sentence)], want, rtol=RTOL, atol=ATOL, err_msg=row)
    with pytest.raises(ValueError, match="scalar_mix_parameters has 3 values, the biLM has 4 layers"):
        bad, _ = elmo_of(bilm, 1, scalar_mix_parameters=[0.0] * 3)
        jax.eval_shape(bad.init, jax.random.key(0), batch_to_ids([["a"]]))


def test_stateless_padding_and_other_rows_change_nothing(bilm):
    elmo, bilm_params = elmo_of(bilm, 1)
    variables = init(elmo, bilm_params)
    apply = apply_fn(elmo)
    s = SENTENCES[2] + ["sat"]  # 2 tokens
    alone = apply(variables, batch_to_ids([s]))["elmo_representations"][0][0]
    batched = apply(variables, batch_to_ids([SENTENCES[0], s, SENTENCES[3]]))["elmo_representations"][0]
    assert alone.shape == (2, 12) and batched.shape == (3, 6, 12)
    np.testing.assert_allclose(batched[1, :2], alone, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(batched[1, 2:], 0.0)
    # The same sentence again, in another row of the same batch shape, with other neighbours.
    last_row = apply(variables, batch_to_ids([SENTENCES[3], SENTENCES[0], s]))["elmo_representations"][0]
    np.testing.assert_allclose(last_row[2], batched[1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(last_row[1], batched[0], rtol=0, atol=1e-6)


def test_stateful_carries_states_as_the_embedder(bilm):
    """Row r's final states go to row r of the next call; a shorter call or an empty row leaves the
    states of the rows it does not fill as they were, as the stateful embedder does."""
    elmo, bilm_params = elmo_of(bilm, 1, stateful=True, scalar_mix_parameters=(0.0,) * 4)
    variables = init(elmo, bilm_params, rows=2)  # the first call has a row more: it starts from zeros
    assert variables["elmo_state"]["carried"][0].c.shape == (2, 2, 12)
    apply = apply_fn(elmo, mutable=("elmo_state",))
    embedder = embedder_from_bilm_files(*bilm[:2], batch_size=3, stateful=True)
    calls = [
        [["the", "cat", "sat"], ["a", "b"], ["one", "two", "three"]],
        [["on", "the", "mat"], ["c", "d", "e"], ["four"]],
        [["x", "y", "z"]],  # rows 1 and 2 keep their states
        [[], ["f", "g"], ["five", "six", "seven"]],  # row 0 keeps its state
        [["w", "v", "u"], ["h"], ["eight", "."]],
    ]
    state = variables["elmo_state"]
    for call, sentences in enumerate(calls):
        out, new = apply({**variables, "elmo_state": state}, batch_to_ids(sentences))
        want = embedder.embed_batch(sentences)
        for row, tokens in enumerate(sentences):
            np.testing.assert_allclose(
                out["elmo_representations"][0][row, : len(tokens)], want[row].mean(axis=0),
                rtol=RTOL, atol=ATOL, err_msg=f"call {call} row {row}",
            )
        if call == 1:  # The states matter: a fresh call differs.
            fresh = apply(variables, batch_to_ids(sentences))[0]["elmo_representations"][0]
            assert np.abs(fresh - out["elmo_representations"][0]).max() > 1e-3
        state = new["elmo_state"]
        assert state["carried"][0].c.shape == (2, 3, 12)
    with pytest.raises(ValueError, match="mutable=\\['elmo_state'\\]"):
        elmo.apply(variables, batch_to_ids(calls[0]))


def test_dropout_only_when_not_deterministic(bilm):
    elmo, bilm_params = elmo_of(bilm, 1, dropout=0.5)
    variables = init(elmo, bilm_params)
    char_ids = batch_to_ids([SENTENCES[0], SENTENCES[2] + ["sat"], SENTENCES[3]])  # as the padding test's
    clean = np.asarray(apply_fn(elmo)(variables, char_ids)["elmo_representations"][0])
    train = apply_fn(elmo, deterministic=False)
    a = np.asarray(train(variables, char_ids, rngs={"dropout": jax.random.key(1)})["elmo_representations"][0])
    b = np.asarray(train(variables, char_ids, rngs={"dropout": jax.random.key(2)})["elmo_representations"][0])
    real = clean != 0
    for dropped in (a, b):
        kept = dropped != 0
        assert np.all(~kept[~real])  # padding stays zero
        np.testing.assert_allclose(dropped[kept], clean[kept] / 0.5, rtol=1e-6)
        assert 0.35 < 1 - kept[real].mean() < 0.65
    assert np.any((a != 0) != (b != 0))


def test_workdir_matches_the_embedder_and_reads_allennlps_wider_char_ids(tmp_path):
    """A training workdir the AllenNLP way: `Elmo(None, None, K, workdir=...)`, its init holding the
    checkpoint's biLM."""
    workdir = make_checkpoint_workdir(tmp_path)  # max_chars_per_token 12
    elmo = Elmo(None, None, 1, workdir=workdir, scalar_mix_parameters=(0.0,) * 3)
    assert elmo.max_chars == 12
    sentences = [["the", "cat", "abcdefghijklmnop"], ["ab", "abcdefgh"]]
    char_ids = batch_to_ids(sentences, elmo.max_chars)
    variables = jax.jit(elmo.init)(jax.random.key(0), char_ids)
    _, checkpoint = load_params(workdir)
    checkpoint = {k: v for k, v in checkpoint.items() if k != "softmax"}
    assert jax.tree.structure(variables["elmo_bilm"]["bilm"]) == jax.tree.structure(checkpoint)
    for got, want in zip(leaves(variables["elmo_bilm"]["bilm"]), leaves(checkpoint)):
        np.testing.assert_array_equal(got, want)
    out = apply_fn(elmo)(variables, char_ids)["elmo_representations"][0]
    want = embedder_from_workdir(workdir, batch_size=2, stateful=False).embed_batch(sentences)
    for row, tokens in enumerate(sentences):
        np.testing.assert_allclose(out[row, : len(tokens)], want[row].mean(axis=0), rtol=RTOL, atol=ATOL)
    # AllenNLP's 50 chars, narrowed: the same numbers, the 16-byte word included.
    np.testing.assert_array_equal(apply_fn(elmo)(variables, batch_to_ids(sentences))["elmo_representations"][0], out)
    with pytest.raises(ValueError, match="max_chars=12"):
        elmo.apply(variables, batch_to_ids(sentences, 8))


def doc_code() -> str:
    """The one Python code block of docs/elmo_in_flax.md."""
    blocks = code_blocks(DOC)
    assert len(blocks) == 1
    return blocks[0]


def test_tagger_example_of_the_docs_learns(bilm):
    namespace: dict = {"__name__": "elmo_in_flax"}
    exec(compile(doc_code(), DOC, "exec", dont_inherit=True), namespace)
    # No dropout here: this random biLM's tokens differ by less than its noise (released models do not).
    losses = namespace["train_tagger"](*bilm[:2], dropout=0.0)
    assert len(losses) == 30 and all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0] and max(losses[-5:]) < min(losses[:5]), losses


# ----------------------------------------------------------------------------- vocab_to_cache


def init_cached(model: nn.Module, rows: int = 1) -> dict:
    """`model.init`, run (jitted): the pretrained biLM and the cache's table as init stores them."""
    return jax.jit(model.init)(jax.random.key(0), batch_to_ids([["init"]] * rows))


def apply_outputs(out, stateful: bool) -> dict:
    """The Elmo outputs of an `apply_fn` result (with the state collection when stateful)."""
    return out[0] if stateful else out


@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_vocab_to_cache_word_ids_give_the_char_ids_outputs(bilm, stateful):
    elmo, _ = elmo_of(bilm, 2, vocab_to_cache=VOCAB, stateful=stateful, keep_sentence_boundaries=True)
    variables = with_mixes(init_cached(elmo, rows=len(SENTENCES)))
    table = np.asarray(variables["elmo_bilm"][CACHE_NAME])
    assert table.shape == (len(VOCAB), 6)
    np.testing.assert_array_equal(table[0], 0.0)  # padding, never looked up
    np.testing.assert_allclose(  # the char CNN of each word, from the NumPy reference
        table[1:], [bilm[2].token_embedding(w) for w in VOCAB[1:]], rtol=RTOL, atol=ATOL
    )
    apply = apply_fn(elmo, mutable=("elmo_state",) if stateful else False)
    word_ids = batch_to_word_ids(SENTENCES, VOCAB)
    np.testing.assert_array_equal(word_ids[0], [1, 2, 3, 4, 1, 5])  # the first "the"
    np.testing.assert_array_equal(word_ids[1], 0)
    calls = [SENTENCES, SENTENCES[::-1]]  # stateful: the second call starts from the first's states
    by_chars, by_words, by_both = variables, variables, variables
    for sentences in calls:
        char_ids, word_ids = batch_to_ids(sentences), batch_to_word_ids(sentences, VOCAB)
        with_chars = apply(by_chars, char_ids)
        with_words = apply(by_words, None, word_ids)
        with_both = apply(by_both, char_ids, word_ids)  # AllenNLP's call: the table, not the char CNN
        if stateful:
            (with_chars, state_c), (with_words, state_w), (with_both, state_b) = with_chars, with_words, with_both
            by_chars, by_words, by_both = {**variables, **state_c}, {**variables, **state_w}, {**variables, **state_b}
        for out in (with_words, with_both):
            np.testing.assert_array_equal(out["mask"], with_chars["mask"])
            for got, want in zip(out["elmo_representations"], with_chars["elmo_representations"]):
                assert got.shape == want.shape == (len(SENTENCES), 8, 12)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_vocab_to_cache_uses_the_table_when_it_holds_every_word(bilm):
    """With char ids and word ids, the cached table gives the token embeddings (AllenNLP): a table
    changed by fine-tuning changes the outputs; char ids alone do not read it."""
    elmo, _ = elmo_of(bilm, 1, vocab_to_cache=VOCAB, requires_grad=True)
    variables = init_cached(elmo)
    char_ids, word_ids = batch_to_ids(SENTENCES), batch_to_word_ids(SENTENCES, VOCAB)
    apply = apply_fn(elmo)
    before = np.asarray(apply(variables, char_ids, word_ids)["elmo_representations"][0])
    params = variables["params"]
    moved = {"params": {**params, CACHE_NAME: params[CACHE_NAME] + 0.5}}
    after = np.asarray(apply(moved, char_ids, word_ids)["elmo_representations"][0])
    assert np.abs(after - before).max() > 1e-3
    by_chars = [apply(v, char_ids)["elmo_representations"][0] for v in (variables, moved)]
    np.testing.assert_array_equal(*by_chars)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_word_id_outside_vocab_to_cache_is_never_nan(bilm, jit):
    """With char ids: the batch goes through the char CNN, as AllenNLP; without: an error naming
    the id, from a host check (eager) or a debug callback when the jitted computation runs."""
    elmo, _ = elmo_of(bilm, 1, vocab_to_cache=VOCAB, scalar_mix_parameters=(0.3, -1.0, 0.5, 2.0))
    variables = init_cached(elmo)
    apply = jax.jit(elmo.apply) if jit else elmo.apply
    sentences = [["the", "dog", "sat"], ["a"]]  # "dog" is not in VOCAB
    char_ids = batch_to_ids(sentences)
    word_ids = batch_to_word_ids([["the", "cat", "sat"], ["a"]], VOCAB)
    word_ids[0, 1] = len(VOCAB)
    out = apply(variables, char_ids, word_ids)["elmo_representations"][0]
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, apply(variables, char_ids)["elmo_representations"][0], rtol=1e-6, atol=1e-7)
    for bad in (len(VOCAB), 1000, -1):
        word_ids[0, 1] = bad
        with pytest.raises(Exception if jit else ValueError, match=f"word id {bad} is outside vocab_to_cache \\(13"):
            jax.block_until_ready(apply(variables, None, word_ids))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_char_id_outside_0_to_261_is_an_error(bilm, jit):
    """Not NaN (an id past the char table reads NaN) nor padding (a token of negative ids passed
    for one): a ValueError naming the range, from a host check (eager) or a debug callback when the
    jitted computation runs, as for word ids."""
    elmo, bilm_params = elmo_of(bilm, 1)
    variables = init(elmo, bilm_params)
    apply = jax.jit(elmo.apply) if jit else elmo.apply
    char_ids = batch_to_ids([["the", "cat"]])  # 0 (padding) to 261 (a word's padding char)
    assert np.all(np.isfinite(apply(variables, char_ids)["elmo_representations"][0]))
    for bad, where in ((262, (0, 1, 2)), (300, (0, 1, 2)), (-1, (0, 1, 2)), (-5, (0, 1))):
        wrong = char_ids.copy()
        wrong[where] = bad
        with pytest.raises(Exception if jit else ValueError, match=rf"char id {bad} is outside this biLM.s 262 char ids \(0 = padding"):
            jax.block_until_ready(apply(variables, wrong))


@pytest.mark.parametrize(
    "elmo_options", [{}, {"do_layer_norm": True, "keep_sentence_boundaries": True}, {"stateful": True}],
    ids=["plain", "layer_norm_with_boundaries", "stateful"],
)
def test_a_batch_without_tokens_gives_empty_outputs(bilm, elmo_options):
    """No sentence, an empty one, or no rows in a leading dimension: the outputs of a call with
    tokens in every way but their sizes (`[..., 0, 2P]`, or `[..., 2, 2P]` zeros with the
    boundaries, and an all-false mask), as the embedder's empty input; init on no sentence makes
    the variables of any other init; a stateful Elmo's carried state stays as it was."""
    elmo, _ = elmo_of(bilm, 2, dropout=0.0, **elmo_options)
    mutable = ["elmo_state"] if elmo.stateful else False
    tokens = batch_to_ids([["the", "cat"]])
    variables = elmo.init(jax.random.key(0), batch_to_ids([]))
    assert jax.tree.structure(variables) == jax.tree.structure(jax.eval_shape(elmo.init, jax.random.key(0), tokens))
    if elmo.stateful:  # A state that is not zeros.
        variables = {**variables, **elmo.apply(variables, tokens, mutable=mutable)[1]}
    with_tokens = jax.eval_shape(functools.partial(elmo.apply, mutable=mutable), variables, tokens)
    time = 2 if elmo.keep_sentence_boundaries else 0
    for char_ids in (batch_to_ids([]), batch_to_ids([[]]), np.zeros((2, 0, 3, 50), np.int32)):
        got = elmo.apply(variables, char_ids, mutable=mutable)
        assert jax.tree.structure(got) == jax.tree.structure(with_tokens)
        out = got[0] if elmo.stateful else got
        lead = char_ids.shape[:-2] + (char_ids.shape[-2] + time,)
        for mixed in out["elmo_representations"]:
            assert mixed.shape == lead + (12,)
            np.testing.assert_array_equal(mixed, 0.0)
        assert out["mask"].shape == lead and not np.any(out["mask"])
        if elmo.stateful:
            for new, old in zip(leaves(got[1]), leaves(variables["elmo_state"])):
                np.testing.assert_array_equal(new, old)


def test_vocab_to_cache_is_frozen_by_default(bilm):
    elmo, _ = elmo_of(bilm, 2, vocab_to_cache=VOCAB)
    model = TaskModel(elmo)
    word_ids = batch_to_word_ids(SENTENCES, VOCAB)
    # A real init, from word ids alone: the table beside the pretrained biLM, every biLM weight
    # created (the char CNN embeds <S> and </S>).
    variables = jax.jit(model.init)(jax.random.key(0), None, word_ids[:1, :1])
    assert set(variables) == {"params", "elmo_bilm"}
    assert set(variables["params"]["elmo"]) == {"scalar_mix_0", "scalar_mix_1"}
    assert set(variables["elmo_bilm"]["elmo"]) == {"bilm", CACHE_NAME}
    for got, want in zip(leaves(variables["elmo_bilm"]["elmo"]["bilm"]), leaves(elmo.bilm_params)):
        np.testing.assert_array_equal(got, want)
    with_chars = init_cached(model)
    tables = [v["elmo_bilm"]["elmo"][CACHE_NAME] for v in (variables, with_chars)]
    np.testing.assert_array_equal(*tables)

    def loss(params, frozen):
        return task_loss(model, {"params": params, **frozen}, None, word_ids)

    frozen = {"elmo_bilm": variables["elmo_bilm"]}
    grads, frozen_grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(variables["params"], frozen)
    assert all(np.any(g != 0) for g in leaves(grads))
    assert all(np.all(g == 0) for g in leaves(frozen_grads))  # the table and the biLM: stop_gradient


def test_vocab_to_cache_with_requires_grad_fine_tunes_the_table(bilm, caplog):
    """As AllenNLP (its cache is an Embedding with trainable=requires_grad): the table is a parameter
    of its own; only the rows of the batch's words get a gradient (not padding's row 0)."""
    elmo, _ = elmo_of(bilm, 2, vocab_to_cache=VOCAB, requires_grad=True)
    model = TaskModel(elmo)
    with caplog.at_level("WARNING"):
        variables = init_cached(model)
    assert "fine-tuned as their own parameter" in caplog.text
    assert set(variables) == {"params"}
    assert set(variables["params"]["elmo"]) == {"bilm", CACHE_NAME, "scalar_mix_0", "scalar_mix_1"}
    initial = np.asarray(variables["params"]["elmo"][CACHE_NAME])
    sentences = [SENTENCES[0], SENTENCES[2]]  # "the cat sat on the mat", "a"
    word_ids = batch_to_word_ids(sentences, VOCAB)
    grads = jax.jit(jax.grad(lambda p: task_loss(model, {"params": p}, None, word_ids)))(variables["params"])
    rows = np.abs(np.asarray(grads["elmo"][CACHE_NAME])).sum(axis=1)
    used = {1, 2, 3, 4, 5, 6}
    assert all(rows[i] > 0 for i in used) and all(rows[i] == 0 for i in range(len(VOCAB)) if i not in used)
    tx = optax.sgd(0.1)
    updates, _ = tx.update(grads, tx.init(variables["params"]), variables["params"])
    table = optax.apply_updates(variables["params"], updates)["elmo"][CACHE_NAME]
    assert np.all(np.asarray(table)[1] != initial[1])


def test_elmo_errors(bilm, tmp_path):
    elmo, bilm_params = elmo_of(bilm, 1, vocab_to_cache=VOCAB)
    variables = init(elmo, bilm_params)
    char_ids, word_ids = batch_to_ids(SENTENCES), batch_to_word_ids(SENTENCES, VOCAB)
    with pytest.raises(ValueError, match=r"char ids \(4, 6, 50\) and word ids \(4, 5\) must have the same"):
        elmo.apply(variables, char_ids, word_ids[:, :5])
    with pytest.raises(ValueError, match="takes char ids .* and/or word ids"):
        elmo.apply(variables)
    with pytest.raises(ValueError, match=r"char ids \[..., batch, time, max_chars\], got shape \(6, 50\)"):
        elmo.apply(variables, char_ids[0])
    with pytest.raises(ValueError, match=r"word ids \[..., batch, time\], got shape \(6,\)"):
        elmo.apply(variables, None, word_ids[0])
    with pytest.raises(ValueError, match="'dog' is not in vocab_to_cache"):
        batch_to_word_ids([["the", "dog"]], VOCAB)
    with pytest.raises(ValueError, match="'@@PADDING@@' is not in vocab_to_cache"):
        batch_to_word_ids([["@@PADDING@@"]], VOCAB)
    plain, _ = elmo_of(bilm, 1)
    with pytest.raises(ValueError, match="build the Elmo with vocab_to_cache"):
        jax.eval_shape(plain.init, jax.random.key(0), None, word_ids)
    with pytest.raises(ValueError, match="options_file and weight_file, or a training workdir"):
        Elmo(bilm[0], None, 1)
    with pytest.raises(ValueError, match="options_file and weight_file, or a training workdir"):
        Elmo(*bilm[:2], 1, workdir=str(tmp_path))
    with pytest.raises(ValueError, match="missing.json: options file not found"):
        Elmo(str(tmp_path / "missing.json"), bilm[1], 1)
    with pytest.raises(ValueError, match="Elmo needs a char-CNN biLM, got model.token_encoder='word'"):
        _check_bilm(BiLM(vocab_size=5, token_encoder="word"))


def test_a_weight_file_with_nan_is_a_value_error(tmp_path):
    """Not NaN outputs: the error names the file and the dataset (elmo_jax.interop.bilm_hdf5)."""
    opts = options(True)
    paths = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    weights = random_bilm_weights(opts, seed=5)
    weights["RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"][2, 5] = np.nan
    write_bilm_files(opts, weights, *paths)
    with pytest.raises(ValueError, match=f"{paths[1]}: dataset 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0' holds non-finite"):
        Elmo(*paths, 1)  # Read when built, as AllenNLP's.


def counted(monkeypatch, name: str) -> list[tuple]:
    """The arguments of each call of `elmo_jax.elmo.<name>` from now on (the test's end)."""
    calls, original = [], getattr(elmo_jax.elmo, name)

    def count(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(elmo_jax.elmo, name, count)
    return calls


def test_an_elmo_reads_its_bilm_once_whatever_flax_does_with_it(bilm, monkeypatch):
    """Built: the files read, once. Flax's clones (init, apply, jit, eval_shape, grad, bind, copy)
    carry the same ElmoBiLM over and read nothing; vocab_to_cache's table is computed at the first
    init and kept in it."""
    reads, tables = counted(monkeypatch, "bilm_from_files"), counted(monkeypatch, "_token_table")
    elmo = Elmo(*bilm[:2], 2, vocab_to_cache=VOCAB)
    assert reads == [bilm[:2]] and not tables
    model = TaskModel(elmo)
    char_ids, word_ids = batch_to_ids(SENTENCES), batch_to_word_ids(SENTENCES, VOCAB)
    jax.eval_shape(model.init, jax.random.key(0), char_ids)
    variables = jax.jit(model.init)(jax.random.key(0), char_ids)
    assert len(tables) == 1
    np.testing.assert_array_equal(variables["elmo_bilm"]["elmo"][CACHE_NAME], elmo.bilm.token_table(VOCAB))
    jitted = jax.jit(model.apply)
    outputs = [model.apply(variables, char_ids, word_ids) for _ in range(2)]
    outputs += [jitted(variables, char_ids, word_ids), jitted(variables, None, word_ids)]
    for scores, _ in outputs[1:]:
        np.testing.assert_allclose(scores, outputs[0][0], rtol=1e-5, atol=1e-6)
    jax.jit(jax.grad(lambda p: task_loss(model, {**variables, "params": p}, char_ids)))(variables["params"])
    bound = model.bind(variables)
    for clone in (elmo.clone(), elmo.copy(), model.clone().elmo, bound.elmo):
        assert clone.bilm is elmo.bilm
    assert elmo.clone() == elmo and hash(elmo.clone()) == hash(elmo)  # Usable as a static argument.
    assert reads == [bilm[:2]] and len(tables) == 1


def compiled_programs(run) -> int:
    """How many XLA programs `run()` compiles (jax.monitoring's backend compile events)."""
    events = []

    def listen(event: str, seconds: float, **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        jax.block_until_ready(run())
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return len(events)


@pytest.mark.parametrize("stateful", [False, True])
def test_init_and_apply_without_jit_compile_the_bilm_once(bilm, stateful):
    """The docs' calls, `init` then `apply` without `jit`, each on a new shape: the biLM runs as one
    compiled program (`_elmo_layers`), which `apply` reuses, and the rest in a few (op by op, init
    compiled about 90 programs and every `apply` its LSTM scans anew)."""
    elmo = Elmo(*bilm[:2], 2, dropout=0.0, stateful=stateful)
    char_ids = batch_to_ids([["a", "new", "shape", "of", "seven", "tokens", "here"]] * 3)
    key = jax.random.key(0)
    compiled_before = elmo_jax.elmo._elmo_layers._cache_size()
    assert compiled_programs(lambda: elmo.init(key, char_ids)) <= 6
    variables = elmo.init(key, char_ids)
    mutable = ["elmo_state"] if stateful else False
    for _ in range(2):
        assert compiled_programs(lambda: elmo.apply(variables, char_ids, mutable=mutable)) == 0
    assert elmo_jax.elmo._elmo_layers._cache_size() == compiled_before + 1


class InlineElmo(nn.Module):
    """An Elmo built in a compact `__call__` (anew at each init and apply) of a shared biLM."""

    bilm: ElmoBiLM

    @nn.compact
    def __call__(self, char_ids):
        return Elmo(None, None, 1, scalar_mix_parameters=(0.0,) * 4, bilm=self.bilm)(char_ids)


def test_elmos_share_a_read_only_through_an_elmo_bilm(bilm, monkeypatch, tmp_path):
    """No state between Elmos but what they are given: two built from the same files read them
    twice (an Elmo built after the files change runs the new weights, one built before its own);
    an ElmoBiLM read once serves every Elmo given it, those built inside a parent module too."""
    reads = counted(monkeypatch, "bilm_from_files")
    first, second = Elmo(*bilm[:2], 1), Elmo(*bilm[:2], 1)
    assert len(reads) == 2 and first.bilm is not second.bilm and first != second
    shared = ElmoBiLM(*bilm[:2])
    assert repr(shared) == f"ElmoBiLM({os.path.abspath(bilm[0])!r}, {os.path.abspath(bilm[1])!r})"
    for elmo in (Elmo(None, None, 1, bilm=shared), Elmo(*bilm[:2], 2, bilm=shared)):
        assert elmo.bilm is shared and elmo.bilm_params is shared.params
    inline = InlineElmo(shared)
    variables = init(inline, shared.params)
    out = jax.jit(inline.apply)(variables, batch_to_ids(SENTENCES))
    assert len(reads) == 3
    direct = Elmo(None, None, 1, scalar_mix_parameters=(0.0,) * 4, bilm=shared)
    want = apply_fn(direct)({"elmo_bilm": variables["elmo_bilm"]["Elmo_0"]}, batch_to_ids(SENTENCES))
    np.testing.assert_array_equal(out["elmo_representations"][0], want["elmo_representations"][0])
    with pytest.raises(ValueError, match="was not read from .*/other.json'"):
        Elmo("other.json", bilm[1], 1, bilm=shared)
    with pytest.raises(ValueError, match="or a training workdir"):
        Elmo(*bilm[:2], 1, step=3, bilm=shared)
    assert len(reads) == 3

    opts = options(True)
    paths = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=5), *paths)
    before = Elmo(*paths, 1)
    old = before.bilm_params["encoder"]["char_embed"].copy()
    write_bilm_files(opts, random_bilm_weights(opts, seed=6), *paths)
    after = Elmo(*paths, 1)
    assert len(reads) == 5
    np.testing.assert_array_equal(before.bilm_params["encoder"]["char_embed"], old)
    assert not np.array_equal(after.bilm_params["encoder"]["char_embed"], old)


@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
def test_non_lstm_bilm_stateful_and_stateless_match_the_embedder(tmp_path, contextualizer):
    """An Elmo over a gated-CNN or Transformer biLM gives the embedder's layers: stateless, each
    sentence alone; stateful, row r continuing row r's stream of the calls before (the Transformer's
    rows longer than its max_window, so its windows carry the memory within a call too)."""
    overrides = {"model.contextualizer": contextualizer, f"model.{contextualizer}.n_layers": 2}
    if contextualizer == "transformer":
        overrides.update({"model.transformer.max_window": 3, "model.transformer.memory_length": 4,
                          "model.transformer.positions": "learned", "model.transformer.n_heads": 2,
                          "model.transformer.ff_dim": 16})
    workdir = make_checkpoint_workdir(tmp_path, **overrides)
    calls = [
        [["the", "cat", "sat"], ["a", "b"], ["one", "two", "three", "four"]],
        [["on", "the", "mat"], [], ["five"]],  # Row 1 keeps its state.
        [["x", "y", "z", "w", "v"], ["c", "d"]],  # Row 2 keeps its state.
    ]
    outputs = {}
    for stateful in (False, True):
        elmo = Elmo(None, None, 1, workdir=workdir, scalar_mix_parameters=(0.0,) * 3, stateful=stateful)
        embedder = embedder_from_workdir(workdir, batch_size=3, stateful=stateful)
        if stateful:  # A real init: the Transformer's memory (and its mask) or the CNN's buffers start empty.
            variables = jax.jit(elmo.init)(jax.random.key(0), batch_to_ids(calls[0], elmo.max_chars))
        else:
            variables = init(elmo, elmo.bilm_params, rows=len(calls[0]), max_chars=elmo.max_chars)
        apply = apply_fn(elmo, mutable=("elmo_state",) if stateful else False)
        for call, sentences in enumerate(calls):
            out = apply(variables, batch_to_ids(sentences, elmo.max_chars))
            if stateful:
                out, new = out
                variables = {**variables, **new}
            want = embedder.embed_batch(sentences)
            for row, tokens in enumerate(sentences):
                np.testing.assert_allclose(
                    out["elmo_representations"][0][row, : len(tokens)], want[row].mean(axis=0),
                    rtol=RTOL, atol=ATOL, err_msg=f"stateful={stateful} call {call} row {row}",
                )
            outputs[stateful, call] = np.asarray(out["elmo_representations"][0])
    assert np.abs(outputs[True, 1][0] - outputs[False, 1][0]).max() > 1e-3  # The carried state matters.
