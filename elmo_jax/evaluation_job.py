"""Perplexity of a training workdir's checkpoint, or of a bilm-tf/AllenNLP model's files (the body
of `evaluate.py`).

A workdir's model is built from its config.json and its params restored without the optimizer
state (`training.checkpoint.restore_params`); a bilm-tf/AllenNLP model from its options.json,
hdf5 weights, softmax hdf5 and vocabulary. Both go through the same `Evaluator`, so their results
have the same fields and, for an exported checkpoint, the same values.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

import jax
import ml_collections
from jax.sharding import NamedSharding, PartitionSpec as P

from elmo_jax.data import corpus
from elmo_jax.data.sources import DataError, read_sentences
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation import Evaluator, format_table
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights
from elmo_jax.interop.softmax_hdf5 import load_softmax
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.training import parallel
from elmo_jax.training.checkpoint import (
    CheckpointError,
    checkpoint_directory,
    load_params,
    restore_params,
    saved_config,
)
from elmo_jax.atomic_write import write_json_atomic

# (config, host params) of a training workdir, for the callers that know it by this name.
restore_checkpoint = load_params


def restore_model(
    config: ml_collections.ConfigDict, workdir: str, step: int | None = None
) -> tuple[BiLM, Any, Vocabulary, int, jax.sharding.Mesh]:
    """(model, params, vocab, step, mesh) of the checkpoint of `workdir` (latest or `step`).

    The params are replicated over the mesh of all devices, as the evaluation step takes them;
    only they are read from the checkpoint.
    """
    directory = checkpoint_directory(workdir)
    vocab_path = os.path.join(workdir, "vocab.txt")
    if not os.path.exists(vocab_path):
        raise CheckpointError(f"{workdir}: no vocab.txt (is this a training workdir?)")
    vocab = Vocabulary.load(vocab_path)
    mesh = parallel.make_mesh()
    params, step = restore_params(directory, step, NamedSharding(mesh, P()))
    return bilm_from_config(config.model, len(vocab)), params, vocab, step, mesh


# Keys a config given to evaluate.py may change: how and on what the model is evaluated.
EVALUATION_KEYS = (
    "eval.", "data.streams", "data.source", "data.eval_split", "data.eval_files", "data.tfds_name",
    "data.tfds_data_dir", "data.tfds_feature", "data.tfds_valid_split", "data.tfds_test_split",
)
# Keys that define the trained model, its inputs or its vocabulary: they must match config.json.
MODEL_KEYS = ("model.", "data.max_chars_per_token", "data.vocab_file", "data.vocab_min_count", "data.vocab_max_size")


class ConfigMismatchError(ValueError):
    """A config given for evaluation changes the model that the workdir trained."""


def _leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    """{'model.lstm.dim': 16, ...}: the dotted key of every non-dict value of a nested dict."""
    leaves: dict[str, object] = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            leaves.update(_leaves(value, f"{prefix}{name}."))
        else:
            leaves[f"{prefix}{name}"] = value
    return leaves


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    """`key` is one of `patterns`, or under one that ends with a dot."""
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in patterns)


def _as_json(value: object) -> object:
    """`value` as config.json stores it (tuples become lists), for comparing with a saved value."""
    return json.loads(json.dumps(value))


def evaluation_config(workdir: str, given: ml_collections.ConfigDict | None = None) -> ml_collections.ConfigDict:
    """The config that evaluates `workdir`: its config.json, with the evaluation keys of `given`.

    The model is always built from config.json: evaluating a checkpoint with another model config
    (say, without the skip connections it was trained with) would give a wrong perplexity, or fail
    on a shape, without saying why. A model key (MODEL_KEYS) that `given` sets to another value is
    a ConfigMismatchError naming it; its training keys (train.*, seed, training data) are not used.
    """
    config = saved_config(workdir)
    if given is None:
        return config
    saved = _leaves(config.to_dict())
    for key, value in _leaves(given.to_dict()).items():
        if _matches(key, EVALUATION_KEYS):
            *parents, leaf = key.split(".")
            node = config
            for name in parents:
                node = node[name]
            node[leaf] = value
        elif _matches(key, MODEL_KEYS) and key in saved and _as_json(value) != saved[key]:
            raise ConfigMismatchError(
                f"--config sets {key}={value!r}, but the model in {workdir} was trained with {key}={saved[key]!r} "
                "(its config.json): evaluation always builds the trained model, drop the override"
            )
    return config


def _report(result: dict, title: str, paths: list[str]) -> None:
    """Writes `result` as JSON to each of `paths` and prints its table (process 0)."""
    if jax.process_index() == 0:
        for path in paths:
            write_json_atomic(path, result)
        print(format_table(result, title), flush=True)


def _output_paths(output: str | None) -> list[str]:
    """[output] with its directory created (before the evaluation, so that a bad path fails at once)."""
    if not output:
        return []
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    return [output]


def evaluate_checkpoint(
    workdir: str,
    given: ml_collections.ConfigDict | None = None,
    split: str | None = None,
    eval_files: str = "",
    step: int | None = None,
    output: str | None = None,
) -> dict:
    """Perplexity of a checkpoint; prints a table and writes `eval_<split>_<step>.json` (and `output`).

    The config is `evaluation_config(workdir, given)`: the trained model, `given`'s evaluation keys.
    """
    config = evaluation_config(workdir, given)
    outputs = _output_paths(output)
    split = split or config.data.eval_split
    sentences = corpus.eval_sentences(config.data, split, eval_files)
    if not sentences:
        raise DataError(f"the evaluation set ({eval_files or split}) has no sentences")
    model, params, vocab, step, mesh = restore_model(config, workdir, step)
    result = {"step": step, **Evaluator(model, vocab, config, mesh)(params, sentences)}
    name = "files" if eval_files else split
    _report(result, f"{name} @ step {step}", [os.path.join(workdir, f"eval_{name}_{step}.json"), *outputs])
    return result


@dataclasses.dataclass(frozen=True)
class BilmFiles:
    """A bilm-tf/AllenNLP model: options.json, hdf5 weights, softmax hdf5 and vocabulary (line i
    is softmax row i), as the released ELMo models and `python -m elmo_jax.interop.bilm_hdf5` give them."""

    options: str
    weights: str
    softmax_weights: str
    vocab: str


# evaluate.py's flags naming a BilmFiles field, with what each names.
BILM_FILE_FLAGS = {
    "options": "its options.json",
    "weights": "its hdf5 weights",
    "softmax_weights": "its softmax hdf5",
    "vocab": "its vocabulary, line i = softmax row i",
}


def bilm_files_from_flags(flag_values: Mapping[str, Any]) -> BilmFiles | None:
    """The bilm-tf/AllenNLP model that evaluate.py's flags name, or None when they name --workdir.

    One-line ValueError naming the flag unless they name exactly one model: --workdir, or all of
    --options, --weights, --softmax_weights and --vocab with --eval_files (a bilm-tf model has no
    corpus split and no checkpoint steps, so --split and --step are refused with it).
    """
    named = [flag for flag in BILM_FILE_FLAGS if flag_values.get(flag)]
    if not named:
        if not flag_values.get("workdir"):
            raise ValueError(
                "name the model to evaluate: --workdir (a training workdir) or --options, --weights, "
                "--softmax_weights and --vocab (a bilm-tf/AllenNLP model)"
            )
        return None
    if flag_values.get("workdir"):
        raise ValueError(
            f"--workdir and --{named[0]} name two models: evaluate a training workdir or a bilm-tf/AllenNLP model"
        )
    for flag, what in BILM_FILE_FLAGS.items():
        if flag not in named:
            raise ValueError(
                f"--{named[0]} needs --{flag} ({what}): a bilm-tf/AllenNLP model is read from --options, "
                "--weights, --softmax_weights and --vocab"
            )
    for flag in ("split", "step"):
        if flag_values.get(flag) is not None:
            raise ValueError(f"--{flag} is for --workdir: a bilm-tf/AllenNLP model is evaluated on --eval_files")
    if not flag_values.get("eval_files"):
        raise ValueError("--options needs --eval_files: the held-out text to evaluate the bilm-tf/AllenNLP model on")
    return BilmFiles(**{flag: flag_values[flag] for flag in BILM_FILE_FLAGS})


def bilm_files_config(files: BilmFiles, base: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The config that evaluates `files`: `base` (configs/default.py's, or a given --config) with
    the model section and data.max_chars_per_token that its options.json describes.

    Everything else is `base`'s: eval.batch_size and eval.unroll_steps (the perplexity depends on
    the batch size, as states carry across the sentences dealt to each row), model.softmax.chunk_size,
    and data.streams ('sentences', bilm-tf's layout, in configs/default.py).
    """
    config = ml_collections.ConfigDict(base.to_dict())
    config.update(load_options(files.options))
    return config


