"""Word in Context in a biLM's layers (`elmo-probe --task wic`, docs/probing.md): `probe_wic(pretrained, data)`.

A WiC pair (elmo_jax/data/wic.py) is two sentences sharing a target word, labelled same sense or
not; its representation at each layer is the two target vectors u and v. Two classifiers per
layer: `cosine`, same sense when cos(u, v) > the threshold best on the training pairs; `linear`,
the token probes' classifier on [u * v; |u - v|] (symmetric in u and v, as the label is). The
cosine's mix reads u and v mixed with the linear probes' learned weights. Floor: the majority class.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from elmo_jax.data.wic import WicData, WicPair
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.probing.baseline import majority_baseline
from elmo_jax.probing.classifier import (
    SMALL_TASK_CONFIG, ProbeConfig, TrainedProbes, accuracies, column_statistics, layer_statistics, mixed_layers,
    standardize, train_probes, training_record,
)
from elmo_jax.probing.features import MAX_BYTES, layer_dims, target_features
from elmo_jax.probing.run import check_shared_labels, held_out_tenth, random_init
from elmo_jax.probing.static_features import row_dims, static_entry, static_features
from elmo_jax.probing.tasks import LabelledTokens, normalize_word
from elmo_jax.runtime import workdir_files
from elmo_jax.static.lookup import StaticVectors

TASK = "wic"
METHODS = ("cosine", "linear")
PAIR_FEATURES = "[u * v; |u - v|]"


class PairVectors(NamedTuple):
    """The target vectors of pairs at every layer, `u` and `v` `[N, K, D]`, and whether each pair's
    word has the same sense, `same` `[N]` bool."""

    u: np.ndarray
    v: np.ndarray
    same: np.ndarray

    def take(self, rows: np.ndarray | Sequence[int]) -> PairVectors:
        """The pairs of `rows`."""
        rows = np.asarray(rows, int)
        return PairVectors(self.u[rows], self.v[rows], self.same[rows])


# Cosines are compared rounded to this many decimals: layer 0 gives both words of a pair spelled
# alike one vector, whose cosine is 1 up to float rounding, which would place a threshold between
# two such pairs and decide them by the rounding of the machine (ties then go by best_threshold's rule).
COSINE_DECIMALS = 9


def cosines(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """cos(u, v) over the last axis (`[..., D]` -> `[...]`) in float64, rounded to COSINE_DECIMALS;
    0 where either is zero."""
    u, v = u.astype(np.float64), v.astype(np.float64)
    norms = np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1)
    return np.round(np.sum(u * v, axis=-1) / np.maximum(norms, np.finfo(np.float64).tiny), COSINE_DECIMALS)


def best_threshold(scores: np.ndarray, same: np.ndarray) -> tuple[float, float]:
    """(threshold, its accuracy) of the rule `scores > threshold` -> same, over `scores` `[N]` with
    labels `same` `[N]` bool, of highest accuracy among the midpoints between consecutive distinct
    scores and one past each end; ties go to the lowest. One sort, then running counts."""
    if not len(scores) or len(scores) != len(same):
        raise ValueError(f"best_threshold needs as many labels as scores (> 0), got {len(same)}, {len(scores)}")
    values, index = np.unique(np.asarray(scores, np.float64), return_inverse=True)
    same = np.asarray(same, bool)
    # Candidate c puts the c lowest distinct values on the 'different' side: correct are the
    # different pairs among them and the same pairs among the others.
    different_below = np.concatenate([[0], np.cumsum(np.bincount(index, weights=~same, minlength=len(values)))])
    same_below = np.concatenate([[0], np.cumsum(np.bincount(index, weights=same, minlength=len(values)))])
    correct = different_below + same.sum() - same_below
    c = int(np.argmax(correct))
    candidates = np.concatenate([[values[0] - 1], (values[:-1] + values[1:]) / 2, [values[-1] + 1]])
    return float(candidates[c]), float(correct[c] / len(same))


def pair_features(u: np.ndarray, v: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """[u * v; |u - v|] of each layer `[N, K, 2 D]` of u, v `[N, K, D]`: layer k's own 2 dims[k]
    columns first, then its zero padding, as classifier.py's `layer_dims` (2 dims[k]) expect."""
    n, k, d = u.shape
    features = np.zeros((n, k, 2 * d), np.float32)
    for layer, width in enumerate(dims):
        a, b = u[:, layer, :width], v[:, layer, :width]
        features[:, layer, : 2 * width] = np.concatenate([a * b, np.abs(a - b)], axis=-1)
    return features


