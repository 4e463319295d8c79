"""Word senses: macro-F1 and the nearest sense centroid against NumPy by hand, `probe_wsd` on
made-up CoarseWSD-format words (tests/data/coarsewsd_helpers.py), and static vectors' rows."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from elmo_jax.data.coarsewsd import read_coarsewsd
from elmo_jax.pretrained import bilm_from_files
from elmo_jax.probing.classifier import SMALL_TASK_CONFIG
from elmo_jax.probing.run import held_out_tenth
from elmo_jax.probing.wsd import centroid_predictions, macro_f1, probe_wsd, sense_splits, static_sense_scores
from elmo_jax.static.lookup import StaticVectors
from tests.data.coarsewsd_helpers import CONTEXTS, write_made_up_dataset
from tests.probing.helpers import bilm_files, write_static_vectors  # noqa: F401 (fixture)


def test_macro_f1_is_the_mean_f1_of_the_labels_gold_or_predicted():
    gold = ["a", "a", "a", "b", "b", "c"]
    predicted = ["a", "b", "a", "b", "d", "a"]
    # a: tp 2, fp 1, fn 1 -> 4/6; b: tp 1, fp 1, fn 1 -> 2/4; c: tp 0, fn 1 -> 0; d: tp 0, fp 1 -> 0.
    assert macro_f1(gold, predicted) == pytest.approx((4 / 6 + 2 / 4 + 0 + 0) / 4)
    rng = np.random.default_rng(0)
    gold, predicted = rng.integers(0, 4, 50).astype(str), rng.integers(1, 5, 50).astype(str)
    labels = sorted(set(gold) | set(predicted))
    confusion = np.array([[np.sum((gold == g) & (predicted == p)) for p in labels] for g in labels])
    precision = np.diag(confusion) / np.maximum(confusion.sum(axis=0), 1)
    recall = np.diag(confusion) / np.maximum(confusion.sum(axis=1), 1)
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0)
    assert macro_f1(gold, predicted) == pytest.approx(f1.mean())
    assert macro_f1(["a"] * 3, ["a"] * 3) == 1.0
    with pytest.raises(ValueError, match="as many predictions"):
        macro_f1(["a"], [])


def test_the_nearest_centroid_by_cosine():
    rng = np.random.default_rng(1)
    train_x, labels = rng.normal(size=(30, 5)), rng.choice(["x", "y", "z"], 30)
    test_x = rng.normal(size=(12, 5))
    test_x[0] = 0.0  # As near to all: the most frequent training label.
    frequent = max(("x", "y", "z"), key=lambda label: (np.sum(labels == label), -ord(label)))
    want = []
    for v in test_x:
        best, best_cos = frequent, -np.inf if v.any() else np.inf
        for label in ("x", "y", "z"):
            c = train_x[labels == label].mean(axis=0)
            cos = v @ c / (np.linalg.norm(v) * np.linalg.norm(c)) if v.any() else 0.0
            if cos > best_cos:
                best, best_cos = label, cos
        want.append(best)
    np.testing.assert_array_equal(centroid_predictions(train_x, labels, test_x), want)
    np.testing.assert_array_equal(centroid_predictions(train_x * 7.0, labels, test_x * 0.1), want)  # Scale-free.


def test_centroids_of_one_vector_tie_and_the_most_frequent_sense_wins_whatever_the_rounding():
    """Layer 0: every example of a spelling is one vector, so the senses' centroids differ only by
    the rounding of their means; the nearest was a float accident that flipped a word's accuracy to
    its complement across machines. Ties go to the most frequent training sense, then by name."""
    rng = np.random.default_rng(0)
    vector = rng.normal(size=64).astype(np.float32)
    labels = np.array(["bank_river"] * 3 + ["bank_money"] * 7 + ["bank_aardvark"] * 3)
    for trial in range(20):  # Noise of float32's rounding, and any order of the training examples.
        order = rng.permutation(len(labels))
        train_x = vector * (1 + rng.normal(scale=1e-7, size=(len(labels), 1)).astype(np.float32))
        test_x = vector * (1 + rng.normal(scale=1e-7, size=(5, 1)).astype(np.float32))
        assert list(centroid_predictions(train_x[order], labels[order], test_x)) == ["bank_money"] * 5, trial
    even = np.array(["b", "a", "b", "a"])  # Equally frequent: the first by name.
    assert list(centroid_predictions(np.tile(vector, (4, 1)), even, vector[None])) == ["a"]


@pytest.fixture(scope="module")
def wsd_words(tmp_path_factory):
    return read_coarsewsd(write_made_up_dataset(str(tmp_path_factory.mktemp("wsd")), train=30, test=16))


@pytest.fixture(scope="module")
def wsd_result(bilm_files, wsd_words):  # noqa: F811
    return probe_wsd(bilm_from_files(*bilm_files), wsd_words, max_train_per_word=20, progress=False)


def test_per_word_scores_baselines_and_means(wsd_words, wsd_result):
    result = wsd_result
    assert result["task"] == "wsd" and result["n_layers"] == 2 and list(result["words"]) == ["bank", "bass"]
    assert result["train_sentences"] == 40 and result["dev_sentences"] == 4 and result["test_sentences"] == 32
    for word in wsd_words:
        scores = result["words"][word.word]
        assert scores["senses"] == len(word.senses) and scores["train_sentences"] == 20
        assert scores["dev_sentences"] == 2 and scores["test_sentences"] == 16
        gold = np.array([e.sense for e in word.test])
        senses, counts = np.unique([e.sense for e in word.train], return_counts=True)
        mfs = senses[np.argmax(counts)]
        assert scores["most_frequent_sense"] == {
            "sense": mfs, "accuracy": np.mean(gold == mfs), "macro_f1": pytest.approx(macro_f1(gold, [mfs] * 16))
        }
        # Layer 0 is static: every test sentence of the word gets one sense, whichever it is.
        assert scores["centroid"]["accuracy"]["layers"][0] in {np.mean(gold == s) for s in word.senses}
        for method in ("centroid", "linear"):
            for metric in ("accuracy", "macro_f1"):
                assert len(scores[method][metric]["layers"]) == 3
                assert all(0 <= v <= 1 for v in [*scores[method][metric]["layers"], scores[method][metric]["mix"]])
    for method in ("centroid", "linear"):
        for metric in ("accuracy", "macro_f1"):
            words = [result["words"][w.word][method][metric] for w in wsd_words]
            mean = result["mean"][method][metric]
            np.testing.assert_allclose(mean["layers"], np.mean([w["layers"] for w in words], axis=0))
            assert mean["mix"] == pytest.approx(np.mean([w["mix"] for w in words]))
    assert result["layers"] == result["mean"]["centroid"]["macro_f1"]["layers"]
    assert result["word_baseline"] == result["mean"]["most_frequent_sense"]["macro_f1"]
    assert max(result["layers"][1:]) > result["layers"][0]  # The context tells the sense; the spelling cannot.


def test_all_training_sentences_the_control_and_errors(bilm_files, wsd_words, wsd_result):  # noqa: F811
    pretrained = bilm_from_files(*bilm_files)
    control = probe_wsd(pretrained, wsd_words, max_train_per_word=0, control="random_init", progress=False)
    assert control["control"] == "random_init" and control["train_sentences"] == 60
    assert control["layers"] != wsd_result["layers"]
    with pytest.raises(ValueError, match="max_train_per_word must be 0"):
        probe_wsd(pretrained, wsd_words, max_train_per_word=1)
    one = wsd_words[0]._replace(train=wsd_words[0].train[:1])
    with pytest.raises(ValueError, match="bank: 1 training sentence"):
        probe_wsd(pretrained, [one])


def _one_of_each_sense(word, senses):
    return [next(e for e in word.train if e.sense == sense) for sense in senses]


def test_held_out_senses_none_of_which_training_has_are_refused(bilm_files, wsd_words):  # noqa: F811
    """Two sentences of two senses: the one held out has a sense the probe never trains on, so
    early stopping kept the untrained probe, with exit 0."""
    bank = wsd_words[0]._replace(train=_one_of_each_sense(wsd_words[0], ["0", "1"]))
    with pytest.raises(ValueError, match=r"train\.data\.txt: no dev token has a label of the training tokens \(dev: "
                                         r"bank:\d; training: bank:\d\)"):
        probe_wsd(bilm_from_files(*bilm_files), [bank], max_train_per_word=0, progress=False)


def test_a_held_out_sense_training_lacks_is_warned_naming_its_line(bilm_files, wsd_words, caplog):  # noqa: F811
    bank, bass = wsd_words
    rare = _one_of_each_sense(bank, ["1"])[0]
    common = [e for e in bank.train if e.sense == "0"][:9]
    _, (held,) = held_out_tenth(range(10), 0, "bank")  # probe_wsd's held-out sentence of the first word.
    bank = bank._replace(train=[*common[:held], rare, *common[held:]])
    with caplog.at_level(logging.WARNING):
        result = probe_wsd(bilm_from_files(*bilm_files), [bank, bass], max_train_per_word=0, progress=False)
    path, line = rare.where
    assert result["words"]["bank"]["untrained_dev_senses"] == {"tokens": 1, "labels": ["1"], "first": f"{path}:{line}"}
    assert result["words"]["bass"]["untrained_dev_senses"]["tokens"] == 0
    assert f"{path}:{line}: 1 dev token(s) with 1 label(s) never seen in training (1), counted as errors" in [
        r.getMessage() for r in caplog.records
    ]


def test_static_vectors_own_vector_is_the_most_frequent_sense_and_the_context_bag_tells_the_senses(wsd_words, tmp_path):
    """Every sense has context words of its own: the context bag's centroids find it; the own
    vector is one vector per word, whose centroids tie and give the most frequent sense."""
    words = sorted({w for senses in CONTEXTS.values() for context in senses.values() for w in context})
    vectors = StaticVectors.read(write_static_vectors(tmp_path / "v.txt", ["bank", *words]))  # "bass": OOV.
    entry = static_sense_scores(vectors, wsd_words, sense_splits(wsd_words, 20, 0), "none", SMALL_TASK_CONFIG, False)
    for word in wsd_words:
        scores, gold = entry["words"][word.word], [e.sense for e in word.test]
        senses, counts = np.unique([e.sense for e in word.train[:20]], return_counts=True)
        mfs = senses[np.argmax(counts)]
        assert scores["centroid"]["macro_f1"]["own vector"] == pytest.approx(macro_f1(gold, [mfs] * len(gold)))
        assert scores["centroid"]["macro_f1"]["context bag"] == 1.0
    assert entry["rows"] == entry["mean"]["centroid"]["macro_f1"] and set(entry["mean"]) == {"centroid", "linear"}
    n_test = sum(len(w.test) for w in wsd_words)
    assert entry["target_oov"]["tokens"] == 40 + n_test  # The training sample's 20 sentences a word, and the test.
    assert entry["target_oov"]["oov_tokens"] == 20 + len(wsd_words[1].test)  # Every "bass", no other word.
