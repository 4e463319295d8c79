"""Word senses in a biLM's layers (`elmo-probe --task wsd`): `probe_wsd(pretrained, words)`, an
example the ambiguous word's vector at each layer; the classifiers and scores: docs/probing.md.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np

from elmo_jax.data.coarsewsd import SenseExample, WsdWord
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.probing.baseline import majority_label
from elmo_jax.probing.classifier import (
    SMALL_TASK_CONFIG, ProbeConfig, TrainedProbes, mixed_layers, predictions, standardize, train_probes,
    training_record,
)
from elmo_jax.probing.features import MAX_BYTES, layer_dims, target_features
from elmo_jax.probing.run import check_shared_labels, held_out_tenth, random_init, unseen_labels
from elmo_jax.probing.static_features import row_dims, static_entry, static_features
from elmo_jax.probing.tasks import LabelledTokens, normalize_word
from elmo_jax.runtime import workdir_files
from elmo_jax.static.lookup import StaticVectors

TASK = "wsd"
MAX_TRAIN_PER_WORD = 400  # `probe_wsd`'s default sample of each word's training sentences.
METHODS = ("centroid", "linear")


def macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """The mean over the labels of `gold` or `predicted` of each label's F1, 2 tp / (2 tp + fp + fn)
    (sklearn's `f1_score(average='macro')`): always guessing the frequent sense scores low."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if len(gold) != len(predicted) or not len(gold):
        raise ValueError(f"macro_f1 needs as many predictions as gold labels (> 0), got {len(predicted)}, {len(gold)}")
    scores = []
    for label in np.union1d(gold, predicted):
        tp = np.sum((gold == label) & (predicted == label))
        wrong = np.sum(gold != predicted, where=(gold == label) | (predicted == label))  # fn + fp
        scores.append(2 * tp / (2 * tp + wrong))
    return float(np.mean(scores))


# Cosines within this of the best are a tie. Layer 0 gives a spelling one vector, so every sense's
# centroid is that vector up to float rounding, which picked a sense at random (a word's accuracy
# flipped to its complement between machines).
TIED_COSINE = 1e-6


def centroid_predictions(train_x: np.ndarray, train_labels: Sequence[str], test_x: np.ndarray) -> np.ndarray:
    """The label `[M]` of the centroid nearest by cosine to each test vector `test_x` `[M, D]`, a
    centroid the mean of a label's training vectors `train_x` `[N, D]` (in float64). Centroids
    within TIED_COSINE of the nearest tie: the most frequent training label of them wins, then the
    first by name; a zero vector ties all."""
    train_labels = np.asarray(train_labels)
    labels, counts = np.unique(train_labels, return_counts=True)
    centroids = np.stack([train_x[train_labels == label].mean(axis=0, dtype=np.float64) for label in labels])

    def unit(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, np.float64)
        return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), np.finfo(np.float64).tiny)

    cosines = unit(test_x) @ unit(centroids).T  # [M, labels]
    tied = cosines >= cosines.max(axis=1, keepdims=True) - TIED_COSINE
    preference = np.argsort(np.lexsort((labels, -counts)))  # Label i's rank: more training examples first.
    return labels[np.argmin(np.where(tied, preference, len(labels)), axis=1)]


def _scores(gold: Sequence[str], predicted: Sequence[Sequence[str]], mix: Sequence[str]) -> dict[str, Any]:
    """Accuracy and macro-F1 of the predictions of each layer and of the mix."""
    gold = np.asarray(gold)

    def both(p: Sequence[str]) -> tuple[float, float]:
        return float(np.mean(np.asarray(p) == gold)), macro_f1(gold, p)

    layers, mixed = [both(p) for p in predicted], both(mix)
    return {metric: {"layers": [s[i] for s in layers], "mix": mixed[i]}
            for i, metric in enumerate(("accuracy", "macro_f1"))}


