"""The probes: NumPy references of the loss (linear, scalar mix, MLP) and the standardisation; a
linearly separable task learned, shuffled labels not; determinism; best-epoch restoring; scoring."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from elmo_jax.probing import classifier
from elmo_jax.probing.classifier import ProbeConfig, TrainedProbes, accuracies, probe_losses, train_probes

K, D, C = 3, 6, 4


def random_params(seed: int, mlp_hidden: int = 5) -> dict:
    params = classifier.init_params(jax.random.key(seed), K, D, C, mlp_hidden)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    return jax.tree.unflatten(tree, [jax.random.normal(k, leaf.shape) for k, leaf in zip(keys, leaves)])


def numpy_losses(params: dict, x: np.ndarray, y: np.ndarray) -> dict:
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)

    def cross_entropy(logits):  # [B, C]
        logits = logits - logits.max(axis=-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        return -log_probs[np.arange(len(y)), y].mean()

    linear = [cross_entropy(x[:, k] @ p["linear"]["w"][k] + p["linear"]["b"][k]) for k in range(K)]
    s = p["mix"]["scalar_parameters"][0]
    weights = np.exp(s) / np.exp(s).sum()
    mixed = p["mix"]["gamma"][0] * sum(weights[k] * x[:, k] for k in range(K))
    mix = cross_entropy(mixed @ p["mix"]["w"][0] + p["mix"]["b"][0])
    mlp = [
        cross_entropy(np.maximum(x[:, k] @ p["mlp"]["w1"][k] + p["mlp"]["b1"][k], 0) @ p["mlp"]["w2"][k] + p["mlp"]["b2"][k])
        for k in range(K)
    ]
    return {"linear": np.array(linear), "mix": np.array([mix]), "mlp": np.array(mlp)}


def test_losses_match_numpy_reference():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, K, D)).astype(np.float32)
    y = rng.integers(0, C, 9)
    params = random_params(1)
    got = probe_losses(params, x, y)
    want = numpy_losses(params, x.astype(np.float64), y)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(np.asarray(got[name]), want[name], rtol=1e-5, err_msg=name)


def test_layer_statistics_and_standardize_match_numpy():
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(50, K, D)) * [[3.0], [0.5], [0.0]] + [[1.0], [-2.0], [4.0]]).astype(np.float32)
    mean, std = classifier.layer_statistics(x, chunk=7)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std[:2], x[:, :2].astype(np.float64).std(axis=(0, 2)), rtol=1e-5)
    assert std[2] == 1.0  # A constant layer is not divided by zero.
    z = np.asarray(classifier.standardize(x, mean, std))
    np.testing.assert_allclose(z[:, :2].mean(axis=(0, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(z[:, :2].std(axis=(0, 2)), 1, rtol=1e-4)


def separable(n: int, seed: int, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Labels from a fixed linear map of layer 1, with a margin (layer 0: a noisy copy of it, layer 2:
    a scaled and shifted one)."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(123).normal(size=(D, C))
    x = rng.normal(size=(3 * n, K, D))
    scores = np.sort(x[:, 1] @ w, axis=-1)
    x = x[scores[:, -1] - scores[:, -2] > 0.5][:n]
    y = np.argmax(x[:, 1] @ w, axis=-1)
    x[:, 0] = x[:, 1] + noise * rng.normal(size=(n, D))
    x[:, 2] = 5 * x[:, 1] + 2.0
    return x.astype(np.float32), y.astype(np.int32)


def test_probes_learn_a_linearly_separable_task():
    train_x, train_y = separable(3000, 0)
    dev_x, dev_y = separable(500, 1)
    test_x, test_y = separable(1000, 2)
    probes = train_probes(train_x, train_y, dev_x, dev_y, C, ProbeConfig(learning_rate=1e-2, mlp_hidden=16), False)
    acc = accuracies(probes, test_x, test_y)
    assert acc["linear"][1] > 0.97 and acc["linear"][2] > 0.97 and acc["mix"][0] > 0.97, acc
    assert acc["mlp"][1] > 0.9, acc
    assert acc["linear"][0] < acc["linear"][1]  # The noisy copy is worse.


def test_shuffled_labels_do_not_beat_the_majority_rate():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, K, D)).astype(np.float32)
    y = rng.choice(C, size=3000, p=[0.4, 0.3, 0.2, 0.1]).astype(np.int32)
    dev, test = slice(2000, 2500), slice(2500, 3000)
    probes = train_probes(x[:2000], y[:2000], x[dev], y[dev], C, ProbeConfig(learning_rate=1e-2), False)
    majority = np.mean(y[test] == 0)
    acc = accuracies(probes, x[test], y[test])
    assert all(a < majority + 0.05 for a in [*acc["linear"], *acc["mix"]]), (acc, majority)


def test_training_is_deterministic_and_restores_each_probes_best_epoch():
    train_x, train_y = separable(600, 4, noise=2.0)
    dev_x, dev_y = separable(200, 5, noise=2.0)
    config = ProbeConfig(learning_rate=3e-2, batch_size=32, max_epochs=6, patience=2, seed=7)
    a = train_probes(train_x, train_y, dev_x, dev_y, C, config, False)
    b = train_probes(train_x, train_y, dev_x, dev_y, C, config, False)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    again = accuracies(a, dev_x, dev_y)
    for name in again:
        np.testing.assert_allclose(again[name], a.dev_accuracy[name])
        assert (a.best_epoch[name] >= 1).all() and (a.best_epoch[name] <= a.epochs).all()
    other = train_probes(train_x, train_y, dev_x, dev_y, C, dataclasses.replace(config, seed=8), False)
    assert not np.array_equal(np.asarray(other.params["linear"]["w"]), np.asarray(a.params["linear"]["w"]))


@pytest.mark.parametrize("chunk", [1, 3, 4, 7, 100])
def test_scoring_in_chunks_counts_every_token_once_and_unseen_labels_as_errors(chunk):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(7, K, D)).astype(np.float32)
    params = random_params(2, mlp_hidden=0)
    probes = TrainedProbes(params, np.zeros(K, np.float32), np.ones(K, np.float32), {}, {}, 0)
    logits = classifier.head_logits(params, x)
    y = np.asarray(logits["linear"][1]).argmax(-1).astype(np.int32)
    y[0] = -1  # A label training never had.
    acc = accuracies(probes, x, y, chunk=chunk)
    assert acc["linear"][1] == pytest.approx(6 / 7)
    want_mix = np.mean(np.asarray(logits["mix"][0]).argmax(-1) == y)
    assert acc["mix"][0] == pytest.approx(want_mix)


def padded(layers: list[np.ndarray]) -> np.ndarray:
    """Layers `[N, d_k]` of different widths zero-padded into `[N, K, max d_k]`."""
    x = np.zeros((len(layers[0]), len(layers), max(a.shape[1] for a in layers)), np.float32)
    for k, layer in enumerate(layers):
        x[:, k, : layer.shape[1]] = layer
    return x


def test_padding_columns_change_neither_statistics_nor_standardised_values():
    """A layer's statistics are over its own columns; its padding stays zero (std 1 there, not 0)."""
    rng = np.random.default_rng(8)
    layers = [rng.normal(3.0, 2.0, (40, 6)), rng.normal(-1.0, 0.5, (40, 4))]
    x = padded(layers)
    mean, std = classifier.layer_statistics(x, chunk=7, layer_dims=[6, 4])
    np.testing.assert_allclose(mean, [a.mean() for a in layers], rtol=1e-5)
    np.testing.assert_allclose(std, [a.std() for a in layers], rtol=1e-5)
    columns = classifier.column_statistics(mean, std, [6, 4], 6)
    z = np.asarray(classifier.standardize(x, *columns))
    np.testing.assert_array_equal(z[:, 1, 4:], 0.0)
    np.testing.assert_allclose(z[:, 1, :4], (layers[1] - layers[1].mean()) / layers[1].std(), rtol=1e-4, atol=1e-5)


