"""bilm-tf's training update, exactly: one train step against an independent computation.

bilm-tf (bilm/training.py) takes, per GPU tower of B / G streams, the gradient of
`unroll_steps * total_loss` with the tower's own sampled-softmax candidates (one draw per
direction), averages the towers' gradients, clips them to a global norm and applies Adagrad
(initial accumulator 1.0). The reference below does exactly that, tower by tower: the tower's
loss from `model.apply` on its streams and a plain-JAX sampled softmax, its gradient by jax.grad,
then scaling, tower averaging, clipping and Adagrad in NumPy (float64). The train step runs on 1,
2 and 4 simulated CPU devices in a subprocess (the device count is fixed when JAX starts):

  XLA_FLAGS=--xla_force_host_platform_device_count=4 python tests/training/test_bilm_tf_update.py OUT.npz
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.config.recipes import recipe_module
from elmo_jax.config import schema
from elmo_jax.config.validation import validate
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.lstm import BiLSTMLayer, LSTMState
from elmo_jax.model.softmax import sample_log_uniform, unique_sampling_tries
from elmo_jax.runtime import data_parallel
from elmo_jax.runtime.data_parallel import AXIS
from elmo_jax.training.step import NegativeSampler, NegativeSetLayout, draw_groups
from elmo_jax.training.trainer import build_trainer
from tests.entry_points import script_env, xla_flags
from tests.training.helpers import random_batch, tiny_config

released = recipe_module("released")

VOCAB, BATCH, STEPS, NEGATIVES = 29, 4, 8, 8
LR = 0.2
CLIP = 1.0  # bilm-tf clips at 10; the tiny model's gradient norms (about 1.6-3 here) need less to be clipped.
# name: (devices, groups of streams drawing their own negatives, negatives_per_direction, softmax_row_updates)
CASES = {
    "one_draw": (1, 1, False, True),
    "towers_one_device": (1, 2, True, True),
    "towers_four_devices": (4, 2, True, True),  # two devices per tower
    "four_towers_two_devices_dense": (2, 4, False, False),  # two towers per device
}

pytestmark = pytest.mark.slow  # Trains real runs: the full suite only.


def case_config(groups: int, per_direction: bool, row_updates: bool):
    """The tiny model with bilm-tf's update: loss scaled by unroll_steps, Adagrad 1.0, clipping."""
    return tiny_config(**{
        "model.dropout": 0.0,
        "model.lstm.initializer": "glorot_uniform",
        "model.softmax.n_negative_samples": NEGATIVES,
        "model.softmax.streams_per_draw": BATCH // groups,
        "model.softmax.negatives_per_direction": per_direction,
        "train.batch_size": BATCH,
        "train.unroll_steps": STEPS,
        "train.loss_scale": float(STEPS),
        "train.optimizer.name": "adagrad",
        "train.optimizer.learning_rate": LR,
        "train.optimizer.initial_accumulator_value": 1.0,
        "train.clip_norm": CLIP,
        "train.softmax_row_updates": row_updates,
    })


def flat(tree) -> dict[str, np.ndarray]:
    return {jax.tree_util.keystr(k): np.asarray(v, np.float64) for k, v in jax.tree_util.tree_leaves_with_path(tree)}


# ----------------------------------------------------------------------------- the reference


def step_negatives(sampler: NegativeSampler, state) -> np.ndarray:
    """The step's candidates `[D, G, K]`, from its RNG as make_train_step derives it (the step
    folded in, then split: the first key samples)."""
    rng = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    return np.asarray(sampler.draw(jax.random.split(rng)[0])[0])


def log_expected_counts(ids: np.ndarray, vocab_size: int, num_sampled: int) -> np.ndarray:
    """log P(id among the K distinct candidates) of TF's unique log-uniform sampler."""
    p = np.log1p(1.0 / (ids + 1.0)) / np.log(vocab_size + 1.0)
    return np.log(-np.expm1(unique_sampling_tries(vocab_size, num_sampled) * np.log1p(-p)))


