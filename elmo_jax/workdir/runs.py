"""A training workdir's run, read without training: its config.json (checked to fit the checkpoint),
the params of a checkpoint and its vocab.txt checked against them.

Evaluation, export, embedding and probing load a run with `load_run` (or `load_params`): no
optimizer or abstract train state is built. The saved config is completed with the schema's
defaults for keys that an older elmo-jax did not write, and must fit the checkpoint
(`check_config_fits`): its model record, and the shapes of its params.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import jax
import ml_collections

from elmo_jax.config.model_record import model_record, record_difference
from elmo_jax.data.vocab import Vocabulary, checkpoint_vocabulary
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import param_shapes
from elmo_jax.runtime import workdir_files
from elmo_jax.workdir.checkpoints import (
    Checkpoint, CheckpointError, checkpoint_directory, first_spec_difference, restore_params,
)
from elmo_jax.workdir.saved_config import saved_config


def check_config_fits(workdir: str, config: ml_collections.ConfigDict, checkpoint: Checkpoint) -> None:
    """CheckpointError naming the first key (against the checkpoint's model record) or array (against
    the params of the model `config` builds) in which `workdir`'s config.json does not fit `checkpoint`.

    Without the check, an edited config.json either fails inside Flax (a shape) or, for a key that
    changes no shape (the Transformer's norm placement, say), evaluates another model to a
    plausible wrong number.
    """
    where = f"{os.path.join(workdir, workdir_files.CONFIG)} does not fit checkpoint {checkpoint.step}"
    difference = None if checkpoint.record is None else record_difference(model_record(config), checkpoint.record)
    if difference:
        raise CheckpointError(
            f"{where}: it sets {difference.key}={difference.configured!r}, the checkpoint was trained with "
            f"{difference.recorded!r}"
        )
    n_vocab = checkpoint.params["softmax"]["W"].shape[0]
    model = bilm_from_config(config.model, n_vocab)
    wanted = param_shapes(model, config.data.max_chars_per_token)
    mismatch = first_spec_difference(checkpoint.params, wanted, "the model of config.json")
    if mismatch:
        raise CheckpointError(f"{where}: {mismatch}")


def workdir_vocabulary(workdir: str, params: Any) -> Vocabulary:
    """WORKDIR/vocab.txt, checked to have a line per row of the checkpoint's softmax (and word
    embeddings): `checkpoint_vocabulary`."""
    path = os.path.join(workdir, workdir_files.VOCAB)
    if not os.path.exists(path):
        raise CheckpointError(f"{workdir}: no vocab.txt (is this a training workdir?)")
    return checkpoint_vocabulary(path, params)


class Run(NamedTuple):
    """What a training workdir holds of its model: config, params of one checkpoint, its step and
    (when asked for) its vocabulary."""

    config: ml_collections.ConfigDict
    params: Any
    step: int
    vocab: Vocabulary | None


def load_run(
    workdir: str, step: int | None = None, sharding: jax.sharding.Sharding | None = None, with_vocab: bool = True
) -> Run:
    """The run of `workdir` at checkpoint `step` (default: the latest readable): its saved config
    (checked to fit the checkpoint: `check_config_fits`), the params (placed with `sharding`, else
    host arrays), and with `with_vocab` its vocab.txt."""
    config = saved_config(workdir)
    checkpoint = restore_params(checkpoint_directory(workdir), step, sharding)
    check_config_fits(workdir, config, checkpoint)
    vocab = workdir_vocabulary(workdir, checkpoint.params) if with_vocab else None
    return Run(config, checkpoint.params, checkpoint.step, vocab)


def load_params(workdir: str, step: int | None = None) -> tuple[ml_collections.ConfigDict, Any]:
    """(config, params) of `workdir` at checkpoint `step`: `load_run` without the vocabulary, params
    as host NumPy arrays, float32 as trained whatever model.dtype."""
    run = load_run(workdir, step, with_vocab=False)
    return run.config, run.params


def workdir_inputs(workdir: str | None) -> list[tuple[str, str]]:
    """What reading a training workdir's model reads, as `check_not_inputs` takes inputs: its
    config.json, vocab.txt and checkpoints (writing elsewhere in the workdir is fine); none without one."""
    names = (workdir_files.CONFIG, workdir_files.VOCAB, workdir_files.CHECKPOINTS) if workdir else ()
    return [("--workdir", os.path.join(workdir, name)) for name in names]