def test_a_linear_probe_on_a_zero_padded_layer_is_the_probe_on_the_layer():
    """Layers of widths 6, 4, 4 zero-padded to 6: each linear probe trains as on its layer alone
    (same weights on its own columns, zeros on the padding, same accuracies)."""
    train_x, train_y = separable(600, 4, noise=1.0)
    dev_x, dev_y = separable(200, 5, noise=1.0)
    widths = [6, 4, 4]

    def layers_of(x: np.ndarray) -> list[np.ndarray]:
        return [x[:, 0], x[:, 1, :4] + 0.5, 3.0 * x[:, 2, 2:]]

    config = ProbeConfig(learning_rate=3e-2, batch_size=32, max_epochs=4, patience=10)
    together = train_probes(padded(layers_of(train_x)), train_y, padded(layers_of(dev_x)), dev_y, C, config, False,
                            layer_dims=widths)
    for k, width in enumerate(widths):
        alone = train_probes(layers_of(train_x)[k][:, None], train_y, layers_of(dev_x)[k][:, None], dev_y, C, config,
                             False)
        w = np.asarray(together.params["linear"]["w"][k])
        np.testing.assert_array_equal(w[width:], 0.0)
        np.testing.assert_allclose(w[:width], np.asarray(alone.params["linear"]["w"][0]), rtol=1e-4, atol=1e-5)
        assert together.dev_accuracy["linear"][k] == alone.dev_accuracy["linear"][0]
    with pytest.raises(ValueError, match="layer_dims must be 3 widths"):
        train_probes(padded(layers_of(train_x)), train_y, padded(layers_of(dev_x)), dev_y, C, config, False,
                     layer_dims=[6, 7, 4])


