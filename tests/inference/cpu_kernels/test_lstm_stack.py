"""The C++ LSTM stack against a float64 NumPy reference and against the biLM's own (XLA) LSTMs."""

from __future__ import annotations

import jax
from flax.core import FrozenDict
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.inference.cpu_kernels import CpuLstmStack
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM
from elmo_jax.model.lstm import LSTMState
from tests.inference.cpu_kernels.compiler import requires_compiler

pytestmark = requires_compiler


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_stack(params, n_layers, cell_clip, proj_clip, residual, words, ids, lengths, state, reset, reset_state):
    """Float64 loops over layers, directions, rows and steps: the equations of lstm_recurrence.py.

    Returns the outputs, the final states and how often each clip (cell, projection) was active."""
    n_rows, n_steps = ids.shape[1:]
    proj = state[0].h.shape[-1]
    out = np.zeros((n_layers, 2, n_rows, n_steps, proj))
    final, clipped = [], [0, 0]
    for layer in range(n_layers):
        p = {k: np.asarray(v, np.float64) for k, v in params[f"lstm_{layer}"].items()}
        c_all, h_all = np.array(state[layer].c, np.float64), np.array(state[layer].h, np.float64)
        for d in range(2):
            for r in range(n_rows):
                c, h = c_all[d, r], h_all[d, r]
                for t in range(lengths[r]):
                    if reset is not None and reset[r, t]:
                        c, h = np.asarray(reset_state[layer].c, np.float64)[d, 0], np.asarray(reset_state[layer].h, np.float64)[d, 0]
                    x = (words[ids[d, r, t]] if layer == 0 else out[layer - 1, d, r, t]) @ p["W_input"][d]
                    i, j, f, o = np.split(x + p["B"][d] + h @ p["W_hidden"][d], 4)
                    c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
                    clipped[0] += int(np.sum(np.abs(c) > cell_clip)) if cell_clip else 0
                    c = np.clip(c, -cell_clip, cell_clip) if cell_clip else c
                    m = _sigmoid(o) * np.tanh(c)
                    h = m @ p["W_P"][d] if "W_P" in p else m
                    clipped[1] += int(np.sum(np.abs(h) > proj_clip)) if proj_clip and "W_P" in p else 0
                    h = np.clip(h, -proj_clip, proj_clip) if proj_clip and "W_P" in p else h
                    out[layer, d, r, t] = h + (out[layer - 1, d, r, t] if residual and layer > 0 else 0.0)
                c_all[d, r], h_all[d, r] = c, h
        final.append(LSTMState(c_all, h_all))
    return out, final, clipped


def make_bilm(dim, proj, n_layers, skip, clip, scale=4.0, cell_clip=None):
    cell_clip = clip if cell_clip is None else cell_clip
    # A clip of 0 in CASES is none, as in a config; the biLM's options spell it None.
    model = BiLM(vocab_size=1, width=proj, contextualizer_fields=FrozenDict(dim=dim, n_layers=n_layers, cell_clip=cell_clip or None, proj_clip=clip or None,
                                                                           use_skip_connections=skip), dropout=0.0,
                 char_cnn=FrozenDict(CHAR_CNN_DEFAULTS, filters=((1, 4),), embed_dim=4))
    variables = model.init(jax.random.key(0), jnp.zeros((2, 1, 2, proj)), jnp.ones((2, 1, 2), bool),
                           model.initial_state(1), method=BiLM.contextualize)
    return model, jax.tree.map(lambda p: np.asarray(p) * scale, variables["params"])  # Large enough to reach the clips.


def random_inputs(seed, model, lengths, n_words=9, with_reset=False):
    rng = np.random.default_rng(seed)
    n_rows, n_steps = len(lengths), max(lengths)
    words = rng.normal(size=(n_words, model.width)).astype(np.float32)
    ids = rng.integers(0, n_words, size=(2, n_rows, n_steps))
    state = [LSTMState(rng.normal(size=(2, n_rows, model.stack_spec.dim)).astype(np.float32),
                       rng.normal(size=(2, n_rows, model.width)).astype(np.float32))
             for _ in range(model.n_layers)]
    reset = reset_state = None
    if with_reset:
        reset = (rng.random((n_rows, n_steps)) < 0.2) & (np.arange(n_steps) < np.array(lengths)[:, None])
        reset_state = [LSTMState(rng.normal(size=(2, 1, model.stack_spec.dim)).astype(np.float32),
                                 rng.normal(size=(2, 1, model.width)).astype(np.float32))
                       for _ in range(model.n_layers)]
    return words, ids, np.array(lengths), state, reset, reset_state


