"""Probing a biLM in memory: `probe(pretrained, train, dev, test, task)` -> the result dict.

The probes train on train, stop early on dev (without dev sentences, a tenth of train held out by
`seed`) and are scored on test beside the baselines and static word vectors' rows
(probing/static_features.py). A label training never had counts as an error, with a warning; dev
tokens none of whose labels training has are refused (early stopping would keep the untrained
probes). `control='random_init'`: the biLM with fresh random weights.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, NamedTuple, Sequence, TypeVar

import jax
import numpy as np

from elmo_jax.data.conllu import Sentence
from elmo_jax.model.initial_params import init_params
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.probing.baseline import majority_baseline, word_baseline
from elmo_jax.probing.classifier import ProbeConfig, TrainedProbes, accuracies, train_probes, training_record
from elmo_jax.probing.features import MAX_BYTES, compute_features, layer_dims
from elmo_jax.probing.static_features import row_dims, static_entry, static_features
from elmo_jax.probing.tasks import LabelledTokens, labelled_tokens
from elmo_jax.runtime import workdir_files
from elmo_jax.static.lookup import StaticVectors

T = TypeVar("T")
MLP_HIDDEN = 256  # Width of the MLP probes' hidden layer (`probe(mlp=True)`).


def random_init(pretrained: PretrainedBiLM, seed: int = 0) -> PretrainedBiLM:
    """`pretrained` with its params replaced by the model's own initialisation from `seed`."""
    params = init_params(pretrained.model, jax.random.key(seed), pretrained.max_chars)
    return pretrained._replace(params={name: value for name, value in params.items() if name != "softmax"})


