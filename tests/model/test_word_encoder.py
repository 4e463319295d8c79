"""WordEncoder: a table lookup, initialised as configured."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.model.word_encoder import WordEncoder


def test_word_encoder_is_a_lookup() -> None:
    ids = jnp.asarray([[0, 3, 9], [9, 1, 0]], jnp.int32)
    module = WordEncoder(vocab_size=10, output_dim=4)
    params = module.init(jax.random.PRNGKey(0), ids)["params"]
    assert params["embedding"].shape == (10, 4)
    out = module.apply({"params": params}, ids)
    np.testing.assert_array_equal(out, np.asarray(params["embedding"])[np.asarray(ids)])


def test_word_encoder_init_range() -> None:
    """U(-1, 1) by default (bilm-tf), U(-r, r) with init_range r."""
    ids = jnp.zeros((1,), jnp.int32)
    default = WordEncoder(vocab_size=1000, output_dim=8).init(jax.random.PRNGKey(0), ids)["params"]["embedding"]
    narrow = WordEncoder(1000, 8, init_range=0.05).init(jax.random.PRNGKey(0), ids)["params"]["embedding"]
    assert 0.9 < np.abs(default).max() <= 1.0
    assert 0.04 < np.abs(narrow).max() <= 0.05