CASES = {
    # dim, proj, layers, skip connections, cell clip, projection clip, lengths (rows), reset, words
    "projected_clipped": (37, 21, 2, True, 1.0, 0.5, [9, 7, 7, 3, 1], False, 9),
    "one_vector_per_row": (32, 16, 2, False, 0.0, 0.0, [6, 6], False, 9),
    "no_projection": (24, 24, 2, True, 1.0, 0.0, [5, 4, 2], False, 9),
    "three_layers_reset": (20, 12, 3, True, 1.0, 0.3, [8, 8, 5, 2], True, 9),
    "many_rows_and_words": (17, 9, 1, False, 1.0, 0.1, list(range(23, 0, -1)), True, 301),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_threads", [1, 2, 6])
def test_stack_matches_float64_reference(case, n_threads):
    dim, proj, n_layers, skip, cell_clip, clip, lengths, with_reset, n_words = CASES[case]
    model, params = make_bilm(dim, proj, n_layers, skip, clip, cell_clip=cell_clip)
    words, ids, lengths, state, reset, reset_state = random_inputs(1, model, lengths, n_words, with_reset)
    got, got_state = CpuLstmStack(model, params, n_threads=n_threads).run(words, ids, lengths, state, reset, reset_state)
    want, want_state, clipped = reference_stack(params, n_layers, cell_clip, clip, skip, words, ids, lengths, state, reset, reset_state)
    assert got.shape == want.shape and got.dtype == np.float32
    for r, n in enumerate(lengths):
        np.testing.assert_allclose(got[:, :, r, :n], want[:, :, r, :n], rtol=1e-5, atol=2e-6)
        np.testing.assert_array_equal(got[:, :, r, n:], 0.0)  # Past a row's length: untouched zeros.
    for g, w in zip(got_state, want_state):
        np.testing.assert_allclose(g.c, w.c, rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(g.h, w.h, rtol=1e-5, atol=2e-6)
    assert (clipped[0] > 0) == bool(cell_clip) and (clipped[1] > 0) == bool(clip)  # The clips were active.


def test_state_views_and_jax_arrays_are_read_as_values():
    """Rows picked out of a larger state (strided views) and JAX arrays give the same result."""
    model, params = make_bilm(16, 8, 2, True, 3.0)
    words, ids, lengths, state, _, _ = random_inputs(2, model, [4, 4, 2])
    stack = CpuLstmStack(model, params)
    want, _ = stack.run(words, ids, lengths, state)
    wide = [LSTMState(np.concatenate([s.c, s.c], axis=1), np.concatenate([s.h, s.h], axis=1)) for s in state]
    views = [LSTMState(s.c[:, :3], s.h[:, :3]) for s in wide]  # Not contiguous.
    strided = [LSTMState(np.asarray(s.c)[:, [0, 1, 2]], jnp.asarray(s.h)) for s in views]
    for inputs in (views, strided):
        got, _ = stack.run(words, ids, lengths, inputs)
        np.testing.assert_array_equal(got, want)
    assert all(np.array_equal(a.c, b.c) for a, b in zip(views, state))  # Inputs are not written to.


def test_matches_the_bilms_xla_lstms():
    """The kernel against `BiLM.contextualize_from_gates` (XLA) on the same gates, with resets."""
    model, params = make_bilm(40, 24, 2, True, 3.0, scale=2.0)
    words, ids, lengths, state, reset, reset_state = random_inputs(3, model, [7, 7, 7], with_reset=True)
    got, got_state = CpuLstmStack(model, params).run(words, ids, lengths, state, reset, reset_state)
    table = np.asarray(model.apply({"params": params}, jnp.asarray(words), method=BiLM.first_layer_gates))
    gates = jnp.asarray(np.stack([table[d][ids[d]] for d in range(2)]))  # [2, rows, T, 4 dim]
    mask = jnp.ones((2, 3, 7), bool)
    reset2 = jnp.asarray(np.stack([reset, reset]))
    layers, want_state = model.apply({"params": params}, gates, mask, state, reset2, reset_state,
                                     method=BiLM.contextualize_from_gates)
    np.testing.assert_allclose(got, np.stack([np.asarray(a) for a in layers]), rtol=1e-5, atol=2e-6)
    for g, w in zip(got_state, want_state):
        np.testing.assert_allclose(g.c, np.asarray(w.c), rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(g.h, np.asarray(w.h), rtol=1e-5, atol=2e-6)


def test_word_ids_outside_the_table_are_refused():
    model, params = make_bilm(8, 4, 1, False, 0.0)
    words, ids, lengths, state, _, _ = random_inputs(4, model, [3], n_words=5)
    ids[0, 0, 1] = 5
    with pytest.raises(ValueError, match="index the 5 rows of embeddings"):
        CpuLstmStack(model, params).run(words, ids, lengths, state)


def test_avx2_build_matches_reference(avx2_build):
    """Built for CPUs without AVX-512 (8-float vectors, other register blocks): the same results."""
    dim, proj, n_layers, skip, cell_clip, clip, lengths, with_reset, _ = CASES["three_layers_reset"]
    model, params = make_bilm(dim, proj, n_layers, skip, clip, cell_clip=cell_clip)
    inputs = random_inputs(5, model, lengths, with_reset=with_reset)
    got, _ = CpuLstmStack(model, params).run(*inputs)
    want, _, _ = reference_stack(params, n_layers, cell_clip, clip, skip, *inputs)
    for r, n in enumerate(lengths):
        np.testing.assert_allclose(got[:, :, r, :n], want[:, :, r, :n], rtol=1e-5, atol=2e-6)
