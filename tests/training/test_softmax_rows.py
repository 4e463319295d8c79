"""Row-sparse softmax updates: the row view, and train steps equal to the dense update."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import softmax_rows
from elmo_jax.runtime import data_parallel
from elmo_jax.training.step import uses_row_updates
from elmo_jax.training.trainer import build_trainer
from tests.training.helpers import random_batch, tiny_config

VOCAB = 53


def test_touched_rows_are_the_sorted_distinct_ids_padded_out_of_range():
    ids = np.random.default_rng(0).integers(0, VOCAB, 40)
    rows = np.asarray(softmax_rows.touched_rows(jnp.asarray(ids), VOCAB))
    distinct = np.unique(ids)
    np.testing.assert_array_equal(rows[: len(distinct)], distinct)
    np.testing.assert_array_equal(rows[len(distinct):], VOCAB)
    assert rows.shape == ids.shape


def test_view_gathers_and_scatters_only_the_softmax_rows_of_params_and_adagrad_state():
    rng = np.random.default_rng(1)
    params = {
        "softmax": {"W": jnp.asarray(rng.normal(size=(VOCAB, 3))), "b": jnp.asarray(rng.normal(size=VOCAB))},
        "encoder": {"W": jnp.asarray(rng.normal(size=(VOCAB, 3)))},  # same shape, not the softmax
    }
    opt_state = optax.chain(optax.clip_by_global_norm(1.0), optax.adagrad(0.1)).init(params)
    ids = jnp.asarray([5, 2, 5, 40, 2])
    view = softmax_rows.RowView(softmax_rows.touched_rows(ids, VOCAB), VOCAB)
    np.testing.assert_array_equal(view.positions(jnp.asarray([2, 5, 40])), [0, 1, 2])

    params_view, state_view = view.gather(params), view.gather(opt_state)
    np.testing.assert_array_equal(params_view["softmax"]["W"][:3], np.asarray(params["softmax"]["W"])[[2, 5, 40]])
    assert params_view["softmax"]["b"].shape == (5,)
    assert params_view["encoder"]["W"].shape == (VOCAB, 3)  # untouched
    accumulators = [leaf for leaf in jax.tree.leaves(state_view) if leaf.ndim == 2]
    assert sorted(a.shape for a in accumulators) == [(5, 3), (VOCAB, 3)]

    changed = jax.tree.map(lambda x: x + 1.0, params_view)
    back = view.scatter(params, changed)
    w, w_back = np.asarray(params["softmax"]["W"]), np.asarray(back["softmax"]["W"])
    touched = np.isin(np.arange(VOCAB), [2, 5, 40])
    np.testing.assert_array_equal(w_back[touched], w[touched] + 1.0)  # padding rows wrote nothing
    np.testing.assert_array_equal(w_back[~touched], w[~touched])
    np.testing.assert_array_equal(back["encoder"]["W"], np.asarray(params["encoder"]["W"]) + 1.0)


def test_a_softmax_leaf_of_another_vocabulary_size_is_an_error_naming_it():
    view = softmax_rows.RowView(jnp.arange(3), VOCAB)
    with pytest.raises(ValueError, match=r"\['softmax'\]\['b'\].*expected \[53"):
        view.gather({"softmax": {"W": jnp.zeros((VOCAB, 2)), "b": jnp.zeros(7)}})


def _train(config, steps: int):
    model = bilm_from_config(config.model, VOCAB)
    mesh = data_parallel.make_mesh(jax.devices()[:1])
    state, step, _ = build_trainer(model, config, mesh, 100)
    rng = np.random.default_rng(2)
    losses = []
    for _ in range(steps):
        batch = random_batch(rng, VOCAB, config.train.batch_size, config.train.unroll_steps,
                             config.data.max_chars_per_token, mask_tail=2)
        state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
        losses.append(float(metrics["train_loss"]))
    return losses, jax.device_get(state)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, clip_norm", [("adagrad", 0.5), ("sgd", 0.0)])
def test_row_updates_train_exactly_as_the_dense_update(optimizer, clip_norm):
    runs = {}
    for rows in (True, False):
        config = tiny_config(**{
            "train.optimizer.name": optimizer, "train.clip_norm": clip_norm,
            "train.softmax_row_updates": rows, "model.softmax.n_negative_samples": 8,
        })
        assert uses_row_updates(config) == rows
        runs[rows] = _train(config, steps=4)
    (sparse_losses, sparse), (dense_losses, dense) = runs[True], runs[False]
    np.testing.assert_allclose(sparse_losses, dense_losses, rtol=1e-6)
    w0 = np.asarray(_train(tiny_config(**{"train.num_steps": 0}), 0)[1].params["softmax"]["W"])
    w_dense = np.asarray(dense.params["softmax"]["W"])
    assert 0 < np.sum(np.any(w_dense != w0, axis=1)) < VOCAB  # some rows moved, not all
    for got, want in zip(jax.tree.leaves((sparse.params, sparse.opt_state)), jax.tree.leaves((dense.params, dense.opt_state))):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_adam_and_the_full_softmax_keep_the_dense_update():
    assert not uses_row_updates(tiny_config(**{"train.optimizer.name": "adam"}))
    assert not uses_row_updates(tiny_config(**{"model.softmax.sampled": False}))
    assert uses_row_updates(tiny_config())
