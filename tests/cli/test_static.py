"""`elmo-static` end to end on a tiny text corpus: each method's file read back (and by gensim), the
vocabulary of a workdir, the defaults, word2vec's objective, the same file for the same seed,
one-line errors. `--method elmo_layers`: tests/cli/test_static_elmo_layers.py."""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np
import pytest

from elmo_jax.cli import static as static_cli
from elmo_jax.config import schema
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.static.vector_files import read_text

SENTENCES = [
    "the cat sat on the mat", "the dog sat on the log", "a cat and a dog met", "the dog saw the cat",
    "a bird sat on a branch", "the cat saw a bird",
]


def _corpus_config(tmp_path) -> schema.ml_collections.ConfigDict:
    """The schema's defaults reading the corpus file of `tmp_path` (data.source='text')."""
    config = schema.get_config()
    config.data.source = "text"
    config.data.train_files = str(tmp_path / "corpus.txt")
    return config


@pytest.fixture
def recipe(tmp_path) -> str:
    """A recipe reading a corpus written beside it."""
    (tmp_path / "corpus.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    path = tmp_path / "recipe.py"
    path.write_text(
        "from elmo_jax.config import schema\n\n\ndef get_config():\n    config = schema.get_config()\n"
        f"    config.data.source = 'text'\n    config.data.train_files = {str(tmp_path / 'corpus.txt')!r}\n"
        "    return config\n",
        encoding="utf-8",
    )
    return str(path)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    status = static_cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("method", ["glove", "skipgram", "cbow"])
def test_each_method_writes_a_vector_per_vocabulary_word_that_reads_back(method, recipe, tmp_path, capsys) -> None:
    out = str(tmp_path / "vectors" / f"{method}.txt")
    status, stdout, stderr = _run(capsys, "--config", recipe, "--method", method, "--dim", "6", "--epochs", "2",
                                  "--out", out)
    assert status == 0, stderr
    vocab = Vocabulary.build(sentence.split() for sentence in SENTENCES)
    words, vectors = read_text(out)
    assert words == vocab.words and vectors.shape == (len(vocab), 6)
    lines = stdout.splitlines()
    assert "epoch 1/2" in stdout and "epoch 2/2" in stdout
    tokens = sum(len(sentence.split()) for sentence in SENTENCES)
    name = method if method == "glove" else f"{method}, negative sampling"
    assert re.fullmatch(
        rf"{name}: {len(vocab)} words x 6 dims, window \d+, 2 epochs over {tokens} tokens in [\d.]+ s; wrote {out}",
        lines[-1],
    )
    assert os.listdir(tmp_path / "vectors") == [f"{method}.txt"]  # No temporary left.
    gensim_models = pytest.importorskip("gensim.models")
    keyed = gensim_models.KeyedVectors.load_word2vec_format(out)
    assert keyed.index_to_key == words and np.array_equal(keyed.vectors, vectors)


@pytest.mark.parametrize("method, window, epochs", [("glove", 10, 15), ("skipgram", 5, 5), ("cbow", 5, 5)])
def test_the_window_and_epochs_default_to_the_methods_own(method, window, epochs, recipe, tmp_path, capsys) -> None:
    status, stdout, stderr = _run(capsys, "--config", recipe, "--method", method, "--dim", "4",
                                  "--out", str(tmp_path / "v.txt"))
    assert status == 0, stderr
    assert f", window {window}, {epochs} epochs over " in stdout.splitlines()[-1]
    assert f"epoch {epochs}/{epochs}" in stdout


@pytest.mark.parametrize("method", ["skipgram", "cbow"])
def test_the_objective_hierarchical_trains_with_gensims_hs_1_negative_0(method, recipe, tmp_path, capsys,
                                                                         monkeypatch) -> None:
    models = []
    gensim_class = static_cli.word2vec.gensim_word2vec()

    class Recorded(gensim_class):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            models.append(self)

    monkeypatch.setattr(static_cli.word2vec, "gensim_word2vec", lambda: Recorded)
    outs = {objective: str(tmp_path / f"{objective}.txt") for objective in ("hierarchical", "negative")}
    for objective, out in outs.items():
        status, stdout, stderr = _run(capsys, "--config", recipe, "--method", method, "--objective", objective,
                                      "--dim", "6", "--epochs", "2", "--out", out)
        assert status == 0, stderr
        name = {"hierarchical": "hierarchical softmax", "negative": "negative sampling"}[objective]
        assert stdout.splitlines()[-1].startswith(f"{method}, {name}: ")
    assert [(m.hs, m.negative) for m in models] == [(1, 0), (0, 5)]
    (words, hierarchical), (_, negative) = read_text(outs["hierarchical"]), read_text(outs["negative"])
    assert words == Vocabulary.build(sentence.split() for sentence in SENTENCES).words
    assert not np.allclose(hierarchical, negative)


def test_a_workdir_gives_its_own_vocabulary_and_a_seed_the_same_file(recipe, tmp_path, capsys) -> None:
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.json").write_text(json.dumps(_corpus_config(tmp_path).to_dict()), encoding="utf-8")
    words = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "never"]  # dog, a, bird, ...: <UNK>; never: absent.
    Vocabulary(words).save(str(workdir / "vocab.txt"))
    outs = [str(tmp_path / name) for name in ("first.txt", "again.txt", "seed1.txt")]
    for out, seed in zip(outs, ("0", "0", "1")):
        status, stdout, stderr = _run(capsys, "--workdir", str(workdir), "--method", "skipgram", "--dim", "5",
                                      "--seed", seed, "--out", out)
        assert status == 0, stderr
        assert stdout.startswith(f"vocabulary: 7 words ({workdir / 'vocab.txt'})")
    read = [read_text(out) for out in outs]
    assert read[0][0] == words
    assert np.array_equal(read[0][1], read[1][1]) and not np.allclose(read[0][1], read[2][1])


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --method, --out"),
    (["--method", "cbow"], "give either --workdir or --config (not both, not neither)"),
    (["--method", "cbow", "--config", "RECIPE", "--workdir", "RUN"], "give either --workdir or --config"),
    (["--method", "word2vec", "--config", "RECIPE"], "value should be one of <glove|skipgram|cbow|elmo_layers>"),
    (["--method", "skipgram", "--config", "RECIPE", "--objective", "softmax"],
     "value should be one of <negative|hierarchical>"),
    (["--method", "glove", "--config", "RECIPE", "--objective", "negative"],
     "--objective is for --method skipgram or cbow, not glove"),
    (["--method", "cbow", "--config", "RECIPE", "--contexts", "5"], "--contexts is for --method elmo_layers, not cbow"),
    (["--method", "glove", "--config", "RECIPE", "--dim", "0"], "--dim must be >= 1, got 0"),
    (["--method", "skipgram", "--config", "RECIPE", "--window", "0"], "--window must be >= 1, got 0"),
    (["--method", "cbow", "--config", "RECIPE", "--epochs", "-1"], "--epochs must be >= 1, got -1"),
    (["--method", "glove", "--config", "RECIPE", "--seed", "-1"], "--seed must be in [0, 2**32 - 1] (as NumPy and "
                                                                 "gensim take it), got -1"),
    (["--method", "glove", "--config", "RECIPE", "--seed", "4294967296"], "--seed must be in [0, 2**32 - 1]"),
    (["--method", "skipgram", "--config", "RECIPE", "--seed", "4294967296"], "--seed must be in [0, 2**32 - 1]"),
    (["--method", "glove", "--config", "RECIPE", "--dim", "100000000000"], "--dim 100,000,000,000: glove's 5 tables "
                                                                          "of [1 words, 100,000,000,000] float32"),
    (["--method", "glove", "--config", "missing_recipe.py"], "config file 'missing_recipe.py' not found"),
    (["--method", "glove", "--workdir", "RUN"], "no config.json (is this an elmo-jax training workdir?)"),
])
def test_bad_flags_are_one_error_line(args, message, recipe, tmp_path, capsys) -> None:
    out = tmp_path / "v.txt"
    args = [recipe if a == "RECIPE" else str(tmp_path) if a == "RUN" else a for a in args]
    status, stdout, stderr = _run(capsys, *args, *(["--out", str(out)] if args else []))
    assert status == 1 and len(stderr.splitlines()) == 1 and stderr.startswith("error: ")
    assert message in stderr and not out.exists()


