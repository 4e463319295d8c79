"""--manylangs: an ELMoForManyLangs model directory in elmo-embed (its layers equal ELMoForManyLangs'
own sents2elmo), elmo-neighbors and elmo-probe, each from zero LSTM states."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np

from elmo_jax.cli import embed, neighbors, probe
from tests.interop.test_manylangs_bilm import FIXTURES, SENTENCES, expected
from tests.probing.helpers import conllu_splits  # noqa: F401 (a fixture)

MODEL = os.path.join(FIXTURES, "cnn_words")
PLAIN = [0, 1, 3]  # The fixture sentences without whitespace inside a word.


def test_elmo_embed_writes_elmoformanylangs_layers_of_every_line(tmp_path, capsys):
    text = tmp_path / "input.txt"
    text.write_text("".join(" ".join(SENTENCES[i]) + "\n" for i in PLAIN), encoding="utf-8")
    output = tmp_path / "out.hdf5"
    assert embed.main(["--manylangs", MODEL, "--input", str(text), "--output", str(output), "--batch_size", "2"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 3 sentences to {output}"
    want = expected("cnn_words")
    with h5py.File(output, "r") as f:
        for row, i in enumerate(PLAIN):
            np.testing.assert_allclose(f[str(row)][()], want[f"output_layer_-2_sentence_{i}"], atol=1e-5)


def test_one_model_source_at_a_time(tmp_path, capsys):
    assert embed.main(["--manylangs", MODEL, "--workdir", str(tmp_path), "--input", "i", "--output", "o"]) == 1
    assert capsys.readouterr().err.strip() == "error: give one model: --workdir, --options with --weights, or --manylangs"


def test_elmo_neighbors_and_elmo_probe_read_the_directory(conllu_splits, tmp_path, capsys):  # noqa: F811
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\na dog sat on a mat\n", encoding="utf-8")
    assert neighbors.main(["--manylangs", MODEL, "--corpus", str(corpus), "--query", "the cat sat", "--word", "1",
                           "--k", "2", "--no_progress"]) == 0
    assert "cat" in capsys.readouterr().out
    train, dev, test = conllu_splits
    out = tmp_path / "probes"
    assert probe.main(["--manylangs", MODEL, "--train", train, "--dev", dev, "--test", test, "--output", str(out),
                       "--no_progress"]) == 0
    result = json.loads((out / "probe_upos.json").read_text())
    assert result["model"] == "cnn_words" and len(result["layers"]) == 3