def _sentence_predictions(
    word: WsdWord, centroid: Sequence[Sequence[str]], centroid_mix: Sequence[str]
) -> list[dict[str, Any]]:
    """Each test sentence of `word` with its gold sense and the nearest centroid's at each layer
    (`centroid[layer][sentence]`) and the mix, by sense name."""

    def name(sense: Any) -> str:
        return word.senses[str(sense)]

    return [
        {
            "tokens": example.tokens, "position": example.position, "gold": name(example.sense),
            "centroid": {"layers": [name(layer[j]) for layer in centroid], "mix": name(centroid_mix[j])},
        }
        for j, example in enumerate(word.test)
    ]


def _sample(examples: Sequence[SenseExample], limit: int, seed: int) -> list[SenseExample]:
    """At most `limit` of `examples` (0: all), chosen at random by `seed`, in file order."""
    if not limit or len(examples) <= limit:
        return list(examples)
    return [examples[i] for i in sorted(np.random.default_rng(seed).choice(len(examples), limit, replace=False))]


def _dev_senses(
    words: Sequence[WsdWord], samples: Sequence[Sequence[SenseExample]], held_out: Sequence[tuple[list[int], list[int]]]
) -> list[dict[str, Any]]:
    """Each word's `unseen_labels` of its held-out (`held_out`: (kept, dev) indices into `samples`)
    sentences; ValueError naming the files when no dev sentence of any word has a trained sense."""
    splits, pooled_dev, pooled_fit, where = [], [], set(), []
    for word, sample, (kept, out) in zip(words, samples, held_out):
        fit = {sample[j].sense for j in kept}
        dev = LabelledTokens([], [sample[j].sense for j in out], [sample[j].where for j in out])
        splits.append((dev, fit))
        pooled_fit.update(f"{word.word}:{sense}" for sense in fit)  # A label is a sense of one word.
        pooled_dev += [f"{word.word}:{sense}" for sense in dev.labels]
        where += dev.where
    check_shared_labels(LabelledTokens([], pooled_dev, where), pooled_fit)
    return [unseen_labels(dev, fit, "dev") for dev, fit in splits]


class SenseSplits(NamedTuple):
    """Each word's sample of training sentences, the (kept, held-out) indices into it, and the
    held-out senses its kept sentences lack (`_dev_senses`)."""

    samples: list[list[SenseExample]]
    held_out: list[tuple[list[int], list[int]]]
    untrained_dev: list[dict[str, Any]]


def sense_splits(words: Sequence[WsdWord], max_train_per_word: int, seed: int) -> SenseSplits:
    """The splits `probe_wsd` takes of `words`; ValueError for no words, a bad `max_train_per_word`,
    a word of fewer than 2 training sentences, or held-out senses none of which training has."""
    if max_train_per_word < 0 or max_train_per_word == 1:
        raise ValueError(f"max_train_per_word must be 0 (all) or >= 2, got {max_train_per_word}")
    if not words:
        raise ValueError("no words to probe")
    samples = [_sample(w.train, max_train_per_word, seed + i) for i, w in enumerate(words)]
    held_out = [
        held_out_tenth(range(len(sample)), seed + i, word.word) for i, (word, sample) in enumerate(zip(words, samples))
    ]
    return SenseSplits(samples, held_out, _dev_senses(words, samples, held_out))


class SenseScores(NamedTuple):
    """`sense_scores`' linear probes, each word's scores, and the seconds of the probes and of the centroids."""

    trained: TrainedProbes
    words: list[dict[str, Any]]
    seconds: dict[str, float]