def bilm_params(files: BilmFiles, config: ml_collections.ConfigDict, vocab: Vocabulary) -> dict:
    """Host params of `files`: the weight file's, and the softmax `W [V, P]`, `b [V]` (checked
    against the vocabulary, row i for word i, and the model's P)."""
    params = load_weights(config, files.weights)
    params["softmax"] = load_softmax(files.softmax_weights, len(vocab), config.model.lstm.projection_dim)
    return params


def evaluate_bilm_files(
    files: BilmFiles, eval_files: str, base: ml_collections.ConfigDict, output: str | None = None
) -> dict:
    """Perplexity of a bilm-tf/AllenNLP model on the text files `eval_files` (globs); prints a table
    and writes `output` (JSON, the fields of a workdir evaluation; its step is null).

    The config is `bilm_files_config(files, base)`; the evaluation is a workdir's, so an exported
    checkpoint evaluates to the perplexity of the checkpoint itself.
    """
    config = bilm_files_config(files, base)
    outputs = _output_paths(output)
    vocab = Vocabulary.load(files.vocab)
    params = bilm_params(files, config, vocab)
    sentences = read_sentences(eval_files)
    model = bilm_from_config(config.model, len(vocab))
    mesh = parallel.make_mesh()
    params = jax.device_put(params, NamedSharding(mesh, P()))
    result = {"step": None, **Evaluator(model, vocab, config, mesh)(params, sentences)}
    _report(result, f"files @ {files.weights}", outputs)
    return result
