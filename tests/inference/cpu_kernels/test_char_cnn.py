"""The C++ char CNN against a float64 NumPy reference and against the biLM's own (XLA) char CNN."""

from __future__ import annotations

import jax
from flax.core import FrozenDict
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.inference.cpu_kernels import CpuCharCnn
from elmo_jax.data.char_vocab import CharVocabulary
from elmo_jax.data.chars import ID_SHIFT, N_CHARACTERS, PAD_CHAR, words_to_char_ids
from elmo_jax.inference.embedder import encode_chars
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM
from tests.inference.cpu_kernels.compiler import requires_compiler

pytestmark = requires_compiler

PAD_ID = PAD_CHAR + ID_SHIFT


def reference_char_cnn(params, filters, n_highway, activation, char_ids):
    """Float64 char CNN of each word over all its character windows (`CharCNNEncoder`'s equations).

    Returns the token embeddings `[N, P]` and how many (word, filter) maxima a window of padding
    only attained (the windows the kernel does not compute)."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["encoder"])
    table = p["char_embed"].copy()
    table[0] = 0.0
    act = np.tanh if activation == "tanh" else (lambda v: np.maximum(v, 0.0))
    out, padding_maxima = [], 0
    for ids in char_ids:
        x = table[ids]  # [C, d]
        pooled = []
        for i, (width, _) in enumerate(filters):
            windows = np.stack([x[t : t + width].ravel() for t in range(len(ids) - width + 1)])
            conv = windows @ p[f"W_cnn_{i}"].reshape(windows.shape[1], -1)  # [positions, n]
            padding_only = np.array([np.all(ids[t : t + width] == PAD_ID) for t in range(len(windows))])
            padding_maxima += int(np.sum(padding_only[np.argmax(conv, axis=0)]))
            pooled.append(act(conv.max(axis=0) + p[f"b_cnn_{i}"]))
        h = np.concatenate(pooled)
        for k in range(n_highway):
            hw = p["highway"]
            gate = 1.0 / (1.0 + np.exp(-(h @ hw[f"W_carry_{k}"] + hw[f"b_carry_{k}"])))
            h = gate * np.maximum(h @ hw[f"W_transform_{k}"] + hw[f"b_transform_{k}"], 0.0) + (1.0 - gate) * h
        out.append(h @ p["W_proj"] + p["b_proj"])
    return np.stack(out), padding_maxima


def make_char_cnn(filters, n_highway, activation, proj, max_chars, embed_dim=5, seed=0, n_characters=N_CHARACTERS):
    char_cnn = FrozenDict(CHAR_CNN_DEFAULTS, filters=filters, n_highway=n_highway, activation=activation, embed_dim=embed_dim)
    model = BiLM(vocab_size=1, width=proj, contextualizer_fields=FrozenDict(dim=8, n_layers=1), char_cnn=char_cnn,
                 dropout=0.0, n_characters=n_characters)
    variables = model.init(jax.random.key(seed), {"char_ids": jnp.ones((1, max_chars), jnp.int32)},
                           method=BiLM.embed_tokens)
    rng = np.random.default_rng(seed)  # Biases and larger weights, so every part of the sum matters.
    params = jax.tree.map(lambda a: (np.asarray(a) + 0.3 * rng.normal(size=a.shape)).astype(np.float32), variables["params"])
    return model, params


def words_of(seed, n, max_chars):
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyzé")
    words = ["", "a", "<S>", "</S>", "naïve", "x" * (3 * max_chars)]  # Empty, short, boundary, multi-byte, cut.
    words += ["".join(rng.choice(letters, size=rng.integers(1, max_chars))) for _ in range(n - len(words))]
    return words


CASES = {
    # filters, highway layers, activation, projection, max characters, words
    "relu_two_highway": (((1, 5), (2, 16), (3, 33), (6, 40)), 2, "relu", 19, 20, 150),
    "tanh_no_highway": (((2, 7), (4, 32)), 0, "tanh", 70, 12, 40),
    "widest_filter_almost_max_chars": (((1, 3), (6, 17)), 1, "relu", 33, 7, 70),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_char_cnn_matches_float64_reference(case, n_threads):
    filters, n_highway, activation, proj, max_chars, n_words = CASES[case]
    model, params = make_char_cnn(filters, n_highway, activation, proj, max_chars)
    char_ids = words_to_char_ids(words_of(1, n_words, max_chars), max_chars)
    got = CpuCharCnn(model, params, n_threads=n_threads).encode(char_ids)
    want, padding_maxima = reference_char_cnn(params, filters, n_highway, activation, char_ids)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert padding_maxima > 0  # Some maxima came from the windows of padding only, computed once.


def test_matches_the_bilms_xla_char_cnn():
    """The kernel against `BiLM.embed_tokens` (XLA) on the released shapes' filter widths."""
    filters = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    model, params = make_char_cnn(filters, 1, "relu", 128, 50, embed_dim=16)
    char_ids = words_to_char_ids(words_of(2, 70, 50), 50)
    want = np.asarray(encode_chars(model, params, jnp.asarray(char_ids)))
    np.testing.assert_allclose(CpuCharCnn(model, params).encode(char_ids), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_character_vocabularys_ids_read_its_table_rows():
    """A char table of 262 + 40 rows (data/char_vocab.py): the listed characters' ids past bilm-tf's."""
    characters = CharVocabulary([chr(0x4E00 + k) for k in range(40)])
    filters = ((1, 5), (2, 16), (3, 33))
    model, params = make_char_cnn(filters, 1, "relu", 19, 8, n_characters=characters.n_ids)
    words = ["".join(chr(0x4E00 + k) for k in range(i % 7, i % 7 + i % 5 + 1)) + "丽" * (i % 2) for i in range(30)]
    char_ids = words_to_char_ids(words + ["a", "<S>"], 8, characters)
    assert char_ids.max() >= N_CHARACTERS
    cnn = CpuCharCnn(model, params)
    want, _ = reference_char_cnn(params, filters, 1, "relu", char_ids)
    np.testing.assert_allclose(cnn.encode(char_ids), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    with pytest.raises(ValueError, match=r"character ids must lie in \[0, 302\)"):
        cnn.encode(np.full((2, 8), 302, np.int32))


def test_no_words_and_bad_inputs():
    model, params = make_char_cnn(((1, 4), (3, 8)), 1, "relu", 6, 10)
    cnn = CpuCharCnn(model, params)
    assert cnn.encode(np.zeros((0, 10), np.int32)).shape == (0, 6)
    with pytest.raises(ValueError, match=r"character ids must lie in \[0, 262\)"):
        cnn.encode(np.full((2, 10), 262, np.int32))
    with pytest.raises(ValueError, match=r"words of 2 characters are narrower than the widest filter \(3\)"):
        cnn.encode(np.ones((1, 2), np.int32))
    with pytest.raises(ValueError, match="activation must be one of"):
        CpuCharCnn(model.clone(char_cnn=FrozenDict(model.char_cnn, activation="gelu")), params)


def test_avx2_build_matches_reference(avx2_build):
    """Built for CPUs without AVX-512 (8-float vectors, other register blocks): the same results."""
    filters, n_highway, activation, proj, max_chars, n_words = CASES["relu_two_highway"]
    model, params = make_char_cnn(filters, n_highway, activation, proj, max_chars)
    char_ids = words_to_char_ids(words_of(3, n_words, max_chars), max_chars)
    want, _ = reference_char_cnn(params, filters, n_highway, activation, char_ids)
    np.testing.assert_allclose(CpuCharCnn(model, params).encode(char_ids), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