def held_out_tenth(sentences: Sequence[T], seed: int, name: str) -> tuple[list[T], list[T]]:
    """(the other sentences, a tenth of them, at least one, chosen at random by `seed`), each in file
    order; ValueError naming `name` (where they come from) for fewer than 2."""
    if len(sentences) < 2:
        raise ValueError(f"{name}: {len(sentences)} training sentence(s); without dev sentences the probes need "
                         "at least 2 (a tenth is held out for early stopping)")
    order = np.random.default_rng(seed).permutation(len(sentences))
    held = set(order[: max(1, len(sentences) // 10)].tolist())
    return [s for i, s in enumerate(sentences) if i not in held], [s for i, s in enumerate(sentences) if i in held]


def _label_ids(tokens: LabelledTokens, ids: dict[str, int]) -> np.ndarray:
    return np.array([ids.get(label, -1) for label in tokens.labels], np.int32)


def unseen_labels(tokens: LabelledTokens, known: set[str], split: str = "test") -> dict[str, Any]:
    """The tokens of `split` whose label training never had (`known`): their count, their labels and
    where the first is; a warning names them."""
    unseen = [i for i, label in enumerate(tokens.labels) if label not in known]
    report: dict[str, Any] = {"tokens": len(unseen), "labels": sorted({tokens.labels[i] for i in unseen})}
    if unseen:
        path, line = tokens.where[unseen[0]]
        report["first"] = f"{path}:{line}"
        logging.warning(
            "%s:%d: %d %s token(s) with %d label(s) never seen in training (%s), counted as errors",
            path, line, len(unseen), split, len(report["labels"]), ", ".join(report["labels"]),
        )
    return report


def _some(labels: Sequence[str], shown: int = 5) -> str:
    """The first `shown` of `labels`, and how many there are when that is not all of them."""
    listed = ", ".join(labels[:shown])
    return listed if len(labels) <= shown else f"{listed}, ... ({len(labels)} labels)"


def check_shared_labels(dev: LabelledTokens, known: set[str]) -> None:
    """ValueError naming `dev`'s file(s) and some of both label sets when no dev label is one of
    training's (`known`): early stopping on dev would keep the probes as initialised."""
    labels = sorted(set(dev.labels))
    if known.isdisjoint(labels):
        files = ", ".join(sorted({path for path, _ in dev.where}))
        raise ValueError(
            f"{files}: no dev token has a label of the training tokens (dev: {_some(labels)}; "
            f"training: {_some(sorted(known))})"
        )


class LabelledSplits(NamedTuple):
    """The labelled tokens the probes train on, stop early on and are scored on, and where dev
    comes from: 'dev' (its own sentences) or 'train_tenth' (held out of train's)."""

    train: LabelledTokens
    dev: LabelledTokens
    test: LabelledTokens
    dev_source: str


def labelled_splits(
    train: Sequence[Sentence], dev: Sequence[Sentence] | None, test: Sequence[Sentence], task: str, normalize: str,
    seed: int,
) -> LabelledSplits:
    """The splits of `task` (dev None or empty: a tenth of `train` held out by `seed`); ValueError
    naming the file for fewer than 2 training sentences without dev, a token without a label, or
    dev labels none of which training has."""
    dev_source = "dev"
    if not dev:
        train, dev = held_out_tenth(train, seed, train[0].path if train else "the training file")
        dev_source = "train_tenth"
    train_tokens, dev_tokens, test_tokens = (labelled_tokens(s, task, normalize) for s in (train, dev, test))
    check_shared_labels(dev_tokens, set(train_tokens.labels))
    return LabelledSplits(train_tokens, dev_tokens, test_tokens, dev_source)


def fit_probes(
    splits: LabelledSplits, ids: dict[str, int], features: Sequence[np.ndarray], dims: Sequence[int],
    config: ProbeConfig, progress: bool,
) -> tuple[TrainedProbes, dict[str, np.ndarray]]:
    """The probes trained on the train split's features (`features`: train's, dev's and test's, each
    `[n_tokens, K, D]`, layers of widths `dims`) with labels `ids`, early-stopped on dev's; and their
    test accuracies (head name -> `[n_probes]`)."""
    train_x, dev_x, test_x = features
    trained = train_probes(
        train_x, _label_ids(splits.train, ids), dev_x, _label_ids(splits.dev, ids), len(ids), config, progress,
        layer_dims=dims,
    )
    return trained, accuracies(trained, test_x, _label_ids(splits.test, ids), config.eval_chunk)


def static_scores(
    vectors: StaticVectors, splits: LabelledSplits, ids: dict[str, int], normalize: str, config: ProbeConfig,
    progress: bool,
) -> dict[str, Any]:
    """The linear probes' test accuracy of each of `vectors`' rows (`static_entry`), trained as the layers'."""
    read = static_features(vectors, [t.forms for t in (splits.train, splits.dev, splits.test)], normalize)
    _, accuracy = fit_probes(splits, ids, read.splits, row_dims(vectors.dim), config, progress)
    return static_entry(vectors, read, {"rows": {"layers": accuracy["linear"].tolist()}})


def probe(
    pretrained: PretrainedBiLM, train: Sequence[Sentence], dev: Sequence[Sentence] | None, test: Sequence[Sentence],
    task: str, normalize: str = "none", *, control: str = "none", mlp: bool = False, seed: int = 0,
    engine: str = "auto", batch_size: int = 32, progress: bool = True, max_feature_bytes: int = MAX_BYTES,
    config: ProbeConfig | None = None, static: Sequence[StaticVectors] = (),
) -> dict[str, Any]:
    """Probes `task` on every layer of `pretrained` and on their mix; returns the result dict.

    Test accuracies `layers` (layer 0..L), `mix`, `mlp` (with `mlp`), `word_baseline`, `majority_baseline`;
    counts, unseen labels, the settings and `seconds`. `config`: the probes' training (seed and MLP
    width from `seed` and `mlp`). `static`: vector files whose rows are probed alike, under `static`
    by name (`static_scores`).
    """
    if control not in workdir_files.PROBE_CONTROLS:
        raise ValueError(f"control must be one of {workdir_files.PROBE_CONTROLS}, got {control!r}")
    config = dataclasses.replace(config or ProbeConfig(), seed=seed, mlp_hidden=MLP_HIDDEN if mlp else 0)
    splits = labelled_splits(train, dev, test, task, normalize, seed)
    train_tokens, dev_tokens, test_tokens = splits.train, splits.dev, splits.test
    label_names = sorted(set(train_tokens.labels))
    ids = {label: i for i, label in enumerate(label_names)}
    unseen_dev, unseen = unseen_labels(dev_tokens, set(ids), "dev"), unseen_labels(test_tokens, set(ids))
    if control == "random_init":
        pretrained = random_init(pretrained, seed)
    start = time.perf_counter()
    train_x, dev_x, test_x = compute_features(
        pretrained, [t.sentences for t in (train_tokens, dev_tokens, test_tokens)], batch_size, engine, progress,
        max_feature_bytes,
    )
    features_done = time.perf_counter()
    dims = layer_dims(pretrained.model)
    trained, test_accuracy = fit_probes(splits, ids, (train_x, dev_x, test_x), dims, config, progress)
    probes_done = time.perf_counter()
    result = {
        "task": task,
        "normalize": normalize,
        "control": control,
        "layers": test_accuracy["linear"].tolist(),
        "mix": float(test_accuracy["mix"][0]),
        "word_baseline": word_baseline(train_tokens.words, train_tokens.labels, test_tokens.words, test_tokens.labels),
        "majority_baseline": majority_baseline(train_tokens.labels, test_tokens.labels),
        "dev": splits.dev_source,
        "train_tokens": len(train_tokens.labels),
        "dev_tokens": len(dev_tokens.labels),
        "test_tokens": len(test_tokens.labels),
        "labels": len(label_names),
        "unseen_dev_labels": unseen_dev,
        "unseen_test_labels": unseen,
        "n_layers": pretrained.model.n_layers,
        "layer_dims": dims,
        "dim": int(train_x.shape[2]),
        "seed": seed,
        **training_record(trained, config),
        "seconds": {"features": features_done - start, "probes": probes_done - features_done},
    }
    if static:
        linear = dataclasses.replace(config, mlp_hidden=0)  # The rows' probes: linear, as the layers'.
        result["static"] = {v.name: static_scores(v, splits, ids, normalize, linear, progress) for v in static}
        result["seconds"]["static"] = time.perf_counter() - probes_done
    if mlp:
        result["mlp"] = test_accuracy["mlp"].tolist()
        result["dev_mlp"] = trained.dev_accuracy["mlp"].tolist()
    return result
