"""`elmo-static --method elmo_layers` end to end on a tiny checkpoint workdir (random params): one
file per layer, layer 0 the token embeddings of the words, the LSTM layers pooled over --corpus (a
pipe, read once) or the training text, as inference/static_vectors.py pools them; one-line errors."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from elmo_jax.cli import static as static_cli
from elmo_jax.data.corpus import training_sentences
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.inference import static_vectors
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.static.lookup import StaticVectors
from elmo_jax.workdir.saved_config import saved_config, with_paths_from_start
from tests.training.helpers import make_checkpoint_workdir

CORPUS = ["the cat sat on a mat", "dogs ran past old red barns", "the cat ran", "a mat", "the cat the"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    return make_checkpoint_workdir(tmp_path_factory.mktemp("elmo_layers"))


@pytest.fixture(scope="module")
def embedder(workdir) -> ElmoEmbedder:
    return ElmoEmbedder.from_workdir(workdir, stateful=False, any_token_width=True)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    status = static_cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _fifo(tmp_path, text: str) -> str:
    """A named pipe `text` is written to once, by a thread: it can be read once only."""
    path = str(tmp_path / "corpus.fifo")
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    threading.Thread(target=write, daemon=True).start()
    return path


def test_a_file_per_layer_from_a_piped_corpus(workdir, embedder, tmp_path, capsys) -> None:
    prefix = str(tmp_path / "out" / "elmo")
    corpus = _fifo(tmp_path, "\n".join(CORPUS) + "\n")
    status, stdout, stderr = _run(capsys, "--workdir", workdir, "--method", "elmo_layers", "--corpus", corpus,
                                  "--contexts", "2", "--min_count", "2", "--out", prefix)
    assert status == 0, stderr
    vocab = Vocabulary.load(os.path.join(workdir, "vocab.txt"))
    files = [StaticVectors.read(f"{prefix}.layer{j}.txt") for j in range(3)]
    assert sorted(os.listdir(tmp_path / "out")) == ["elmo.layer0.txt", "elmo.layer1.txt", "elmo.layer2.txt"]
    assert files[0].words == vocab.words
    np.testing.assert_array_equal(files[0].vectors, embedder.token_embeddings(vocab.words))
    sentences = [line.split() for line in CORPUS]
    pooled = static_vectors.pool_layers(embedder, sentences, vocab.words, [1, 2], contexts=2, min_count=2)
    assert pooled.words == ["the", "ran", "a", "cat"]  # The vocabulary's seen twice or more, in its order; not mat.
    for j in (1, 2):
        assert files[j].words == pooled.words and files[j].dim == 16
        np.testing.assert_array_equal(files[j].vectors, pooled.layer(j))
    assert "corpus " + corpus + ": 5 sentences read, 4 embedded; 4 words seen >= 2 times" in stdout
    assert stdout.splitlines()[-1].startswith(f"elmo_layers: layers 0,1,2 of {workdir} in ")


def test_layer_0_of_any_words_and_the_training_text_by_default(workdir, embedder, tmp_path, capsys) -> None:
    words = tmp_path / "words.txt"
    words.write_text("cat\nnever-in-the-vocabulary\nhills\n", encoding="utf-8")
    prefix = str(tmp_path / "elmo")
    status, stdout, stderr = _run(capsys, "--workdir", workdir, "--method", "elmo_layers", "--words", str(words),
                                  "--layers", "0,2", "--out", prefix)
    assert status == 0, stderr
    listed = ["cat", "never-in-the-vocabulary", "hills"]
    layer0, layer2 = StaticVectors.read(f"{prefix}.layer0.txt"), StaticVectors.read(f"{prefix}.layer2.txt")
    assert layer0.words == listed and not os.path.exists(f"{prefix}.layer1.txt")
    np.testing.assert_array_equal(layer0.vectors, embedder.token_embeddings(listed))
    data = with_paths_from_start(saved_config(workdir), workdir).data
    pooled = static_vectors.pool_layers(embedder, training_sentences(data), listed, [2], contexts=100)
    assert layer2.words == pooled.words == ["cat", "hills"]
    np.testing.assert_array_equal(layer2.vectors, pooled.layer(2))
    assert "corpus data.source='text': " in stdout


@pytest.mark.parametrize("args, message", [
    (["--config", "demo"], "--config is for --method glove or skipgram or cbow, not elmo_layers"),
    (["--dim", "8"], "--dim is for --method glove or skipgram or cbow, not elmo_layers"),
    (["--objective", "hierarchical"], "--objective is for --method skipgram or cbow, not elmo_layers"),
    (["--contexts", "0"], "--contexts must be >= 1, got 0"),
    (["--min_count", "0"], "--min_count must be >= 1, got 0"),
    (["--layers", "1,x"], "--layers 1,x: not integers"),
    (["--layers", "3"], "--layers: layer 3: the biLM has layers 0 (token embeddings) to 2"),
    (["--corpus", "MISSING"], "no such file"),
    (["--words", "MISSING"], "vocabulary file not found"),
])
def test_bad_flags_are_one_error_line(args, message, workdir, tmp_path, capsys) -> None:
    args = [str(tmp_path / "missing.txt") if a == "MISSING" else a for a in args]
    prefix = str(tmp_path / "elmo")
    status, _, stderr = _run(capsys, "--workdir", workdir, "--method", "elmo_layers", *args, "--out", prefix)
    assert status == 1 and len(stderr.splitlines()) == 1 and stderr.startswith("error: "), stderr
    assert message in stderr and os.listdir(tmp_path) == []


def test_without_a_workdir_or_over_an_input_is_one_error_line(workdir, tmp_path, capsys) -> None:
    status, _, stderr = _run(capsys, "--method", "elmo_layers", "--out", str(tmp_path / "elmo"))
    assert status == 1 and "--method elmo_layers reads a trained biLM: give --workdir (not --config)" in stderr
    corpus = tmp_path / "corpus.layer1.txt"
    corpus.write_text("the cat\n", encoding="utf-8")
    status, _, stderr = _run(capsys, "--workdir", workdir, "--method", "elmo_layers", "--corpus", str(corpus),
                             "--out", str(tmp_path / "corpus"))
    assert status == 1 and "refusing to overwrite an input" in stderr and len(stderr.splitlines()) == 1
    assert corpus.read_text(encoding="utf-8") == "the cat\n"
