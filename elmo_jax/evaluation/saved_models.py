"""Perplexity of a saved model (docs/training.md): a training workdir's checkpoint under its own
config.json, or a bilm-tf/AllenNLP model's files; each result printed as a table and written as
JSON. The computation is `Evaluator`'s (evaluation/perplexity.py), as while a run trains.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Collection, Sequence

import jax
import ml_collections
from jax.sharding import NamedSharding, PartitionSpec as P

from elmo_jax.config.overrides import apply_overrides, as_json, leaves, under
from elmo_jax.data import corpus
from elmo_jax.data.char_vocab import n_char_ids
from elmo_jax.data.sources import DataError, read_sentences
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation.perplexity import Evaluator, format_table
from elmo_jax.interop.bilm_hdf5 import load_weights, options_shape
from elmo_jax.interop.export_sets import check_one_export
from elmo_jax.interop.softmax_hdf5 import load_softmax
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.runtime import data_parallel, workdir_files
from elmo_jax.runtime.atomic_write import check_not_inputs, write_json_atomic
from elmo_jax.workdir.runs import load_run, workdir_inputs
from elmo_jax.workdir.saved_config import saved_config, with_paths_from_start


# Every key of the schema is in exactly one of three groups (`key_group`).
# Keys a config given to evaluate.py may change: how and on what the model is evaluated.
EVALUATION_KEYS = (
    "eval.batch_size", "eval.max_tokens", "eval.stateful", "eval.unroll_steps", "data.streams", "data.source",
    "data.eval_split", "data.eval_files", "data.segmenter", "data.tfds_name", "data.tfds_data_dir",
    "data.tfds_feature", "data.tfds_valid_split", "data.tfds_test_split",
)
# Keys that define the trained model, its inputs or its vocabulary: they must match config.json.
MODEL_KEYS = (
    "model.", "data.max_chars_per_token", "data.char_vocab_file", "data.char_vocab_min_count", "data.vocab_file",
    "data.vocab_min_count", "data.vocab_max_size",
)
# Keys evaluation never reads (training's): a recipe's are left alone, a command-line override that changes one
# is refused.
TRAINING_KEYS = (
    "train.", "init.", "distributed.", "seed", "eval.every_steps", "eval.probe.", "data.train_files",
    "data.tfds_train_split", "data.shuffle", "data.shuffle_buffer", "data.prefetch_batches",
    "data.max_sentence_tokens",
)
_KEY_GROUPS = {"evaluation": EVALUATION_KEYS, "model": MODEL_KEYS, "training": TRAINING_KEYS}


def key_group(key: str) -> str:
    """'evaluation', 'model' or 'training': what evaluate.py does with config key `key` (above)."""
    groups = [name for name, patterns in _KEY_GROUPS.items() if under(key, patterns)]
    if len(groups) != 1:
        raise KeyError(f"config key {key!r} is in {len(groups)} of evaluation's key groups, not one")
    return groups[0]


def check_training_overrides(
    given: ml_collections.ConfigDict, overrides: Collection[str], trained: dict[str, Any] | None = None
) -> None:
    """ConfigMismatchError for a command-line override of a training key, which evaluation does not
    read, that sets another value than the trained run's (`trained`: its config.json's leaves; None
    for a bilm-tf/AllenNLP model, which has no training config: any such override)."""
    values = leaves(given.to_dict())
    for key in sorted(overrides):
        if key_group(key) == "training" and (trained is None or as_json(values[key]) != trained.get(key)):
            raise ConfigMismatchError(
                f"--config.{key} is a training key, which evaluation does not read: drop the override "
                "(evaluation reads eval.batch_size, eval.max_tokens, eval.stateful, eval.unroll_steps and the data "
                "keys of what is evaluated)"
            )


class ConfigMismatchError(ValueError):
    """A config given for evaluation changes the model that the workdir trained."""


def evaluation_config(
    workdir: str, given: ml_collections.ConfigDict | None = None, recipe: str = "", overrides: Collection[str] = ()
) -> ml_collections.ConfigDict:
    """The config that evaluates `workdir`: its config.json (another model would give a wrong
    perplexity), with the evaluation keys of `given`; ConfigMismatchError for a model key (MODEL_KEYS)
    that `given` sets to another value and for a command-line override that sets a training key
    (TRAINING_KEYS) to another value (a recipe's training keys are not used). `recipe` (the --config file
    `given` was loaded from) and `overrides` (the keys set on the command line) let the error say
    which of the two to change; without a recipe every key counts as an override."""
    config = with_paths_from_start(saved_config(workdir), workdir)
    if given is None:
        return config
    saved = leaves(config.to_dict())
    check_training_overrides(given, overrides, saved)
    for key, value in leaves(given.to_dict()).items():
        group = key_group(key)
        if group == "evaluation":
            apply_overrides(config, {key: value}, source="--config")
        elif group == "model" and key in saved and as_json(value) != saved[key]:
            raise _mismatch(workdir, key, value, saved[key], "" if key in overrides else recipe)
    return config


def _mismatch(workdir: str, key: str, value: Any, trained: Any, recipe: str) -> ConfigMismatchError:
    """The error for `key` given as `value` where `workdir` trained with `trained`, naming what set
    it: the recipe `recipe`, or ('') a command-line override."""
    reason = (f"but the model in {workdir} was trained with {key}={trained!r} (its config.json): "
              "evaluation always builds the trained model")
    if recipe:
        return ConfigMismatchError(
            f"--config={recipe} sets {key}={value!r}, {reason}, give no --config (or the recipe it was trained with)"
        )
    return ConfigMismatchError(f"--config sets {key}={value!r}, {reason}, drop the override")


def _report(result: dict, title: str, paths: list[str]) -> None:
    """Writes `result` as JSON to each of `paths` and prints its table (process 0)."""
    if jax.process_index() == 0:
        for path in paths:
            write_json_atomic(path, result)
        print(format_table(result, title), flush=True)


def _output_paths(output: str | None, inputs: Sequence[tuple[str, str]]) -> list[str]:
    """[output] with its directory created (before the evaluation: a bad path fails at once); an
    output that is one of `inputs` is refused."""
    if not output:
        return []
    check_not_inputs([("--output", output)], inputs)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    return [output]


def evaluate_checkpoint(
    workdir: str, given: ml_collections.ConfigDict | None = None, split: str | None = None, eval_files: str = "",
    step: int | None = None, output: str | None = None, recipe: str = "", overrides: Collection[str] = (),
) -> dict:
    """Perplexity of a checkpoint under `evaluation_config(workdir, given, recipe, overrides)`; prints
    a table and writes `eval_<name>_<step>.json` (and `output`), `name` the split or 'files'
    (`eval_files`, data.source='text', where a `split` is a DataError)."""
    config = evaluation_config(workdir, given, recipe, overrides)
    outputs = _output_paths(output, workdir_inputs(workdir))
    if split is not None:
        corpus.check_split_applies(config.data, split, eval_files)
    split = split or config.data.eval_split
    corpus.warn_if_eval_unsegmented(config.data, eval_files)
    sentences = corpus.eval_sentences(config.data, split, eval_files)
    if not sentences:
        raise DataError(f"the evaluation set ({eval_files or split}) has no sentences")
    mesh = data_parallel.make_mesh()
    run = load_run(workdir, step, NamedSharding(mesh, P()))  # The params alone, replicated.
    model = bilm_from_config(config.model, len(run.vocab), n_char_ids(run.characters))
    evaluator = Evaluator(model, run.vocab, config, mesh, run.characters)
    result = {"step": run.step, **evaluator(run.params, sentences)}
    name = corpus.eval_set_name(config.data.source, split, eval_files)
    path = os.path.join(workdir, workdir_files.evaluation_file(name, run.step, config.eval.stateful))
    _report(result, f"{name} @ step {run.step}", [path, *outputs])
    return result


@dataclasses.dataclass(frozen=True)
class BilmFiles:
    """A bilm-tf/AllenNLP model: options.json, hdf5 weights, softmax hdf5 and vocabulary (line i
    is softmax row i)."""

    options: str
    weights: str
    softmax_weights: str
    vocab: str


def bilm_params(files: BilmFiles, config: ml_collections.ConfigDict, vocab: Vocabulary) -> dict:
    """Host params of `files`: the weight file's, and the softmax `W [V, P]`, `b [V]` (checked
    against the vocabulary and the model's P); files of different exports are refused."""
    params = load_weights(config, files.weights)
    params["softmax"] = load_softmax(files.softmax_weights, len(vocab), config.model.width)
    check_one_export([files.options, files.weights, files.softmax_weights])
    return params