def tower_loss(model, params, rows: dict[str, jax.Array], candidates: jax.Array) -> jax.Array:
    """One tower's bilm-tf `total_loss`: 0.5 (forward + backward) mean sampled-softmax loss.

    rows: the tower's streams, stacked `[2, b, T, ...]`, with the targets' log expected counts
    ('log_q'); candidates: `[2, K]` ids and `[2, K]` log expected counts, per direction.
    """
    inputs = {k: rows[k] for k in ("token_ids", "char_ids", "mask")}
    _, top, _ = model.apply({"params": params}, inputs, model.initial_state(rows["targets"].shape[1]))
    w, b = params["softmax"]["W"], params["softmax"]["b"]
    losses = []
    for d in range(2):
        h, t, s = top[d].reshape(-1, top.shape[-1]), rows["targets"][d].reshape(-1), candidates["ids"][d]
        true = jnp.sum(h * w[t], axis=-1) + b[t] - rows["log_q"][d].reshape(-1)
        sampled = h @ w[s].T + b[s] - candidates["log_q"][d]
        sampled = jnp.where(t[:, None] == s[None, :], -jnp.inf, sampled)  # accidental hits removed
        logits = jnp.concatenate([true[:, None], sampled], axis=1)
        losses.append(jnp.mean(jax.nn.logsumexp(logits, axis=1) - true))
    return 0.5 * (losses[0] + losses[1])


def bilm_tf_update(model, params, batch, negatives: np.ndarray, groups: int) -> dict:
    """bilm-tf's step: tower gradients of unroll_steps x loss, averaged, clipped, Adagrad."""
    stacked = dict(batch)
    stacked["log_q"] = log_expected_counts(stacked["targets"], VOCAB, NEGATIVES)
    tower_rows = BATCH // groups
    grad_fn = jax.jit(jax.value_and_grad(lambda p, rows, cand: tower_loss(model, p, rows, cand)))
    losses, grads = [], []
    for g in range(groups):
        rows = {k: v[:, g * tower_rows:(g + 1) * tower_rows] for k, v in stacked.items()}
        ids = np.broadcast_to(negatives[:, g], (2, negatives.shape[-1]))  # one draw per direction, or shared
        loss, grad = grad_fn(params, rows, {"ids": ids, "log_q": log_expected_counts(ids, VOCAB, NEGATIVES)})
        losses.append(float(loss))
        grads.append(flat(grad))
    grad = {k: STEPS * np.mean([g[k] for g in grads], axis=0) for k in grads[0]}
    norm = np.sqrt(sum(np.sum(g * g) for g in grad.values()))
    clipped = {k: g * CLIP / max(norm, CLIP) for k, g in grad.items()}
    accumulator = {k: 1.0 + g * g for k, g in clipped.items()}
    new_params = {k: p - LR * clipped[k] / np.sqrt(accumulator[k]) for k, p in flat(params).items()}
    return {"params": new_params, "accumulator": accumulator, "grad_norm": norm, "loss": np.mean(losses)}


def run_case(n_devices: int, groups: int, per_direction: bool, row_updates: bool) -> dict:
    """One train step on `n_devices` and the reference update from the same state and batch."""
    config = case_config(groups, per_direction, row_updates)
    model = bilm_from_config(config.model, VOCAB)
    mesh = data_parallel.make_mesh(jax.devices()[:n_devices])
    state, step, _ = build_trainer(model, config, mesh, 10)
    batch = random_batch(np.random.default_rng(0), VOCAB, BATCH, STEPS, config.data.max_chars_per_token)
    negatives = step_negatives(NegativeSampler(VOCAB, config.train.batch_size, **config.model.softmax), state)
    reference = bilm_tf_update(model, jax.device_get(state.params), batch, negatives, groups)
    new_state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
    has_sums = lambda s: hasattr(s, "sum_of_squares")
    accumulators = [s for s in jax.tree.leaves(jax.device_get(new_state.opt_state), is_leaf=has_sums) if has_sums(s)]
    return {
        "reference": reference,
        "step": {
            "params": flat(jax.device_get(new_state.params)),
            "accumulator": flat(accumulators[0].sum_of_squares),
            "grad_norm": float(metrics["grad_norm"]),
            "loss": float(metrics["train_loss"]),
        },
    }


def save_cases(out: str) -> None:
    arrays = {}
    for name, case in CASES.items():
        for side, result in run_case(*case).items():
            for kind in ("params", "accumulator"):
                arrays.update({f"{name}|{side}|{kind}|{k}": v for k, v in result[kind].items()})
            arrays.update({f"{name}|{side}|{kind}": np.asarray(result[kind]) for kind in ("grad_norm", "loss")})
    np.savez(out, **arrays)


# ----------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, np.ndarray]:
    root = tmp_path_factory.mktemp("bilm_tf")
    out = str(root / "cases.npz")
    # The session's compilation cache: the two cases with two towers compile the same reference.
    env = {**script_env(str(root / "jax_cache")), "XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=4")}
    subprocess.run([sys.executable, os.path.abspath(__file__), out], check=True, env=env, timeout=600)
    return dict(np.load(out))


