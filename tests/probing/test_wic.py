"""Word in Context: the cosine threshold against a NumPy search by hand, the pair features, a
synthetic task where one layer carries the answer, `probe_wic` on made-up WiC pairs
(tests/data/wic_helpers.py) with a tiny random biLM (its random-init control: tests/cli/test_probe.py),
and static vectors' rows."""

from __future__ import annotations

import re

import numpy as np
import pytest

from elmo_jax.data.wic import read_wic
from elmo_jax.probing import wic
from elmo_jax.probing.classifier import ProbeConfig
from elmo_jax.probing.wic import (
    PairVectors, best_threshold, cosines, pair_features, pair_scores, probe_wic, static_pair_scores,
)
from elmo_jax.static.lookup import StaticVectors
from tests.data.coarsewsd_helpers import CONTEXTS
from tests.data.wic_helpers import write_made_up_wic
from tests.probing.helpers import tiny_bilm, write_static_vectors


def reference_threshold(scores: np.ndarray, same: np.ndarray) -> tuple[float, int]:
    """(best accuracy, pairs called same) of `scores > cut` over every cut: below all scores, then
    at each score, lowest first; the first best cut wins."""
    best, called = -1.0, 0
    for cut in [-np.inf, *sorted(set(scores.tolist()))]:
        predicted = [s > cut for s in scores]
        accuracy = sum(p == g for p, g in zip(predicted, same)) / len(same)
        if accuracy > best:
            best, called = accuracy, sum(predicted)
    return best, called


@pytest.mark.parametrize("seed", range(6))
def test_the_threshold_of_best_training_accuracy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    scores = np.round(rng.normal(size=n), 1)  # Rounded: tied scores.
    same = rng.random(n) < 1 / (1 + np.exp(-2 * scores))
    threshold, accuracy = best_threshold(scores, same)
    best, called = reference_threshold(scores, same)
    assert accuracy == pytest.approx(best) and np.mean((scores > threshold) == same) == pytest.approx(best)
    assert np.sum(scores > threshold) == called
    below, above = scores[scores <= threshold], scores[scores > threshold]
    if len(below) and len(above):  # Halfway between the scores it separates.
        assert threshold == pytest.approx((below.max() + above.min()) / 2)


def test_threshold_edges_and_errors():
    assert best_threshold(np.array([0.2, 0.9]), np.array([True, True]))[0] < 0.2  # All same.
    assert best_threshold(np.array([0.2, 0.9]), np.array([False, False])) == (1.9, 1.0)  # None same.
    assert best_threshold(np.array([0.2, 0.9]), np.array([False, True])) == (pytest.approx(0.55), 1.0)
    with pytest.raises(ValueError, match="as many labels as scores"):
        best_threshold(np.array([0.1]), np.array([True, False]))


def test_cosines_and_pair_features_of_layers_of_two_widths():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(4, 2, 3)).astype(np.float32), rng.normal(size=(4, 2, 3)).astype(np.float32)
    u[:, 1, 2] = v[:, 1, 2] = 0.0  # Layer 1 is 2 wide, its third column padding.
    want = np.einsum("nkd,nkd->nk", u, v) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))
    np.testing.assert_allclose(cosines(u, v), want, rtol=1e-6)
    assert cosines(np.zeros(3), np.ones(3)) == 0.0
    features = pair_features(u, v, [3, 2])
    assert features.shape == (4, 2, 6)
    np.testing.assert_allclose(features[:, 0], np.concatenate([u[:, 0] * v[:, 0], np.abs(u[:, 0] - v[:, 0])], -1))
    np.testing.assert_allclose(
        features[:, 1], np.concatenate([u[:, 1, :2] * v[:, 1, :2], np.abs(u[:, 1, :2] - v[:, 1, :2]), np.zeros((4, 2))], -1)
    )