@pytest.mark.parametrize("target", ["DIRECTORY", "CORPUS", "RECIPE"])
def test_an_output_that_is_a_directory_or_an_input_is_refused(target, recipe, tmp_path, capsys) -> None:
    out = {"DIRECTORY": str(tmp_path), "CORPUS": str(tmp_path / "corpus.txt"), "RECIPE": recipe}[target]
    before = {name: (tmp_path / name).read_bytes() for name in ("corpus.txt", "recipe.py")}
    status, _, stderr = _run(capsys, "--config", recipe, "--method", "glove", "--out", out)
    assert status == 1 and len(stderr.splitlines()) == 1
    assert ("is a directory" if target == "DIRECTORY" else "refusing to overwrite an input") in stderr
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_without_gensim_word2vec_is_one_error_line_before_the_corpus_is_read(recipe, tmp_path, capsys,
                                                                              monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gensim.models", None)  # `import` then raises ImportError.
    status, stdout, stderr = _run(capsys, "--config", recipe, "--method", "cbow", "--out", str(tmp_path / "v.txt"))
    assert status == 1 and stdout == ""
    assert stderr == "error: word2vec needs gensim, an optional extra: pip install -e .[static]\n"


@pytest.mark.parametrize("method, tables", [("glove", 5), ("skipgram", 3)])
def test_a_dim_whose_tables_cannot_fit_is_refused_before_the_corpus_is_counted(
    method, tables, recipe, tmp_path, capsys, monkeypatch
) -> None:
    """A --dim of vectors larger than memory was allocated after reading the whole corpus (an
    out-of-memory kill of a 21 GB process on a 14-word vocabulary)."""
    memory = 2**20  # A machine of 1 MiB: the words x 20,000 dims x 4 bytes x 3 or 5 tables do not fit.
    monkeypatch.setattr(static_cli, "physical_memory_bytes", lambda: memory)

    def not_reached(*args, **kwargs):
        raise AssertionError("the corpus was counted or trained on")

    monkeypatch.setattr(static_cli, "cooccurrence_counts", not_reached)
    monkeypatch.setattr(static_cli.word2vec, "train_word2vec", not_reached)
    out = tmp_path / "v.txt"
    status, _, stderr = _run(capsys, "--config", recipe, "--method", method, "--dim", "20000", "--out", str(out))
    assert status == 1 and len(stderr.splitlines()) == 1 and not out.exists()
    assert re.fullmatch(
        rf"error: --dim 20,000: {method}'s {tables} tables of \[\d+ words, 20,000\] float32 need [\d.]+ MiB, more than "
        r"this machine's 1.0 MiB of memory\n", stderr
    ), stderr


@pytest.mark.parametrize("out, message", [("", "--out is empty"), ("CORPUS/new/v.txt", "is a file, not a directory")])
def test_an_empty_or_unwritable_out_is_refused_before_the_work(out, message, recipe, tmp_path, capsys) -> None:
    out = out.replace("CORPUS", str(tmp_path / "corpus.txt"))
    status, stdout, stderr = _run(capsys, "--config", recipe, "--method", "glove", "--out", out)
    assert status == 1 and stdout == "" and message in stderr and len(stderr.splitlines()) == 1
