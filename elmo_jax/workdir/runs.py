"""A training workdir's run, read without training (no optimizer or train state is built): its
config.json, vocab.txt and chars.txt, each checked to fit the params of a checkpoint."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import jax
import ml_collections

from elmo_jax.config.model_record import BYTES, CHARACTERS, VOCABULARY, model_record, record_difference
from elmo_jax.data.char_vocab import CharVocabulary, CharVocabularyError, checkpoint_characters
from elmo_jax.data.chars import N_CHARACTERS
from elmo_jax.data.manylangs_inputs import FINGERPRINT_PREFIX, ManyLangsInputs, checkpoint_inputs
from elmo_jax.data.vocab import Vocabulary, checkpoint_vocabulary
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import param_shapes
from elmo_jax.model.token_encoder_registry import token_encoder_class
from elmo_jax.runtime import workdir_files
from elmo_jax.workdir.checkpoints import (
    Checkpoint, CheckpointError, checkpoint_directory, first_spec_difference, restore_params,
)
from elmo_jax.workdir.saved_config import saved_config


def check_config_fits(workdir: str, config: ml_collections.ConfigDict, checkpoint: Checkpoint) -> None:
    """CheckpointError naming the first model-record key or array in which `workdir`'s config.json
    does not fit `checkpoint` (an edited key that changes no shape would give a wrong number)."""
    where = f"{os.path.join(workdir, workdir_files.CONFIG)} does not fit checkpoint {checkpoint.step}"
    difference = None if checkpoint.record is None else record_difference(model_record(config), checkpoint.record)
    if difference:
        raise CheckpointError(
            f"{where}: it sets {difference.key}={difference.configured!r}, the checkpoint was trained with "
            f"{difference.recorded!r}"
        )
    n_vocab = checkpoint.params["softmax"]["W"].shape[0]
    model = bilm_from_config(config.model, n_vocab, _char_table_rows(checkpoint))
    wanted = param_shapes(model, config.data.max_chars_per_token)
    mismatch = first_spec_difference(checkpoint.params, wanted, "the model of config.json")
    if mismatch:
        raise CheckpointError(f"{where}: {mismatch}")


def workdir_vocabulary(workdir: str, checkpoint: Checkpoint) -> Vocabulary:
    """WORKDIR/vocab.txt, checked against the params and the recorded vocabulary of `checkpoint`
    (`checkpoint_vocabulary`)."""
    path = os.path.join(workdir, workdir_files.VOCAB)
    if not os.path.exists(path):
        raise CheckpointError(f"{workdir}: no vocab.txt (is this a training workdir?)")
    fingerprint = None if checkpoint.record is None else checkpoint.record.get(VOCABULARY)
    return checkpoint_vocabulary(path, checkpoint.params, fingerprint)


def _char_table_rows(checkpoint: Checkpoint) -> int:
    """The rows of the checkpoint's char table (bilm-tf's 262 for a word-input biLM, which has none)."""
    table = checkpoint.params.get("encoder", {}).get("char_embed")
    return N_CHARACTERS if table is None else table.shape[0]


def workdir_characters(workdir: str, checkpoint: Checkpoint) -> CharVocabulary | ManyLangsInputs | None:
    """WORKDIR/chars.txt, checked against the char table and the recorded characters of `checkpoint`
    (`checkpoint_characters`); None for a run that spells bytes. A run continuing an ELMoForManyLangs
    model: WORKDIR/manylangs_inputs.json, its dictionaries (`checkpoint_inputs`)."""
    path = os.path.join(workdir, workdir_files.CHARS)
    recorded = None if checkpoint.record is None else checkpoint.record.get(CHARACTERS)
    manylangs = os.path.join(workdir, workdir_files.MANYLANGS_INPUTS)
    if os.path.exists(manylangs) or str(recorded).startswith(FINGERPRINT_PREFIX):
        return checkpoint_inputs(manylangs, recorded)
    if os.path.exists(path):
        return checkpoint_characters(path, _char_table_rows(checkpoint), None if recorded == BYTES else recorded)
    if (recorded is not None and recorded != BYTES) or _char_table_rows(checkpoint) != N_CHARACTERS:
        raise CharVocabularyError(
            f"{workdir}: no {workdir_files.CHARS}, but checkpoint {checkpoint.step} was trained with a character "
            "vocabulary; restore the file the run wrote"
        )
    return None


class Run(NamedTuple):
    """A workdir's config, the params and step of one checkpoint, (when asked for) its vocabulary,
    and its character vocabulary (None: bytes)."""

    config: ml_collections.ConfigDict
    params: Any
    step: int
    vocab: Vocabulary | None
    characters: CharVocabulary | ManyLangsInputs | None = None


def load_run(
    workdir: str, step: int | None = None, sharding: jax.sharding.Sharding | None = None,
    with_vocab: bool | None = True,
) -> Run:
    """`workdir`'s run at checkpoint `step` (default: the latest readable), params placed with
    `sharding`; its vocabulary `with_vocab` (None: only where the token encoder reads word ids)."""
    config = saved_config(workdir)
    if with_vocab is None:
        with_vocab = not token_encoder_class(config.model.token_encoder).reads_chars
    checkpoint = restore_params(checkpoint_directory(workdir), step, sharding)
    check_config_fits(workdir, config, checkpoint)
    vocab = workdir_vocabulary(workdir, checkpoint) if with_vocab else None
    return Run(config, checkpoint.params, checkpoint.step, vocab, workdir_characters(workdir, checkpoint))


def load_params(workdir: str, step: int | None = None) -> tuple[ml_collections.ConfigDict, Any]:
    """(config, params) of `workdir` at checkpoint `step`: `load_run`'s, as host NumPy arrays."""
    run = load_run(workdir, step, with_vocab=False)
    return run.config, run.params


def workdir_inputs(workdir: str | None) -> list[tuple[str, str]]:
    """The files reading a workdir's model reads, as `check_not_inputs` takes inputs."""
    names = (workdir_files.CONFIG, workdir_files.VOCAB, workdir_files.CHARS, workdir_files.MANYLANGS_INPUTS,
             workdir_files.CHECKPOINTS)
    return [("--workdir", os.path.join(workdir, name)) for name in names] if workdir else []
