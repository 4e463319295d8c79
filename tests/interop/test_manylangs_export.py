"""ELMoForManyLangs models exported as bilm-tf files (`elmo-export --manylangs`): written where the files
hold the model exactly (no word embedding, char.dic single-byte characters), their layers read back by
elmo-jax's bilm-tf reader then equal the model's on sentences in those characters; otherwise one error
line naming the model directory and the reason."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

from elmo_jax.cli.export import main as export_main
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.interop.manylangs import CHAR_SPECIALS, read_dictionary
from elmo_jax.pretrained import bilm_from_files, bilm_from_manylangs

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manylangs")
# Words cut (extraordinary: max_chars 8), characters char.dic lacks (Q, d, g), sentence boundaries.
SENTENCES = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "extraordinary", "mat"], ["Qx"], []]


@pytest.fixture(scope="module")
def ascii_model(tmp_path_factory) -> str:
    """cnn_chars (word_dim 0) with its non-ASCII char.dic entries renamed to ASCII letters it lacks."""
    directory = str(tmp_path_factory.mktemp("ascii") / "cnn_ascii")
    shutil.copytree(os.path.join(FIXTURES, "cnn_chars"), directory)
    path = os.path.join(directory, "char.dic")
    spare = iter("qzwyQ")
    entries = {(e if e in CHAR_SPECIALS or ord(e) < 128 else next(spare)): k for e, k in read_dictionary(path).items()}
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{entry}\t{k}\n" for entry, k in entries.items())
    return directory


def test_a_byte_model_exports_to_the_same_layers(ascii_model, tmp_path):
    options, weights = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    assert export_main(["--manylangs", ascii_model, "--options", options, "--weights", weights]) == 0
    got = ElmoEmbedder.from_pretrained(bilm_from_files(options, weights), stateful=False).embed_sentences(SENTENCES)
    want = ElmoEmbedder.from_pretrained(bilm_from_manylangs(ascii_model), stateful=False).embed_sentences(SENTENCES)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name, reason", [
    ("cnn_chars", r"char.dic's '日' \(one of 4 such entries\) is not a single-byte character"),
    ("cnn_words", r"its word embedding \(word_dim 6\) has no place in them"),
    ("words_only", r"its word embedding"),
])
def test_a_model_bilm_tf_files_cannot_hold_is_one_error_line(name, reason, tmp_path, capsys):
    directory = os.path.join(FIXTURES, name)
    options, weights = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    assert export_main(["--manylangs", directory, "--options", options, "--weights", weights]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and directory in err[0] and "bilm-tf files cannot hold" in err[0]
    assert re.search(reason, err[0]), err[0]
    assert not os.path.exists(options) and not os.path.exists(weights)
