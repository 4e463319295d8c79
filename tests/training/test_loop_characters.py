"""A run with a character vocabulary (data.char_vocab_file), end to end: trained, saved with its
chars.txt, recorded in its checkpoints, read back by evaluation, the embedder and `Elmo` with its
characters, and refused where the characters would not fit (resumed with another file or with
bytes, chars.txt missing, a bytes run resumed with characters)."""

from __future__ import annotations

import logging
import os
import shutil

import jax
import numpy as np
import pytest

from elmo_jax.config.model_record import BYTES, CHARACTERS
from elmo_jax.data.char_vocab import CharVocabulary, CharVocabularyError
from elmo_jax.data.chars import N_CHARACTERS, words_to_char_ids
from elmo_jax.data.sources import DataError
from elmo_jax.elmo import Elmo, batch_to_ids
from elmo_jax.evaluation.saved_models import evaluate_checkpoint
from elmo_jax.inference.embedder import ElmoEmbedder, encode_chars
from elmo_jax.pretrained import bilm_from_workdir
from elmo_jax.training.checkpoint import CheckpointError
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.workdir.checkpoints import checkpoint_directory, restore_params
from elmo_jax.workdir.runs import load_run
from elmo_jax.workdir.saved_config import saved_config
from tests.training.helpers import tiny_config

WORDS = ["北京", "上海", "天安门", "我", "爱", "the", "cat", "北京人", "跑"]
LISTED = ["北", "京", "我", "爱", "人"]  # 上海, 天安门 and 跑 stay bytes.


def write_corpus(directory, n_sentences: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    directory.mkdir()
    with open(directory / "part-0.txt", "w", encoding="utf-8") as f:
        for _ in range(n_sentences):
            f.write(" ".join(rng.choice(WORDS, rng.integers(2, 8))) + "\n")
    return str(directory / "part-*.txt")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def char_run(tmp_path_factory) -> dict:
    """A real 10-step run of the tiny model reading 8 units per token, 5 listed characters."""
    root = tmp_path_factory.mktemp("char_run")
    chars = str(root / "chars.txt")
    CharVocabulary(LISTED).save(chars)
    config = tiny_config(**{
        "data.source": "text", "data.train_files": write_corpus(root / "train", 40, 0),
        "data.eval_files": write_corpus(root / "valid", 8, 1), "data.char_vocab_file": chars,
        "data.max_chars_per_token": 8, "model.softmax.n_negative_samples": 8,
    })
    workdir = str(root / "run")
    records = _Records()
    logging.getLogger().addHandler(records)
    try:
        result = train_and_evaluate(config, workdir)
    finally:
        logging.getLogger().removeHandler(records)
    return {"workdir": workdir, "chars": chars, "config": config, "result": result, "warnings": records.messages}


def test_the_run_saves_and_records_its_characters(char_run):
    workdir, characters = char_run["workdir"], CharVocabulary(LISTED)
    assert CharVocabulary.load(os.path.join(workdir, "chars.txt")) == characters
    checkpoint = restore_params(checkpoint_directory(workdir))
    assert checkpoint.record[CHARACTERS] == characters.fingerprint()
    assert checkpoint.params["encoder"]["char_embed"].shape[0] == N_CHARACTERS + len(LISTED)
    assert np.isfinite(char_run["result"]["perplexity"])


def test_cut_words_are_counted_in_one_warning(char_run):
    """8 ids a token: 6 units. 天安门 (9 bytes) and 上海 (6 bytes, fits) are unlisted: one word is cut."""
    cut = [m for m in char_run["warnings"] if "are read cut" in m]
    assert cut == [
        "1 of the vocabulary's 9 words are longer than data.max_chars_per_token - 2 = 6 units (a listed character "
        "or a byte) and are read cut ('天安门' the first)"
    ]


def test_evaluation_reads_the_workdir_with_its_characters(char_run, capsys):
    run = load_run(char_run["workdir"])
    assert run.characters == CharVocabulary(LISTED)
    result = evaluate_checkpoint(char_run["workdir"])
    assert result["perplexity"] == pytest.approx(char_run["result"]["perplexity"], rel=1e-5)


def test_the_embedder_spells_with_the_characters(char_run):
    pretrained = bilm_from_workdir(char_run["workdir"])
    embedder = ElmoEmbedder.from_workdir(char_run["workdir"])
    words = ["北京", "天安门", "cat"]
    layers = embedder.embed_sentence(words)  # [L + 1, T, 2P]; layer 0: the token embeddings twice.
    ids = words_to_char_ids(words, 8, pretrained.characters)
    assert not np.array_equal(ids, words_to_char_ids(words, 8))  # 北京 is 2 ids, not 6 bytes.
    expected = np.asarray(encode_chars(pretrained.model, pretrained.params, ids))
    np.testing.assert_allclose(layers[0][:, : expected.shape[1]], expected, rtol=1e-5, atol=1e-6)


def test_elmo_reads_the_workdir_with_its_characters(char_run):
    elmo = Elmo(None, None, 1, workdir=char_run["workdir"], dropout=0.0)
    assert elmo.characters == CharVocabulary(LISTED) and elmo.max_chars == 8
    ids = batch_to_ids([["我", "爱", "北京"], ["跑"]], elmo.max_chars, elmo.characters)
    assert ids.max() > N_CHARACTERS
    variables = elmo.init(jax.random.key(0), ids)
    out = elmo.apply(variables, ids)["elmo_representations"][0]
    assert out.shape[:2] == (2, 3) and np.all(np.isfinite(out))
    with pytest.raises(ValueError, match="character vocabulary, got char ids of 50: use batch_to_ids"):
        elmo.apply(variables, batch_to_ids([["我"]], 50, elmo.characters))


def _copy(char_run, tmp_path) -> str:
    workdir = str(tmp_path / "run")
    shutil.copytree(char_run["workdir"], workdir)
    return workdir


@pytest.mark.parametrize("other", ["another file", "bytes"])
def test_resuming_with_other_characters_is_refused(char_run, tmp_path, other):
    workdir = _copy(char_run, tmp_path)
    config = saved_config(workdir)
    config.train.num_steps = 12
    if other == "bytes":
        config.data.char_vocab_file = ""
    else:
        config.data.char_vocab_file = str(tmp_path / "other.txt")
        CharVocabulary(LISTED[::-1]).save(config.data.char_vocab_file)
    with pytest.raises(DataError, match=r"not the character vocabulary .*chars\.txt was trained with"):
        train_and_evaluate(config, workdir)
    assert CharVocabulary.load(os.path.join(workdir, "chars.txt")) == CharVocabulary(LISTED)


def test_a_missing_chars_file_is_named(char_run, tmp_path):
    workdir = _copy(char_run, tmp_path)
    os.remove(os.path.join(workdir, "chars.txt"))
    with pytest.raises(CharVocabularyError, match="no chars.txt, but checkpoint 10 was trained with a character"):
        load_run(workdir)


def test_a_bytes_run_resumed_with_characters_is_refused(tiny_training_run, char_run, tmp_path):
    workdir = str(tmp_path / "run")
    shutil.copytree(tiny_training_run[0], workdir)
    assert restore_params(checkpoint_directory(workdir)).record[CHARACTERS] == BYTES
    config = saved_config(workdir)
    config.train.num_steps = 12
    config.data.char_vocab_file = char_run["chars"]
    with pytest.raises(CheckpointError, match="characters"):
        train_and_evaluate(config, workdir)
    assert not os.path.exists(os.path.join(workdir, "chars.txt"))
