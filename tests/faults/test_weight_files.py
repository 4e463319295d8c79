"""Weight files holding a NaN or an infinity, end to end on an export of the trained tiny run: elmo-embed
(each engine), elmo-probe and evaluate.py stop at one line naming the file and the dataset, and write
nothing. Read as they were, they gave NaN embeddings, finite but wrong ones (the C++ engine) or a
probe's accuracies, with exit status 0."""

from __future__ import annotations

import os
import shutil

import h5py
import numpy as np
import pytest

from elmo_jax.cli.embed import main as embed_main
from elmo_jax.cli.probe import main as probe_main
from tests.entry_points import last_line, run_script
from tests.faults.test_outputs import SET, export
from tests.probing.helpers import conllu_splits  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

LSTM_WEIGHT = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"


@pytest.fixture(scope="module")
def exported(tiny_training_run, tmp_path_factory) -> dict[str, str]:
    """The export of the trained tiny run's checkpoint 10: file name (SET) -> path."""
    out = str(tmp_path_factory.mktemp("export"))
    export(tiny_training_run[0], out, 10)
    return {name: os.path.join(out, name) for name in SET}


def with_value(path: str, name: str, index: tuple[int, ...], value: float, directory) -> tuple[str, str]:
    """(a copy of the hdf5 file `path` in `directory` whose dataset `name` holds `value` at `index`,
    the error that names it)."""
    copy = str(directory / os.path.basename(path))
    shutil.copy(path, copy)
    with h5py.File(copy, "a") as f:
        f[name][index] = value
        size = f[name].size
    return copy, (f"error: {copy}: dataset '{name}' holds non-finite values (1 of {size}, the first {value} at "
                  f"{list(index)}): a damaged file, or one written from a run that diverged")


@pytest.mark.parametrize(
    "name, index, value", [(LSTM_WEIGHT, (3, 17), np.nan), ("CNN_proj/b_proj", (2,), np.inf)],
    ids=["nan_in_an_lstm", "inf_in_the_token_projection"],
)
def test_embed_and_probe_refuse_a_weight_file_with_a_non_finite_value(
    exported, conllu_splits, tmp_path, capsys, name, index, value  # noqa: F811
):
    weights, error = with_value(exported["weights.hdf5"], name, index, value, tmp_path)
    corpus = tmp_path / "text.txt"
    corpus.write_text("the cat sat\n")
    files = ["--options", exported["options.json"], "--weights", weights]
    for engine in ("cpu", "xla"):
        output = tmp_path / f"{engine}.hdf5"
        assert embed_main([*files, "--input", str(corpus), "--output", str(output), "--engine", engine]) == 1
        assert capsys.readouterr().err.strip() == error
        assert not output.exists()
    train, _, test = conllu_splits
    assert probe_main([*files, "--train", train, "--test", test, "--output", str(tmp_path / "probe"), "--no_progress"]) == 1
    assert capsys.readouterr().err.strip() == error
    assert not (tmp_path / "probe").exists()


def test_evaluate_refuses_a_softmax_with_a_nan(exported, tmp_path):
    softmax, error = with_value(exported["softmax.hdf5"], "softmax/W", (4, 1), np.nan, tmp_path)
    corpus = tmp_path / "text.txt"
    corpus.write_text("the cat sat\n")
    output = tmp_path / "eval.json"
    done = run_script(
        "evaluate.py", f"--options={exported['options.json']}", f"--weights={exported['weights.hdf5']}",
        f"--softmax_weights={softmax}", f"--vocab={exported['vocab.txt']}", f"--eval_files={corpus}",
        f"--output={output}", compile_cache=str(tmp_path / "jax_cache"),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert last_line(done.stderr) == error
    assert not output.exists()
