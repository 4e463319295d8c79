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


def restore_checkpoint(workdir: str, step: int | None = None) -> tuple[ml_collections.ConfigDict, dict]:
    """(config, host params) of a training workdir, with the config it was trained with (config.json)."""
    config_path = os.path.join(workdir, "config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{workdir}: no config.json (is this an elmo-jax training workdir?)")
    with open(config_path, encoding="utf-8") as f:
        config = ml_collections.ConfigDict(json.load(f))
    params = restore_model(config, workdir, step)[1]
    return config, jax.device_get(params)


def evaluate_checkpoint(
    config: ml_collections.ConfigDict, workdir: str, split: str | None, eval_files: str = "", step: int | None = None
) -> dict:
    """Perplexity of a checkpoint; prints a table and writes `eval_<split>_<step>.json`."""
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