def test_a_tokens_group_restricts_its_loss_and_prediction_to_the_groups_labels():
    """Labels 0-1 in group 0, 2-3 in group 1: the loss is the cross-entropy of the softmax over the
    token's group's logits only (NumPy), and no prediction leaves the token's group."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(11, K, D)).astype(np.float32)
    label_groups = np.array([0, 0, 1, 1])
    groups = rng.integers(0, 2, 11)
    y = 2 * groups + rng.integers(0, 2, 11)
    params = random_params(3, mlp_hidden=0)
    got = probe_losses(params, x, y, classifier.allowed_labels(groups, label_groups))
    logits = {name: np.asarray(v, np.float64) for name, v in classifier.head_logits(params, x).items()}
    for name, v in logits.items():
        own = np.stack([v[:, i, 2 * g : 2 * g + 2] for i, g in enumerate(groups)], axis=1)  # [P, B, 2]
        log_probs = own - np.log(np.exp(own).sum(axis=-1, keepdims=True))
        want = -log_probs[:, np.arange(11), y - 2 * groups].mean(axis=-1)
        np.testing.assert_allclose(np.asarray(got[name]), want, rtol=1e-5, err_msg=name)
    probes = TrainedProbes(params, np.zeros(K, np.float32), np.ones(K, np.float32), {}, {}, 0, label_groups)
    for name, predicted in classifier.predictions(probes, x, groups, chunk=4).items():
        np.testing.assert_array_equal(label_groups[predicted], np.broadcast_to(groups, predicted.shape), err_msg=name)
        want = np.stack([2 * groups + logits[name][p, np.arange(11)].reshape(11, 2, 2)[np.arange(11), groups].argmax(-1)
                         for p in range(len(predicted))])
        np.testing.assert_array_equal(predicted, want, err_msg=name)


def test_probes_of_groups_train_as_one_each_learning_its_own_task():
    """Two tasks on the same features (group 1's labels: group 0's, permuted) trained as one: each
    group's probe learns its own mapping."""
    train_x, train_y = separable(1200, 0)
    dev_x, dev_y = separable(300, 1)
    permuted = np.array([2, 0, 3, 1])
    label_groups = np.repeat([0, 1], C)

    def as_groups(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        groups = np.arange(len(y)) % 2
        return np.where(groups == 0, y, C + permuted[y]), groups

    (train_y2, train_g), (dev_y2, dev_g) = as_groups(train_y), as_groups(dev_y)
    probes = train_probes(train_x, train_y2, dev_x, dev_y2, 2 * C, ProbeConfig(learning_rate=1e-2), False,
                          label_groups=label_groups, train_groups=train_g, dev_groups=dev_g)
    acc = accuracies(probes, dev_x, dev_y2, groups=dev_g)
    assert acc["linear"][1] > 0.95 and acc["mix"][0] > 0.95, acc
    with pytest.raises(ValueError, match="go together"):
        train_probes(train_x, train_y2, dev_x, dev_y2, 2 * C, label_groups=label_groups)