def sense_scores(
    words: Sequence[WsdWord], splits: SenseSplits, train_x: np.ndarray, test_x: np.ndarray, dims: Sequence[int],
    config: ProbeConfig, progress: bool, per_sentence: bool = False,
) -> SenseScores:
    """The linear probes trained on the features `train_x` `[n_train, K, D]` of `splits`' samples
    (layers of widths `dims`) and each word's `centroid` and `linear` scores on its test sentences'
    `test_x` `[n_test, K, D]` ({`accuracy`, `macro_f1`} of {`layers`, `mix`}; `per_sentence`: and
    `predictions`)."""
    start = time.perf_counter()
    samples, held_out = splits.samples, splits.held_out
    train = [e for sample in samples for e in sample]
    keys = [(i, sense) for i, w in enumerate(words) for sense in w.senses]  # One label per sense of each word.
    label_ids = {key: n for n, key in enumerate(keys)}
    label_groups = np.array([i for i, _ in label_ids], np.int32)
    train_groups = np.repeat(np.arange(len(words)), [len(s) for s in samples])
    test_groups = np.repeat(np.arange(len(words)), [len(w.test) for w in words])
    train_labels = np.array([label_ids[g, e.sense] for g, e in zip(train_groups, train)], np.int32)
    offsets = np.cumsum([0] + [len(s) for s in samples])
    fit = np.concatenate([offsets[i] + np.asarray(kept, int) for i, (kept, _) in enumerate(held_out)])
    dev = np.concatenate([offsets[i] + np.asarray(out, int) for i, (_, out) in enumerate(held_out)])
    trained = train_probes(
        train_x[fit], train_labels[fit], train_x[dev], train_labels[dev], len(label_ids), config, progress,
        layer_dims=dims, label_groups=label_groups, train_groups=train_groups[fit], dev_groups=train_groups[dev],
    )
    linear = predictions(trained, test_x, test_groups, config.eval_chunk)
    probes_done = time.perf_counter()

    def mixed(x: np.ndarray) -> np.ndarray:
        return np.asarray(mixed_layers(trained.params, standardize(x, trained.mean, trained.std)))

    train_mixed, test_mixed = mixed(train_x), mixed(test_x)
    sense_of = np.array([sense for _, sense in keys])  # Label id -> sense id.
    test_offsets = np.cumsum([0] + [len(w.test) for w in words])
    per_word = []
    for i, (word, sample) in enumerate(zip(words, samples)):
        rows, test_rows = slice(offsets[i], offsets[i + 1]), slice(test_offsets[i], test_offsets[i + 1])
        senses = [e.sense for e in sample]
        gold = [e.sense for e in word.test]
        centroid = [centroid_predictions(train_x[rows, k, :d], senses, test_x[test_rows, k, :d])
                    for k, d in enumerate(dims)]
        centroid_mix = centroid_predictions(train_mixed[rows], senses, test_mixed[test_rows])
        per_word.append({
            "centroid": _scores(gold, centroid, centroid_mix),
            "linear": _scores(gold, sense_of[linear["linear"][:, test_rows]], sense_of[linear["mix"][0, test_rows]]),
        })
        if per_sentence:
            per_word[-1]["predictions"] = _sentence_predictions(word, centroid, centroid_mix)
    seconds = {"probes": probes_done - start, "centroids": time.perf_counter() - probes_done}
    return SenseScores(trained, per_word, seconds)


def mean_scores(per_word: Sequence[dict[str, Any]], names: Sequence[str] = METHODS) -> dict[str, Any]:
    """The unweighted mean over the words of each of their scores `names` (a sense's name left out)."""
    return {
        name: jax.tree.map(lambda *values: float(np.mean(values)),
                           *({k: v for k, v in w[name].items() if k != "sense"} for w in per_word))
        for name in names
    }


def _target_examples(words: Sequence[WsdWord], splits: SenseSplits) -> list[list[SenseExample]]:
    """The training sentences of `splits`' samples, then the words' test sentences."""
    return [[e for sample in splits.samples for e in sample], [e for w in words for e in w.test]]


def static_sense_scores(
    vectors: StaticVectors, words: Sequence[WsdWord], splits: SenseSplits, normalize: str, config: ProbeConfig,
    progress: bool,
) -> dict[str, Any]:
    """`vectors`' rows scored as `sense_scores` scores the layers (`static_entry`): `rows` the centroids'
    mean macro-F1, `mean` and `words` by row."""
    examples = _target_examples(words, splits)
    read = static_features(vectors, [[e.tokens for e in split] for split in examples], normalize,
                           targets=[[e.position for e in split] for split in examples])
    per_word = sense_scores(words, splits, *read.splits, row_dims(vectors.dim), config, progress).words
    mean = mean_scores(per_word)
    return static_entry(vectors, read, {"rows": mean["centroid"]["macro_f1"], "mean": mean,
                                        "words": {w.word: scores for w, scores in zip(words, per_word)}})


