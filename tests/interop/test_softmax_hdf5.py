"""The softmax file of a bilm-tf/AllenNLP biLM: round trip and one-line errors."""

from __future__ import annotations

import re

import h5py
import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.workdir.runs import load_params
from elmo_jax.interop.bilm_hdf5 import WeightFileError
from elmo_jax.cli.export import main as bilm_main
from elmo_jax.interop.softmax_hdf5 import load_softmax, save_softmax
from tests.training.helpers import make_checkpoint_workdir


def random_softmax(vocab_size: int = 7, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(vocab_size, dim)).astype(np.float32), rng.normal(size=vocab_size).astype(np.float32)


def test_round_trip_in_bilm_tf_layout(tmp_path):
    w, b = random_softmax()
    path = str(tmp_path / "softmax.hdf5")
    save_softmax(w, b, path)
    with h5py.File(path, "r") as f:
        assert f["softmax/W"].shape == (7, 4) and f["softmax/b"].shape == (7,)
        assert f["softmax/W"].dtype == np.float32
    loaded = load_softmax(path, vocab_size=7, dim=4)
    assert loaded["W"].tobytes() == w.tobytes() and loaded["b"].tobytes() == b.tobytes()


def test_rows_must_match_the_vocabulary(tmp_path):
    path = str(tmp_path / "softmax.hdf5")
    save_softmax(*random_softmax(), path)
    with pytest.raises(WeightFileError, match=r"softmax.hdf5: 'softmax/W' has 7 rows but the vocabulary has 8 words"):
        load_softmax(path, vocab_size=8, dim=4)
    with pytest.raises(WeightFileError, match=r"'softmax/W' has shape \(7, 4\), the model needs \[V, 5\]"):
        load_softmax(path, vocab_size=7, dim=5)


def test_missing_dataset_and_unreadable_files(tmp_path):
    path = tmp_path / "partial.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("softmax/W", data=np.zeros((3, 2), np.float32))
    with pytest.raises(WeightFileError, match="partial.hdf5: missing dataset 'softmax/b'"):
        load_softmax(str(path), 3, 2)
    (tmp_path / "text.hdf5").write_text("not hdf5")
    with pytest.raises(WeightFileError, match="text.hdf5: not a readable HDF5 file"):
        load_softmax(str(tmp_path / "text.hdf5"), 3, 2)
    with pytest.raises(WeightFileError, match="nothing.hdf5: softmax file not found"):
        load_softmax(str(tmp_path / "nothing.hdf5"), 3, 2)


def test_non_finite_values_name_the_file_and_the_dataset(tmp_path):
    w, b = random_softmax()
    path = str(tmp_path / "softmax.hdf5")
    b[5] = np.nan
    save_softmax(w, b, path)
    message = f"{path}: dataset 'softmax/b' holds non-finite values (1 of 7, the first nan at [5])"
    with pytest.raises(WeightFileError, match=re.escape(message)):
        load_softmax(path, vocab_size=7, dim=4)


def test_inconsistent_shapes_write_nothing(tmp_path):
    w, b = random_softmax()
    path = tmp_path / "out.hdf5"
    with pytest.raises(WeightFileError, match=r"'softmax/b' has shape \(6,\), expected \(7,\)"):
        save_softmax(w, b[:6], str(path))
    assert not path.exists() and not list(tmp_path.iterdir())


def test_export_writes_the_softmax_and_the_vocabulary_of_a_checkpoint(tmp_path):
    workdir = make_checkpoint_workdir(tmp_path)
    _, params = load_params(workdir)
    vocab = Vocabulary.load(f"{workdir}/vocab.txt")
    out = {name: str(tmp_path / name) for name in ("options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt")}
    assert bilm_main([
        "--workdir", workdir, "--options", out["options.json"], "--weights", out["weights.hdf5"],
        "--softmax_weights", out["softmax.hdf5"], "--vocab", out["vocab.txt"],
    ]) == 0
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines() == vocab.words
    w = np.asarray(params["softmax"]["W"])
    softmax = load_softmax(out["softmax.hdf5"], len(vocab), w.shape[1])
    assert softmax["W"].tobytes() == w.tobytes()
    assert softmax["b"].tobytes() == np.asarray(params["softmax"]["b"]).tobytes()