@pytest.mark.parametrize("name", CASES)
def test_train_step_is_bilm_tf_update(results, name):
    """New params and Adagrad accumulators equal the reference's; clipping was active."""
    side = lambda s: {k.split("|", 2)[2]: v for k, v in results.items() if k.startswith(f"{name}|{s}|")}
    step, reference = side("step"), side("reference")
    # Clipped with the scale, not without it: both the scale and the clipping change the update.
    assert float(reference["grad_norm"]) / STEPS < CLIP < float(reference["grad_norm"]) / 1.5
    np.testing.assert_allclose(step["grad_norm"], reference["grad_norm"], rtol=1e-5)
    np.testing.assert_allclose(step["loss"], reference["loss"], rtol=1e-5)
    assert step.keys() == reference.keys()
    for key in reference:
        np.testing.assert_allclose(step[key], reference[key], rtol=1e-5, atol=1e-7, err_msg=key)


def test_one_group_draws_the_single_draw_of_before():
    """One group: the candidates of one global draw from the step's sampling key."""
    sampler = NegativeSampler(VOCAB, BATCH, **tiny_config().model.softmax)
    key = jax.random.key(3)
    ids, log_expected = sampler.draw(key)
    want_ids, want_log_expected = sample_log_uniform(key, VOCAB, sampler.num_sampled, True, sampler.num_tries)
    assert ids.shape == (1, 1, sampler.num_sampled)
    np.testing.assert_array_equal(ids[0, 0], want_ids)
    np.testing.assert_array_equal(log_expected[0, 0], want_log_expected)


def test_groups_and_directions_draw_their_own_candidates():
    config = tiny_config(**{"model.softmax.streams_per_draw": 2, "model.softmax.negatives_per_direction": True,
                            "model.softmax.n_negative_samples": 40})
    ids = np.asarray(NegativeSampler(1000, 6, **config.model.softmax).draw(jax.random.key(0))[0])
    assert ids.shape == (2, 3, 40)
    sets = ids.reshape(6, 40)
    assert all(len(np.unique(s)) == 40 for s in sets)  # each a draw of distinct candidates
    assert len({tuple(np.sort(s)) for s in sets}) == 6  # no two sets share their draw


