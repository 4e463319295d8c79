"""The train step: loss definition, state carrying, and the optimizer update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import optim, parallel
from elmo_jax.runtime import data_parallel
from elmo_jax.training.step import make_train_step
from elmo_jax.training.trainer import build_trainer
from tests.training.helpers import random_batch, shaped_params, tiny_config

VOCAB = 37


def _setup(random_params: bool = False, **overrides):
    """`random_params`: N(0, 0.3^2) params of the model's shapes instead of `init_params` (whose
    compiled init costs 5-15 s on CPU), for the tests that check no initial value."""
    config = tiny_config(**{"model.dropout": 0.0, **overrides})
    model = bilm_from_config(config.model, VOCAB)
    mesh = data_parallel.make_mesh(jax.devices()[:1])
    params = shaped_params(model, config.data.max_chars_per_token, config.seed, 0.3) if random_params else None
    state, step, _ = build_trainer(model, config, mesh, 100, params=params)
    return config, model, state, step, mesh


def _log_softmax_nll(hidden, w, b, targets):
    logits = hidden @ w.T + b
    logits = logits - logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits).sum(-1))
    return log_z - logits[np.arange(len(targets)), targets]


def test_full_softmax_loss_is_mean_of_directions():
    config, model, state, step, mesh = _setup(True, **{"model.softmax.sampled": False})
    batch = random_batch(np.random.default_rng(0), VOCAB, 4, 5, config.data.max_chars_per_token, mask_tail=2)
    params = jax.device_get(state.params)
    inputs = jax.tree.map(jnp.asarray, batch)
    _, top, final = jax.jit(model.apply)({"params": params}, inputs, model.initial_state(4))
    top = np.asarray(top)
    w, b = np.asarray(params["softmax"]["W"]), np.asarray(params["softmax"]["b"])
    expected = []
    for d in range(2):
        mask = batch["mask"][d].reshape(-1)
        nll = _log_softmax_nll(top[d].reshape(-1, top.shape[-1]), w, b, batch["targets"][d].reshape(-1))
        expected.append(nll[mask].mean())
    new_state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
    np.testing.assert_allclose(metrics["train_forward_loss"], expected[0], rtol=1e-5)
    np.testing.assert_allclose(metrics["train_backward_loss"], expected[1], rtol=1e-5)
    np.testing.assert_allclose(metrics["train_loss"], 0.5 * sum(expected), rtol=1e-5)
    assert float(metrics["tokens"]) == 4 * 5 - 2
    for got, want in zip(jax.device_get(new_state.carried_state), final):
        np.testing.assert_allclose(got.h, want.h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.c, want.c, rtol=1e-5, atol=1e-6)
    assert int(new_state.step) == 1


@pytest.mark.parametrize("contextualizer", ["lstm", "gated_cnn", "transformer"])
@pytest.mark.parametrize("stateful", [True, False])
def test_carried_state_changes_the_next_loss_only_when_stateful(stateful, contextualizer):
    config, model, state, step, mesh = _setup(
        True, **{"model.softmax.sampled": False, "train.stateful": stateful, "model.contextualizer": contextualizer}
    )
    rng = np.random.default_rng(1)
    chars = config.data.max_chars_per_token
    first, second = (random_batch(rng, VOCAB, 4, 5, chars) for _ in range(2))
    # Same parameters, but one run has seen `first` (non-zero carried state), one has not.
    sgd_zero = state.replace(tx=optim.optax.sgd(0.0), opt_state=optim.optax.sgd(0.0).init(state.params))
    step0 = parallel.parallel_train_step(make_train_step(model, config), mesh, sgd_zero)
    after_first, _ = step0(jax.tree.map(jnp.copy, sgd_zero), data_parallel.shard_batch(first, mesh))
    _, with_history = step0(after_first, data_parallel.shard_batch(second, mesh))
    _, fresh = step0(jax.tree.map(jnp.copy, sgd_zero), data_parallel.shard_batch(second, mesh))
    same = np.isclose(float(with_history["train_loss"]), float(fresh["train_loss"]), rtol=1e-7)
    assert same != stateful


def test_sampled_softmax_step_fits_a_fixed_batch():
    config, model, state, step, mesh = _setup(
        **{"train.stateful": False, "train.optimizer.name": "adam", "train.optimizer.learning_rate": 0.03}
    )
    batch = random_batch(np.random.default_rng(2), VOCAB, 4, 5, config.data.max_chars_per_token)
    sharded = data_parallel.shard_batch(batch, mesh)
    losses = []
    for _ in range(40):
        state, metrics = step(state, sharded)
        losses.append(float(metrics["train_loss"]))
    assert all(np.isfinite(losses))
    # Sampled losses are noisy (new negatives each step): compare averages.
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


@pytest.fixture(scope="module")
def policy_steps():
    """One compiled full-softmax step per `train.nonfinite_policy`, with its initial state on the host."""
    steps = {}
    for policy in ("stop", "skip"):
        config, _, state, step, mesh = _setup(**{"model.softmax.sampled": False, "train.nonfinite_policy": policy})
        steps[policy] = config, jax.device_get(state), step, mesh
    return steps


def _poison_chars(batch):
    """An out-of-range char id: its embedding lookup fills NaN, so the loss is NaN."""
    batch["char_ids"][0, 0, 0, 0] = 10**6
    return batch


def _overflow_gradients(state):
    """A huge softmax: the loss stays finite (~1e18), the squared gradient norm overflows."""
    params = jax.tree.map(np.copy, state.params)
    params["softmax"]["W"] = params["softmax"]["W"] * 1e22
    return state.replace(params=params)


def _leaves(state):
    return jax.tree.leaves(jax.device_get((state.params, state.opt_state, state.carried_state)))


@pytest.mark.parametrize("fault", ["nan_loss", "gradient_overflow"])
@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_nonfinite_step_is_flagged_and_skipped_under_skip_policy(policy_steps, policy, fault):
    config, state, step, mesh = policy_steps[policy]
    batch = random_batch(np.random.default_rng(3), VOCAB, 4, 5, config.data.max_chars_per_token)
    if fault == "nan_loss":
        batch = _poison_chars(batch)
    else:
        state = _overflow_gradients(state)
    before = _leaves(state)
    new_state, metrics = step(parallel.place_state(state, mesh), data_parallel.shard_batch(batch, mesh))
    loss, grad_norm = float(metrics["train_loss"]), float(metrics["grad_norm"])
    assert (np.isnan(loss) if fault == "nan_loss" else np.isfinite(loss) and np.isinf(grad_norm))
    assert float(metrics["nonfinite"]) == 1.0
    assert int(new_state.step) == 1
    unchanged = all(np.array_equal(a, b) for a, b in zip(before, _leaves(new_state)))
    assert unchanged == (policy == "skip")


def test_skip_policy_applies_finite_updates(policy_steps):
    config, state, step, mesh = policy_steps["skip"]
    batch = random_batch(np.random.default_rng(4), VOCAB, 4, 5, config.data.max_chars_per_token)
    new_state, metrics = step(parallel.place_state(state, mesh), data_parallel.shard_batch(batch, mesh))
    assert float(metrics["nonfinite"]) == 0.0
    after = jax.tree.leaves(jax.device_get(new_state.params))
    assert not any(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state.params), after))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gated_cnn_step_carries_its_buffers_and_trains_in_both_dtypes(dtype):
    """The train state holds the gated CNN's buffers `[2, B, k-1, .]` (float32 whatever the dtype);
    a step gives a finite loss and changes the convolutions' weights."""
    config, model, state, step, mesh = _setup(True, **{"model.contextualizer": "gated_cnn", "model.dtype": dtype})
    assert [s.shape for s in state.carried_state] == [(2, 4, 2, 8)] * 3
    batch = random_batch(np.random.default_rng(2), VOCAB, 4, 5, config.data.max_chars_per_token, mask_tail=2)
    before = jax.device_get(state.params["gated_cnn"]["glu_0"]["W"])
    new_state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
    assert np.isfinite(float(metrics["train_loss"])) and float(metrics["nonfinite"]) == 0.0
    assert all(s.dtype == jnp.float32 and np.any(np.asarray(s) != 0) for s in new_state.carried_state)
    assert not np.array_equal(jax.device_get(new_state.params["gated_cnn"]["glu_0"]["W"]), before)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transformer_step_carries_its_memory_and_trains_in_both_dtypes(dtype):
    """The train state holds the Transformer's memory `[2, B, L, M, P]` (float32 whatever the
    dtype) and its mask; a step gives a finite loss, fills the memory of the rows' valid positions
    and changes the attention's weights."""
    config, model, state, step, mesh = _setup(True, **{
        "model.contextualizer": "transformer", "model.dtype": dtype, "model.transformer.memory_length": 3,
        "model.transformer.max_window": 5, "model.transformer.ff_dim": 16, "model.transformer.n_heads": 2,
    })
    assert state.carried_state.inputs.shape == (2, 4, 2, 3, 8) and state.carried_state.mask.shape == (2, 4, 3)
    batch = random_batch(np.random.default_rng(2), VOCAB, 4, 5, config.data.max_chars_per_token, mask_tail=2)
    weights = lambda s: jax.device_get(s.params["transformer"]["directions"]["block_0"]["attention"]["W_query"])
    before = weights(state)
    new_state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
    assert np.isfinite(float(metrics["train_loss"])) and float(metrics["nonfinite"]) == 0.0
    memory = jax.device_get(new_state.carried_state)
    assert memory.inputs.dtype == jnp.float32 and memory.mask.all() and np.any(memory.inputs != 0)
    assert not np.array_equal(weights(new_state), before)


