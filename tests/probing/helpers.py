"""Small CoNLL-U files for the probing tests (random sentences over a small vocabulary whose UPOS is
a function of the word: a task a word-level probe can learn), a small bilm-tf biLM, configs/tests/tiny.py's
biLM with or without a token projection, and a file of random static word vectors."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import init_params
from elmo_jax.static.vector_files import write_text
from tests.reference.bilm_numpy import random_bilm_weights, write_bilm_files
from tests.training.helpers import tiny_config

CHARS = 12  # configs/tests/tiny.py's characters per token.

WORDS = {
    "the": "DET", "a": "DET", "cat": "NOUN", "dog": "NOUN", "mat": "NOUN", "sat": "VERB", "ran": "VERB",
    "on": "ADP", "under": "ADP", "red": "ADJ", "big": "ADJ", "3.5": "NUM", "1,000": "NUM", ".": "PUNCT",
}


def conllu_text(sentences: list[list[tuple[str, str]]]) -> str:
    """CoNLL-U of (form, upos) sentences; XPOS is `X<upos>`, DEPREL `dep:<upos>`."""
    blocks = []
    for n, sentence in enumerate(sentences, 1):
        lines = [f"# sent_id = {n}"]
        for i, (form, upos) in enumerate(sentence, 1):
            lines.append("\t".join([str(i), form, form, upos, f"X{upos}", "_", "0", f"dep:{upos.lower()}", "_", "_"]))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def random_sentences(n: int, seed: int, words: dict[str, str] = WORDS) -> list[list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    vocab = sorted(words)
    return [[(w, words[w]) for w in rng.choice(vocab, rng.integers(2, 8))] for _ in range(n)]


def write_conllu(path, sentences: list[list[tuple[str, str]]]) -> str:
    path.write_text(conllu_text(sentences), encoding="utf-8")
    return str(path)


OPTIONS = {
    "lstm": {"dim": 12, "projection_dim": 6, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
             "use_skip_connections": True},
    "char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 6], [3, 8]],
                 "max_characters_per_token": 50, "n_characters": 262, "n_highway": 1},
}


@pytest.fixture(scope="session")
def bilm_files(tmp_path_factory):
    """(options.json, weights.hdf5) of a random 2-layer char-CNN biLM."""
    directory = tmp_path_factory.mktemp("probe_model")
    paths = str(directory / "options.json"), str(directory / "weights.hdf5")
    write_bilm_files(OPTIONS, random_bilm_weights(OPTIONS, seed=3), *paths)
    return paths


@pytest.fixture
def conllu_splits(tmp_path):
    """(train, dev, test) CoNLL-U paths: 60, 15 and 20 random sentences; test has a label train lacks."""
    test = random_sentences(20, seed=2)
    test[3] = [("wow", "INTJ"), *test[3]]
    return (
        write_conllu(tmp_path / "train.conllu", random_sentences(60, seed=0)),
        write_conllu(tmp_path / "dev.conllu", random_sentences(15, seed=1)),
        write_conllu(tmp_path / "test.conllu", test),
    )


def tiny_bilm(projection: bool, seed: int = 0) -> PretrainedBiLM:
    """configs/tests/tiny.py's biLM (filters of 4 + 8 + 8 channels, LSTMs of dim 16 projected to 8) with
    random params; `projection=False`: the char CNN's 20 outputs feed the first LSTM."""
    config = tiny_config(**{"model.char_cnn.projection": projection, "model.dropout": 0.0})
    model = bilm_from_config(config.model, vocab_size=5)
    params = init_params(model, jax.random.key(seed), CHARS)
    return PretrainedBiLM(model, {k: v for k, v in params.items() if k != "softmax"}, CHARS)


def write_static_vectors(path, words, dim: int = 16, seed: int = 0) -> str:
    """A word2vec text file of random `dim`-dimensional vectors of `words`; returns its path."""
    write_text(str(path), list(words), np.random.default_rng(seed).normal(size=(len(words), dim)))
    return str(path)
