"""A pretrained biLM read for inference (embedding, `Elmo`, the probes) from bilm-tf/AllenNLP files,
an elmo-jax training checkpoint, params in memory (a run probing itself while it trains), or an
ELMoForManyLangs model directory."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import ml_collections
import numpy as np
from flax.core import FrozenDict

from elmo_jax.data.char_vocab import CharVocabulary, n_char_ids
from elmo_jax.data.chars import OwnInputs, words_to_char_ids
from elmo_jax.data.manylangs_inputs import ManyLangsInputs
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.interop.bilm_hdf5 import load_options, load_weights
from elmo_jax.interop.export_sets import check_one_export
from elmo_jax.interop.manylangs import read_model
from elmo_jax.interop.manylangs_params import bilm_fields, manylangs_inputs, manylangs_params
from elmo_jax.model.bilm import BiLM, bilm_from_config
from elmo_jax.model.token_encoder_registry import token_encoder_class


class PretrainedBiLM(NamedTuple):
    """A biLM read for inference: the module (float32, no dropout), its params (no softmax), its char
    ids' characters per token, a word-input biLM's vocabulary, a training checkpoint's step, and what
    its input rows spell with: a character vocabulary, a biLM's own inputs (ELMoForManyLangs'
    dictionaries, `OwnInputs`), or None (bytes, as bilm-tf)."""

    model: BiLM
    params: dict
    max_chars: int
    vocab: Vocabulary | None = None
    step: int | None = None
    characters: CharVocabulary | OwnInputs | None = None

    def input_ids(self, words: Sequence[str]) -> np.ndarray:
        """The biLM's input rows `[len(words), C']` int32 of `words` (`<S>`/`</S>` among them,
        `words_to_char_ids`): its char ids (C' = max_chars) or its own inputs' rows. No token's row is
        all zeros, which is padding."""
        return words_to_char_ids(words, self.max_chars, self.characters)


def bilm_from_files(options_path: str, weights_path: str) -> PretrainedBiLM:
    """The biLM of bilm-tf/AllenNLP files (`options.json` + hdf5 weights), of one export when
    elmo-jax wrote them (`check_one_export`)."""
    config = load_options(options_path)
    params = load_weights(config, weights_path)
    check_one_export([options_path, weights_path])
    model = bilm_from_config(config.model, vocab_size=1)  # No softmax is used: any vocabulary size.
    return PretrainedBiLM(model, params, config.data.max_chars_per_token)


def bilm_from_workdir(workdir: str, step: int | None = None) -> PretrainedBiLM:
    """The biLM of an elmo-jax training checkpoint (latest step by default), as `bilm_from_params`;
    a word-input biLM with the workdir's vocab.txt (`checkpoint_vocabulary`)."""
    from elmo_jax.workdir.runs import load_run  # Imported here: only this path needs orbax.

    run = load_run(workdir, step, with_vocab=None)
    return bilm_from_params(run.config, run.params, run.vocab, run.step, run.characters)


def bilm_from_params(
    config: ml_collections.ConfigDict, params: Mapping, vocab: Vocabulary | None = None, step: int | None = None,
    characters: CharVocabulary | ManyLangsInputs | None = None,
) -> PretrainedBiLM:
    """The biLM of a run's `config` with `params` (a checkpoint's, or a training run's in memory),
    for inference: float32 whatever model.dtype it trains in, no dropout, the softmax dropped; a
    word-input biLM keeps `vocab` (its token embeddings are table rows by vocabulary id), a
    char-CNN one `characters` (its character vocabulary; None: bytes; a run continuing an
    ELMoForManyLangs model: its inputs)."""
    model_config = ml_collections.ConfigDict(config.model.to_dict())
    model_config.dtype, model_config.dropout = "float32", 0.0
    word_input = not token_encoder_class(model_config.token_encoder).reads_chars
    model = bilm_from_config(model_config, len(vocab) if word_input else 1, n_char_ids(characters))
    params = {k: v for k, v in params.items() if k != "softmax"}
    kept_vocab = vocab if word_input else None
    return PretrainedBiLM(model, params, config.data.max_chars_per_token, kept_vocab, step, characters)


def bilm_from_manylangs(directory: str) -> PretrainedBiLM:
    """The biLM of an ELMoForManyLangs model directory (interop/manylangs.py reads it, ManyLangsError
    naming the file at fault): ELMoForManyLangs' `sents2elmo` of a fresh Embedder (each sentence from a
    zero state) is `ElmoEmbedder.from_pretrained(it, stateful=False)`'s layers."""
    manylangs = read_model(directory)
    fields = bilm_fields(manylangs)
    frozen = {k: FrozenDict(v) if isinstance(v, dict) else v for k, v in fields.items()}
    return PretrainedBiLM(
        BiLM(**frozen), manylangs_params(manylangs), manylangs.config.max_chars, characters=manylangs_inputs(manylangs)
    )