def test_pallas_kernels_initialise_at_batch_1_and_train_as_the_xla_ones():
    """model.lstm.kernel=pallas or pallas_cell with model.conv_kernel=pallas (Pallas's interpreter on
    CPU, Triton on a GPU): the model initialises (at batch 1, `init_params`) and a train step on a
    batch of 3 gives the loss, gradient norm and updated parameters of the XLA kernels."""
    results = {}
    for lstm_kernel in ("xla", "pallas", "pallas_cell"):
        conv_kernel = "xla" if lstm_kernel == "xla" else "pallas"
        config, _, state, step, mesh = _setup(
            **{"model.lstm.kernel": lstm_kernel, "model.conv_kernel": conv_kernel, "train.batch_size": 3}
        )
        batch = random_batch(np.random.default_rng(5), VOCAB, 3, 5, config.data.max_chars_per_token, mask_tail=2)
        new_state, metrics = step(state, data_parallel.shard_batch(batch, mesh))
        results[lstm_kernel] = (jax.device_get(metrics), jax.device_get(new_state.params))
    metrics_xla, params_xla = results.pop("xla")
    for lstm_kernel, (metrics, params) in results.items():
        assert np.isfinite(float(metrics["train_loss"])) and float(metrics["nonfinite"]) == 0.0, lstm_kernel
        for key in ("train_loss", "grad_norm"):
            np.testing.assert_allclose(metrics[key], metrics_xla[key], rtol=1e-5, err_msg=f"{lstm_kernel} {key}")
        for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(params_xla)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=lstm_kernel)