def local_layout(n_devices: int, local_rows: int, groups: int, per_direction: bool, fn):
    """`fn(layout)` on each of `n_devices` simulated devices (vmap over the 'data' axis)."""
    batch = local_rows * n_devices
    config = tiny_config(
        **{"model.softmax.streams_per_draw": batch // groups, "model.softmax.negatives_per_direction": per_direction}
    )
    sampler = NegativeSampler(VOCAB, batch, **config.model.softmax)
    return jax.vmap(lambda _: fn(NegativeSetLayout(sampler, local_rows)), axis_name=AXIS)(jnp.arange(n_devices))


@pytest.mark.parametrize("n_devices,groups", [(1, 1), (1, 3), (2, 4), (4, 2), (3, 3), (6, 3)])
@pytest.mark.parametrize("per_direction", [False, True])
def test_each_set_holds_the_tokens_of_one_group_and_direction(n_devices, groups, per_direction):
    """Every token meets the candidates of its own group of streams (and direction)."""
    batch, steps = 12, 2
    local_rows = batch // n_devices
    directions = 2 if per_direction else 1
    all_sets = np.arange(directions * groups).reshape(directions, groups, 1)  # set id as its "candidate"

    def tokens(layout):
        row = jax.lax.axis_index(AXIS) * local_rows + jnp.arange(local_rows)  # global stream index
        x = jnp.broadcast_to(row[None, :, None], (2, local_rows, steps))
        direction = jnp.broadcast_to(jnp.arange(2)[:, None, None], x.shape)
        token_sets = layout.to_sets(x // (batch // groups) + groups * direction * per_direction)
        back = layout.from_sets(layout.to_sets(x), x.shape)
        return token_sets, layout.local_sets(jnp.asarray(all_sets)), back, x

    token_sets, set_ids, back, x = local_layout(n_devices, local_rows, groups, per_direction, tokens)
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(token_sets, np.broadcast_to(set_ids, token_sets.shape))


@pytest.mark.parametrize("n_devices,local_rows,groups,message", [
    (2, 3, 3, r"streams_per_draw gives 3 groups of streams: that and the device count 2 must divide one another"),
    (4, 3, 6, r"streams_per_draw gives 6 groups of streams: that and the device count 4 must divide one another"),
])
def test_groups_that_do_not_split_the_devices_are_errors(n_devices, local_rows, groups, message):
    with pytest.raises(ValueError, match=message):
        local_layout(n_devices, local_rows, groups, False, lambda layout: layout.first)


@pytest.mark.parametrize("streams_per_draw,batch,groups", [(0, 384, 1), (128, 384, 3), (128, 128, 1), (128, 32, 1), (2, 4, 2)])
def test_draw_groups(streams_per_draw, batch, groups):
    assert draw_groups(streams_per_draw, batch) == groups


def test_streams_per_draw_that_do_not_split_the_batch_are_errors():
    config = tiny_config(**{"model.softmax.streams_per_draw": -1})
    with pytest.raises(ValueError, match=r"model.softmax.streams_per_draw=-1 is out of range"):
        validate(config)  # Where a config enters: the sampler takes its values as they are.
    with pytest.raises(ValueError, match=r"train.batch_size=320 must be a multiple of model.softmax.streams_per_draw=128"):
        draw_groups(128, 320)


# ----------------------------------------------------------------------------- LSTM initializer


def lstm_params(initializer: str, d_in: int = 48, dim: int = 64, projection_dim: int = 24) -> dict[str, np.ndarray]:
    layer = BiLSTMLayer(dim, projection_dim, initializer=initializer)
    state = LSTMState(jnp.zeros((2, 1, dim)), jnp.zeros((2, 1, projection_dim)))
    params = layer.init(jax.random.key(0), jnp.zeros((2, 1, 1, d_in)), jnp.ones((2, 1, 1)), state)["params"]
    return {k: np.asarray(v) for k, v in params.items()}


def assert_uniform(w: np.ndarray, limit: float) -> None:
    """Within [-limit, limit], reaching close to it, with the variance of U(-limit, limit)."""
    assert np.abs(w).max() <= limit
    assert np.abs(w).max() > 0.99 * limit
    np.testing.assert_allclose(w.var(), limit**2 / 3, rtol=0.05)


def test_glorot_uniform_lstm_kernels_have_tf_lstmcell_limits():
    """TF's LSTMCell kernel is [d_in + P, 4 dim] (W_input over W_hidden), its projection [dim, P]."""
    d_in, dim, projection_dim = 48, 64, 24
    params = lstm_params("glorot_uniform", d_in, dim, projection_dim)
    kernel_limit = np.sqrt(6.0 / (d_in + projection_dim + 4 * dim))
    assert_uniform(params["W_input"], kernel_limit)
    assert_uniform(params["W_hidden"], kernel_limit)
    assert_uniform(params["W_P"], np.sqrt(6.0 / (dim + projection_dim)))
    np.testing.assert_array_equal(params["B"], 0.0)


def test_uniform_lstm_kernels_are_the_default_and_unknown_names_are_errors():
    params = lstm_params("uniform")
    for name in ("W_input", "W_hidden", "W_P"):
        assert_uniform(params[name], 0.05)
    config = tiny_config()
    del config.model.lstm["initializer"]  # a config saved before the key existed, completed as saved_config does
    assert bilm_from_config(schema.with_defaults(config.to_dict()).model, VOCAB).stack_spec.initializer == "uniform"
    config = tiny_config(**{"model.lstm.initializer": "glorot_uniform"})
    assert bilm_from_config(config.model, VOCAB).stack_spec.initializer == "glorot_uniform"
    with pytest.raises(ValueError, match="model.lstm.initializer must be one of .*got 'orthogonal'"):
        lstm_params("orthogonal")


def test_released_recipe_is_bilm_tfs():
    """bin/train_elmo.py and bilm/training.py: 3 towers x 128 streams, per-tower negatives, ..."""
    config = released.released_config(dim=4096, projection_dim=512, n_highway=2)
    t, m = config.train, config.model
    assert (t.batch_size, m.softmax.streams_per_draw, m.softmax.negatives_per_direction) == (384, 128, True)
    assert (t.unroll_steps, t.loss_scale, t.clip_norm, t.num_epochs) == (20, 20.0, 10.0, 10)
    assert (t.optimizer.name, t.optimizer.learning_rate, t.optimizer.initial_accumulator_value) == ("adagrad", 0.2, 1.0)
    assert (m.dropout, m.softmax.n_negative_samples, m.softmax.unique_samples) == (0.1, 8192, True)
    assert m.lstm.initializer == "glorot_uniform"


if __name__ == "__main__":
    assert len(jax.devices()) >= 4, jax.devices()
    save_cases(sys.argv[1])