def test_vectors_alike_up_to_rounding_have_a_cosine_of_one_exactly():
    """Layer 0's pairs of one spelling: their cosines must tie, not be ordered by float rounding."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=(50, 256)).astype(np.float32)
    v = u * (1 + rng.normal(scale=1e-7, size=(50, 1))).astype(np.float32)
    assert set(cosines(u, v)) == {1.0}
    assert best_threshold(cosines(u, v), np.arange(50) % 2 == 0)[0] == 0.0  # One value: below it, the lowest.


def synthetic_pairs(n: int, seed: int, informative: int = 1, k: int = 3, d: int = 8) -> PairVectors:
    """Pairs whose layer `informative` holds v = u + small noise when the same sense, and an
    unrelated v otherwise; the other layers are noise unrelated to the label."""
    rng = np.random.default_rng(seed)
    same = rng.random(n) < 0.5
    u, v = rng.normal(size=(n, k, d)), rng.normal(size=(n, k, d))
    v[same, informative] = u[same, informative] + 0.3 * rng.normal(size=(same.sum(), d))
    return PairVectors(u.astype(np.float32), v.astype(np.float32), same)


def test_one_layer_carries_the_answer_and_both_classifiers_find_it():
    train, dev, test = (synthetic_pairs(n, seed) for n, seed in ((2000, 0), (200, 1), (200, 2)))
    scores = pair_scores(train, dev, test, [8, 8, 8], ProbeConfig(batch_size=32), progress=False)
    for method in ("cosine", "linear"):
        layers = scores[method]["layers"]
        assert layers[1] > 0.9 and max(layers[0], layers[2]) < 0.7, (method, layers)
        assert scores[method]["mix"] > 0.85, (method, scores[method]["mix"])
    assert int(np.argmax(scores["mix_weights"])) == 1 and scores["mix_weights"][1] > 0.5
    assert scores["dev"] == "dev" and scores["dev_pairs"] == 200
    assert 0.3 < scores["thresholds"]["layers"][1] < 0.9  # Same pairs' cosines are near 0.96, others near 0.
    held_out = pair_scores(train, None, test, [8, 8, 8], ProbeConfig(batch_size=32), progress=False)
    assert held_out["dev"] == "train_tenth" and held_out["dev_pairs"] == 200
    # The layers' thresholds read the whole training file either way (the mix's weights differ).
    assert held_out["thresholds"]["layers"] == scores["thresholds"]["layers"]


@pytest.fixture(scope="module")
def wic_data(tmp_path_factory):
    return read_wic(write_made_up_wic(str(tmp_path_factory.mktemp("wic")), train=60, test=30))


def test_probe_wic_on_a_tiny_random_bilm(wic_data):
    pretrained = tiny_bilm(projection=True)
    result = probe_wic(pretrained, wic_data, progress=False)
    assert result["task"] == "wic" and result["n_layers"] == pretrained.model.n_layers
    assert result["train_pairs"] == 60 and result["dev_pairs"] == 6 and result["test_pairs"] == 30
    assert result["dev"] == "train_tenth" and result["pair_features"] == "[u * v; |u - v|]"
    assert result["layers"] == result["cosine"]["layers"] and result["mix"] == result["cosine"]["mix"]
    k = pretrained.model.n_layers + 1
    for method in ("cosine", "linear", "thresholds"):
        assert len(result[method]["layers"]) == k
    gold = [p.same for p in wic_data.test]
    majority = np.mean(gold) if np.sum([p.same for p in wic_data.train]) > 30 else 1 - np.mean(gold)
    assert result["majority_baseline"] == result["word_baseline"] == pytest.approx(majority)
    # Layer 0 is static: one spelling, one vector, so every pair's cosine is 1 and one answer is given to all.
    assert result["cosine"]["layers"][0] in (pytest.approx(np.mean(gold)), pytest.approx(1 - np.mean(gold)))
    with pytest.raises(ValueError, match="control must be one of"):
        probe_wic(pretrained, wic_data, control="shuffled")
    with pytest.raises(ValueError, match="at least 2 training pairs"):
        probe_wic(pretrained, wic_data._replace(train=wic_data.train[:1]))


def test_dev_pairs_none_of_whose_labels_training_has_are_refused_before_any_features(wic_data, monkeypatch):
    """Early stopping on them kept the probes untrained (stopped at epoch 0): refused naming the dev
    file, or the training file for the tenth of it held out without one."""
    monkeypatch.setattr(wic, "target_features", lambda *args: pytest.fail("features were computed"))
    pretrained = tiny_bilm(projection=True)
    same = [p for p in wic_data.train if p.same]
    dev = [p._replace(where=("dev.data.txt", n)) for n, p in enumerate(wic_data.train, 1) if not p.same]
    with pytest.raises(ValueError) as error:
        probe_wic(pretrained, wic_data._replace(train=same, dev=dev))
    assert str(error.value) == "dev.data.txt: no dev token has a label of the training tokens (dev: F; training: T)"
    two = [same[0], dev[0]._replace(where=same[0].where)]  # One of each label: the tenth held out is the other's.
    with pytest.raises(ValueError, match=f"^{re.escape(same[0].where[0])}: no dev token has a label of the training tokens"):
        probe_wic(pretrained, wic_data._replace(train=two))


def test_static_vectors_own_vector_gives_every_pair_one_answer_and_the_context_bag_more(wic_data, tmp_path):
    words = sorted({w for senses in CONTEXTS.values() for context in senses.values() for w in context} | set(CONTEXTS))
    vectors = StaticVectors.read(write_static_vectors(tmp_path / "v.txt", words))
    entry = static_pair_scores(vectors, wic_data, "none", ProbeConfig(batch_size=32), progress=False)
    gold = np.mean([p.same for p in wic_data.test])
    # Both sentences' word has one vector: a cosine of 1, on one side of the threshold for every pair.
    assert entry["cosine"]["own vector"] in (pytest.approx(gold), pytest.approx(1 - gold))
    assert entry["rows"] == entry["cosine"] and entry["rows"]["context bag"] > entry["rows"]["own vector"]
    assert set(entry["linear"]) == set(entry["thresholds"]) == {"own vector", "context bag"}
    assert entry["target_oov"]["tokens"] == 2 * (60 + 30) and entry["oov"]["oov_tokens"] == 0
