"""Restore and evaluate a checkpoint from a training workdir (the body of `evaluate.py`)."""

from __future__ import annotations

import json
import os

import jax
import ml_collections

from elmo_jax.data import corpus
from elmo_jax.data.sources import DataError
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation import Evaluator, format_table
from elmo_jax.training import optim, parallel
from elmo_jax.training.checkpoint import CheckpointError, Checkpointer
from elmo_jax.training.loop import setup_model
from elmo_jax.training.state import abstract_train_state
from elmo_jax.training.metrics_writer import write_json_atomic


def restore_model(config: ml_collections.ConfigDict, workdir: str, step: int | None = None):
    """(model, params, vocab, step, mesh) from the checkpoint of `workdir` (latest or `step`)."""
    vocab_path = os.path.join(workdir, "vocab.txt")
    ckpt_dir = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(ckpt_dir) or not os.path.exists(vocab_path):
        raise CheckpointError(f"{workdir}: no checkpoint found (is this a training workdir?)")
    vocab = Vocabulary.load(vocab_path)
    model = setup_model(config, vocab)
    mesh = parallel.make_mesh()
    # The schedule does not change the optimizer state's structure: any valid step count will do.
    tx, _ = optim.make_optimizer(config.train, config.train.optimizer.warmup_steps + 1)
    abstract = abstract_train_state(
        model, tx, config.seed, config.train.batch_size, config.data.max_chars_per_token
    )
    target = parallel.with_shardings(abstract, mesh)
    checkpointer = Checkpointer(ckpt_dir, read_only=True)
    state, _, step = checkpointer.restore(target, step)
    checkpointer.close()
    return model, state.params, vocab, step, mesh


def saved_config(workdir: str) -> ml_collections.ConfigDict:
    """The config `workdir` was trained with (its config.json): the only one that builds its model."""
    config_path = os.path.join(workdir, "config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{workdir}: no config.json (is this an elmo-jax training workdir?)")
    with open(config_path, encoding="utf-8") as f:
        return ml_collections.ConfigDict(json.load(f))


def restore_checkpoint(workdir: str, step: int | None = None) -> tuple[ml_collections.ConfigDict, dict]:
    """(config, host params) of a training workdir, with the config it was trained with (config.json)."""
    config = saved_config(workdir)
    params = restore_model(config, workdir, step)[1]
    return config, jax.device_get(params)


# Keys a config given to evaluate.py may change: how and on what the model is evaluated.
EVALUATION_KEYS = (
    "eval.", "data.source", "data.eval_split", "data.eval_files", "data.tfds_name", "data.tfds_data_dir",
    "data.tfds_feature", "data.tfds_valid_split", "data.tfds_test_split",
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


def evaluate_checkpoint(
    workdir: str,
    given: ml_collections.ConfigDict | None = None,
    split: str | None = None,
    eval_files: str = "",
    step: int | None = None,
) -> dict:
    """Perplexity of a checkpoint; prints a table and writes `eval_<split>_<step>.json`.

    The config is `evaluation_config(workdir, given)`: the trained model, `given`'s evaluation keys.
    """
    config = evaluation_config(workdir, given)
    split = split or config.data.eval_split
    sentences = corpus.eval_sentences(config.data, split, eval_files)
    if not sentences:
        raise DataError(f"the evaluation set ({eval_files or split}) has no sentences")
    model, params, vocab, step, mesh = restore_model(config, workdir, step)
    result = {"step": step, **Evaluator(model, vocab, config, mesh)(params, sentences)}
    name = "files" if eval_files else split
    if jax.process_index() == 0:
        write_json_atomic(os.path.join(workdir, f"eval_{name}_{step}.json"), result)
        print(format_table(result, f"{name} @ step {step}"), flush=True)
    return result