def probe_wsd(
    pretrained: PretrainedBiLM, words: Sequence[WsdWord], normalize: str = "none", *, control: str = "none",
    seed: int = 0, max_train_per_word: int = MAX_TRAIN_PER_WORD, engine: str = "auto", batch_size: int = 32,
    progress: bool = True, max_feature_bytes: int = MAX_BYTES, config: ProbeConfig | None = None,
    per_sentence: bool = False, static: Sequence[StaticVectors] = (),
) -> dict[str, Any]:
    """Probes the senses of `words` on every layer of `pretrained` and on their mix; returns the result dict.

    `words`: each word's counts, unseen senses, `most_frequent_sense`, `centroid` and `linear` scores
    ({`accuracy`, `macro_f1`} of {`layers`, `mix`}); `mean`: their means over the words; headline
    `layers`, `mix` (the centroids' mean macro-F1) and `word_baseline` (the most frequent sense's).
    `per_sentence`: each word also gets `predictions` (`_sentence_predictions`). `static`: vector
    files whose rows are scored alike, under `static` by name (`static_sense_scores`).
    """
    if control not in workdir_files.PROBE_CONTROLS:
        raise ValueError(f"control must be one of {workdir_files.PROBE_CONTROLS}, got {control!r}")
    config = dataclasses.replace(config or SMALL_TASK_CONFIG, seed=seed, mlp_hidden=0)
    normalize_word("", normalize)  # Checks the mode before any sentence.
    splits = sense_splits(words, max_train_per_word, seed)
    samples, held_out, untrained_dev = splits
    train, test = _target_examples(words, splits)
    if control == "random_init":
        pretrained = random_init(pretrained, seed)

    start = time.perf_counter()
    train_x, test_x = target_features(
        pretrained, [[(e.tokens, e.position) for e in examples] for examples in (train, test)], normalize,
        batch_size, engine, progress, max_feature_bytes,
    )
    features_done = time.perf_counter()
    dims = layer_dims(pretrained.model)
    trained, scores, seconds = sense_scores(words, splits, train_x, test_x, dims, config, progress, per_sentence)
    per_word = {}
    for i, (word, sample, word_scores) in enumerate(zip(words, samples, scores)):
        senses = [e.sense for e in sample]
        gold = [e.sense for e in word.test]
        majority = majority_label([e.sense for e in word.train])
        per_word[word.word] = {
            "senses": len(word.senses),
            "train_sentences": len(sample),
            "dev_sentences": len(held_out[i][1]),
            "test_sentences": len(word.test),
            "untrained_dev_senses": untrained_dev[i],
            "untrained_test_senses": unseen_labels(LabelledTokens([], gold, [e.where for e in word.test]), set(senses)),
            "most_frequent_sense": {
                "sense": majority, "accuracy": float(np.mean(np.asarray(gold) == majority)),
                "macro_f1": macro_f1(gold, [majority] * len(gold)),
            },
            **word_scores,
        }
    mean = mean_scores(list(per_word.values()), ("most_frequent_sense", *METHODS))
    scored = time.perf_counter()
    result = {
        "task": TASK,
        "normalize": normalize,
        "control": control,
        "metric": "macro-F1 of the nearest sense centroid (mean over words)",
        "layers": mean["centroid"]["macro_f1"]["layers"],
        "mix": mean["centroid"]["macro_f1"]["mix"],
        "word_baseline": mean["most_frequent_sense"]["macro_f1"],
        "mean": mean,
        "words": per_word,
        "train_sentences": len(train),
        "dev_sentences": sum(len(out) for _, out in held_out),
        "test_sentences": len(test),
        "max_train_per_word": max_train_per_word,
        "n_layers": pretrained.model.n_layers,
        "layer_dims": dims,
        "dim": int(train_x.shape[2]),
        "seed": seed,
        **training_record(trained, config),
        "seconds": {"features": features_done - start, **seconds},
    }
    if static:
        result["static"] = {v.name: static_sense_scores(v, words, splits, normalize, config, progress) for v in static}
        result["seconds"]["static"] = time.perf_counter() - scored
    return result