def _mixer(trained: TrainedProbes, train: PairVectors, dims: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """The linear probes' learned scalar mix of word vectors, `[N, K, D]` -> `[N, D]`, each layer
    standardised over the training vectors (u and v)."""
    both = np.concatenate([train.u, train.v])
    mean, std = column_statistics(*layer_statistics(both, layer_dims=dims), dims, both.shape[2])

    def mixed(x: np.ndarray) -> np.ndarray:
        return np.asarray(mixed_layers(trained.params, standardize(x, mean, std)))

    return mixed


def _cosine_scores(
    train: PairVectors, test: PairVectors, vectors: Callable[[np.ndarray], np.ndarray]
) -> tuple[float, float]:
    """(threshold chosen on the training pairs, its test accuracy) of the cosines of u and v as
    `vectors` (`[N, K, D]` -> `[N, d]`) reads them."""
    threshold, _ = best_threshold(cosines(vectors(train.u), vectors(train.v)), train.same)
    return threshold, float(np.mean((cosines(vectors(test.u), vectors(test.v)) > threshold) == test.same))


def _linear_probes(
    train: PairVectors, dev: PairVectors | None, dims: Sequence[int], config: ProbeConfig, progress: bool
) -> tuple[TrainedProbes, str, int]:
    """The linear probes on the pair features of `train`, early-stopped on `dev` (None: a tenth of
    `train` held out by the config's seed); with where dev came from and its number of pairs."""
    dev_source = "dev"
    if dev is None:
        kept, held = held_out_tenth(range(len(train.same)), config.seed, "the training pairs")
        train, dev, dev_source = train.take(kept), train.take(held), "train_tenth"
    trained = train_probes(
        pair_features(train.u, train.v, dims), train.same.astype(np.int32), pair_features(dev.u, dev.v, dims),
        dev.same.astype(np.int32), 2, config, progress, layer_dims=[2 * d for d in dims],
    )
    return trained, dev_source, len(dev.same)


def _labels(pairs: Sequence[WicPair]) -> list[str]:
    """Each pair's label as its gold file spells it, T (same sense) or F."""
    return ["T" if p.same else "F" for p in pairs]


def check_pairs(data: WicData, seed: int) -> None:
    """ValueError for splits the probes cannot use: too few pairs, or dev pairs (without a dev split:
    the tenth of the training pairs `_linear_probes` holds out by `seed`) none of whose labels the
    training pairs have, on which early stopping would keep the probes untrained."""
    if len(data.train) < 2 or not data.test or data.dev == []:
        raise ValueError("WiC needs at least 2 training pairs, 1 test pair and, if a dev file, 1 dev pair")
    train, dev = data.train, data.dev
    if dev is None:
        train, dev = held_out_tenth(train, seed, "the training pairs")
    check_shared_labels(LabelledTokens([], _labels(dev), [p.where for p in dev]), set(_labels(train)))


def pair_scores(
    train: PairVectors, dev: PairVectors | None, test: PairVectors, dims: Sequence[int],
    config: ProbeConfig = SMALL_TASK_CONFIG, progress: bool = True,
) -> dict[str, Any]:
    """The cosine thresholds and linear probes of every layer (`dims`: their widths) and the mix,
    trained on `train`, early-stopped on `dev` (as `_linear_probes`): `cosine` and `linear` test
    accuracies and `thresholds`, each {`layers`, `mix`}, where dev came from and the training record."""
    trained, dev_source, dev_pairs = _linear_probes(train, dev, dims, config, progress)
    linear = accuracies(trained, pair_features(test.u, test.v, dims), test.same.astype(np.int32), config.eval_chunk)
    layers = [_cosine_scores(train, test, lambda x, k=k, d=d: x[:, k, :d]) for k, d in enumerate(dims)]
    mix = _cosine_scores(train, test, _mixer(trained, train, dims))
    return {
        "cosine": {"layers": [accuracy for _, accuracy in layers], "mix": mix[1]},
        "linear": {"layers": linear["linear"].tolist(), "mix": float(linear["mix"][0])},
        "thresholds": {"layers": [threshold for threshold, _ in layers], "mix": mix[0]},
        "dev": dev_source,
        "dev_pairs": dev_pairs,
        **training_record(trained, config),
    }


def _splits(data: WicData) -> list[list[WicPair]]:
    """The pairs of train, dev (when there is a dev split) and test."""
    return [s for s in (data.train, data.dev, data.test) if s is not None]


def _targets(pairs: Sequence[WicPair]) -> list[tuple[Sequence[str], int]]:
    """(sentence, target index) of the pairs' first sentences, then of their second ones."""
    return [(p.tokens[i], p.positions[i]) for i in (0, 1) for p in pairs]


def _pair_vectors(
    features: Sequence[np.ndarray], splits: Sequence[Sequence[WicPair]]
) -> tuple[PairVectors, PairVectors | None, PairVectors]:
    """Train's, dev's (None without) and test's PairVectors of each split's `_targets`' features `[2 n, K, D]`."""
    train, *dev, test = [
        PairVectors(x[: len(pairs)], x[len(pairs) :], np.array([p.same for p in pairs], bool))
        for x, pairs in zip(features, splits)
    ]
    return train, dev[0] if dev else None, test


def static_pair_scores(
    vectors: StaticVectors, data: WicData, normalize: str, config: ProbeConfig, progress: bool
) -> dict[str, Any]:
    """`vectors`' rows scored as `pair_scores` scores the layers (`static_entry`): `rows` the cosine
    thresholds' test accuracy, `cosine`, `linear` and `thresholds` by row."""
    targets = [_targets(pairs) for pairs in _splits(data)]
    read = static_features(vectors, [[tokens for tokens, _ in split] for split in targets], normalize,
                           targets=[[position for _, position in split] for split in targets])
    scores = pair_scores(*_pair_vectors(read.splits, _splits(data)), row_dims(vectors.dim), config, progress)
    return static_entry(vectors, read, {"rows": scores["cosine"],
                                        **{key: scores[key] for key in (*METHODS, "thresholds")}})


def probe_wic(
    pretrained: PretrainedBiLM, data: WicData, normalize: str = "none", *, control: str = "none", seed: int = 0,
    engine: str = "auto", batch_size: int = 32, progress: bool = True, max_feature_bytes: int = MAX_BYTES,
    config: ProbeConfig | None = None, static: Sequence[StaticVectors] = (),
) -> dict[str, Any]:
    """Probes WiC's pairs `data` on every layer of `pretrained` and on their mix: `pair_scores`' result
    with the headline `layers` and `mix` (the cosine thresholds') and `word_baseline` (the majority's).
    ValueError (`check_pairs`) for splits the probes cannot use, before any features. `static`:
    vector files whose rows are scored alike, under `static` by name (`static_pair_scores`)."""
    if control not in workdir_files.PROBE_CONTROLS:
        raise ValueError(f"control must be one of {workdir_files.PROBE_CONTROLS}, got {control!r}")
    check_pairs(data, seed)
    config = dataclasses.replace(config or SMALL_TASK_CONFIG, seed=seed, mlp_hidden=0)
    normalize_word("", normalize)  # Checks the mode before any sentence.
    if control == "random_init":
        pretrained = random_init(pretrained, seed)
    start = time.perf_counter()
    features = target_features(
        pretrained, [_targets(pairs) for pairs in _splits(data)], normalize, batch_size, engine, progress,
        max_feature_bytes,
    )
    train, dev, test = _pair_vectors(features, _splits(data))
    features_done = time.perf_counter()
    dims = layer_dims(pretrained.model)
    scores = pair_scores(train, dev, test, dims, config, progress)
    majority = majority_baseline(_labels(data.train), _labels(data.test))
    probes_done = time.perf_counter()
    result = {
        "task": TASK,
        "normalize": normalize,
        "control": control,
        "metric": "test accuracy of the cosine threshold",
        "layers": scores["cosine"]["layers"],
        "mix": scores["cosine"]["mix"],
        "word_baseline": majority,
        "majority_baseline": majority,
        **scores,
        "pair_features": PAIR_FEATURES,
        "train_pairs": len(data.train),
        "test_pairs": len(data.test),
        "n_layers": pretrained.model.n_layers,
        "layer_dims": dims,
        "dim": int(train.u.shape[2]),
        "seed": seed,
        "seconds": {"features": features_done - start, "probes": probes_done - features_done},
    }
    if static:
        result["static"] = {v.name: static_pair_scores(v, data, normalize, config, progress) for v in static}
        result["seconds"]["static"] = time.perf_counter() - probes_done
    return result
