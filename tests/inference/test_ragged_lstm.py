"""The chunked, running-rows-only LSTM stacks against one padded call of the biLM's LSTMs."""

from __future__ import annotations

import jax
from flax.core import FrozenDict
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.inference.cpu_kernels import CpuLstmStack
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM
from elmo_jax.model.lstm import LSTMState
from elmo_jax.inference.ragged_lstm import CHUNK, row_bucket, run_lstms

BATCH, DIM, PROJ = 12, 10, 6


@pytest.fixture(scope="module")
def bilm():
    model = BiLM(vocab_size=1, width=PROJ, contextualizer_fields=FrozenDict(dim=DIM, n_layers=2, cell_clip=3.0, proj_clip=3.0,
                                                                    use_skip_connections=True), dropout=0.0,
                 char_cnn=FrozenDict(CHAR_CNN_DEFAULTS, filters=((1, 4), (2, 4)), embed_dim=4))
    x = jnp.zeros((2, 1, 3, PROJ))
    variables = model.init(jax.random.key(0), x, jnp.ones((2, 1, 3), bool), model.initial_state(1),
                           method=BiLM.contextualize)
    params = jax.tree.map(lambda p: p * 4.0, variables["params"])  # Large enough weights to reach the clips.
    return model, params


def random_state(seed: int) -> list[LSTMState]:
    rng = np.random.default_rng(seed)
    return [LSTMState(jnp.asarray(rng.normal(size=(2, BATCH, DIM)), jnp.float32),
                      jnp.asarray(rng.normal(size=(2, BATCH, PROJ)), jnp.float32)) for _ in range(2)]


def random_words(seed: int, n_words: int, lengths: np.ndarray, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Token embeddings of n_words words `[W, PROJ]` and each position's word `[2, n, n_steps]`
    (words repeat, as in text; positions past a row's length hold arbitrary words)."""
    rng = np.random.default_rng(seed)
    words = rng.normal(size=(n_words, PROJ)).astype(np.float32)
    return words, rng.integers(0, n_words, size=(2, len(lengths), n_steps))


def padded_reference(model, params, x, lengths, rows, state):
    """One call of the LSTM stacks over the padded rows x `[2, n, T, PROJ]` (masks freeze finished rows)."""
    mask = np.arange(x.shape[2]) < lengths[:, None]
    row_state = jax.tree.map(lambda s: s[:, rows], state)
    layers, _, new_rows = model.apply({"params": params}, jnp.asarray(x), jnp.asarray(np.stack([mask, mask])),
                                      row_state, method=BiLM.contextualize)
    new_state = jax.tree.map(lambda s, new: s.at[:, rows].set(new), state, new_rows)
    return np.stack([np.asarray(a) for a in layers[1:]]), new_state


@pytest.mark.parametrize("lengths, rows", [
    ([3 * CHUNK + 5, 2 * CHUNK, CHUNK + 1, CHUNK, CHUNK - 1, 2, 1, 1, 1], [4, 0, 11, 7, 1, 2, 9, 3, 10]),
    ([CHUNK], [5]),
    ([2 * CHUNK + 3] * BATCH, list(range(BATCH))[::-1]),
], ids=["mixed", "one_row", "full_batch"])
@pytest.mark.parametrize("engine", ["xla", "cpu"])
def test_run_lstms_equals_one_padded_call(bilm, lengths, rows, engine):
    """Jitted chunks (xla) or the C++ kernel (cpu) against the biLM's LSTMs over padded rows."""
    model, params = bilm
    lengths, rows = np.array(lengths), np.array(rows)
    words, word_ids = random_words(1, 7, lengths, lengths[0])
    state = random_state(2)
    cpu_stack = CpuLstmStack(model, params) if engine == "cpu" else None
    layers, new_state = run_lstms(model, params, words, word_ids, lengths, rows, state, cpu_stack=cpu_stack)
    want_layers, want_state = padded_reference(model, params, words[word_ids], lengths, rows, state)
    assert layers.shape[:3] == (2, 2, len(lengths)) and layers.shape[3] >= lengths[0]
    for i, n in enumerate(lengths):  # Real positions only.
        np.testing.assert_allclose(layers[:, :, i, :n], want_layers[:, :, i, :n], rtol=1e-5, atol=1e-6)
    for got, want in zip(jax.tree.leaves(new_state), jax.tree.leaves(want_state)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    untouched = np.setdiff1d(np.arange(BATCH), rows)
    for got, before in zip(jax.tree.leaves(new_state), jax.tree.leaves(state)):
        np.testing.assert_array_equal(np.asarray(got)[:, untouched], np.asarray(before)[:, untouched])


def test_longer_padding_than_needed_is_ignored(bilm):
    model, params = bilm
    lengths, rows = np.array([5, 3]), np.array([0, 1])
    words, word_ids = random_words(3, 4, lengths, 4 * CHUNK)
    state = random_state(4)
    layers, new_state = run_lstms(model, params, words, word_ids, lengths, rows, state)
    assert layers.shape[3] == CHUNK  # One chunk covers the longest row.
    want_layers, want_state = padded_reference(model, params, words[word_ids[:, :, :5]], lengths, rows, state)
    np.testing.assert_allclose(layers[:, :, 0, :5], want_layers[:, :, 0], rtol=1e-5, atol=1e-6)
    for got, want in zip(jax.tree.leaves(new_state), jax.tree.leaves(want_state)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_first_layer_gates_are_the_layers_input_matmul(bilm):
    model, params = bilm
    x = np.random.default_rng(5).normal(size=(3, PROJ)).astype(np.float32)
    gates = model.apply({"params": params}, jnp.asarray(x), method=BiLM.first_layer_gates)
    want = np.einsum("ni,dig->dng", x.astype(np.float64), np.asarray(params["lstm_0"]["W_input"], np.float64))
    np.testing.assert_allclose(np.asarray(gates), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lengths", [[2, 5], [3, 0]])
def test_unsorted_or_empty_lengths_are_refused(bilm, lengths):
    model, params = bilm
    words, word_ids = np.zeros((1, PROJ), np.float32), np.zeros((2, 2, 5), np.int64)
    with pytest.raises(ValueError, match="sorted longest first"):
        run_lstms(model, params, words, word_ids, np.array(lengths), np.array([0, 1]), random_state(0))


def test_row_bucket_has_few_sizes_and_covers_the_running_rows():
    assert [row_bucket(n, n) for n in range(1, 10)] == [1, 2, 4, 4, 8, 8, 8, 8, 16]
    assert {row_bucket(running, 64) for running in range(1, 65)} == {8, 16, 32, 64}  # At least MIN_ROWS.
    assert [row_bucket(1, n) for n in (1, 3, 5, 9)] == [1, 4, 8, 8]  # Not above n's power of two.
    assert all(running <= row_bucket(running, n) < 2 * max(running, 8) for n in range(1, 65) for running in range(1, n + 1))
