"""evaluate.py end to end in subprocesses: a result, or one clear error line and a non-zero exit."""

from __future__ import annotations

import json
import os

import pytest

from tests.entry_points import last_line, run_script
from tests.training.helpers import make_checkpoint_workdir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(workdir with a step-2 checkpoint, evaluate.py flags matching its config, compilation cache)."""
    root = tmp_path_factory.mktemp("evaluate_script")
    workdir = make_checkpoint_workdir(root)
    files = str(root / "corpus" / "part-*.txt")
    flags = ["--config=configs/tests/tiny.py", "--config.data.source=text", f"--config.data.train_files={files}",
             f"--config.data.eval_files={files}"]
    return workdir, flags, str(root / "jax_cache")


def test_evaluates_the_latest_checkpoint(trained):
    workdir, flags, cache = trained
    done = run_script("evaluate.py", *flags, f"--workdir={workdir}", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "valid @ step 2" in done.stdout
    with open(os.path.join(workdir, "eval_valid_2.json")) as f:
        result = json.load(f)
    assert result["step"] == 2 and result["tokens"] > 0 and result["perplexity"] > 1


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no_checkpoint", "{empty}: no checkpoint found (is this a training workdir?)"),
        ("other_model", "{workdir}/checkpoints/2: checkpoint does not match the configured model/optimizer "
                        "(params.lstm_0.B: checkpoint (2, 64) float32, configured (2, 48) float32)"),
        ("empty_eval_set", "no sentences in {empty_file}"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_1(trained, tmp_path, case, expected):
    workdir, flags, cache = trained
    empty, empty_file = str(tmp_path / "empty"), str(tmp_path / "empty.txt")
    os.makedirs(empty)
    open(empty_file, "w").close()
    args = {
        "no_checkpoint": [f"--workdir={empty}"],
        "other_model": [f"--workdir={workdir}", "--config.model.lstm.dim=12"],
        "empty_eval_set": [f"--workdir={workdir}", f"--eval_files={empty_file}"],
    }[case]
    done = run_script("evaluate.py", *flags, *args, compile_cache=cache)
    assert done.returncode == 1
    assert last_line(done.stderr) == "error: " + expected.format(empty=empty, workdir=workdir, empty_file=empty_file)
    assert "Traceback" not in done.stderr