def bilm_files_config(files: BilmFiles, base: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """`base` with the model of `files`' options.json, in float32: the config `evaluate_bilm_files`
    evaluates with."""
    config = ml_collections.ConfigDict(base.to_dict())
    apply_overrides(config, {**options_shape(files.options), "model.dtype": "float32"}, files.options)
    return config


def evaluate_bilm_files(
    files: BilmFiles, eval_files: str, base: ml_collections.ConfigDict, output: str | None = None
) -> dict:
    """Perplexity of a bilm-tf/AllenNLP model on the text files `eval_files` (globs) under `base`
    (configs/default.py's, or a given --config) with the biLM's shape from its options.json, in
    float32; prints a table and writes `output` (a workdir evaluation's fields, step null)."""
    config = bilm_files_config(files, base)
    outputs = _output_paths(output, [(f"--{f.name}", getattr(files, f.name)) for f in dataclasses.fields(files)])
    vocab = Vocabulary.load(files.vocab)
    params = bilm_params(files, config, vocab)
    corpus.warn_if_eval_unsegmented(config.data, eval_files)
    sentences = read_sentences(eval_files, config.data.segmenter)
    model = bilm_from_config(config.model, len(vocab))
    mesh = data_parallel.make_mesh()
    params = jax.device_put(params, NamedSharding(mesh, P()))
    result = {"step": None, **Evaluator(model, vocab, config, mesh)(params, sentences)}
    _report(result, f"files @ {files.weights}", outputs)
    return result
