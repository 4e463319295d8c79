"""`--print_config` of train.py and evaluate.py: the config the command would run with, as JSON
that parses back to it; exit 0 and nothing written. A bad config is still one `error:` line."""

from __future__ import annotations

import json

import pytest

from elmo_jax.config.recipes import load_config
from elmo_jax.interop.bilm_hdf5 import save_options
from tests.entry_points import run_script

TINY = "--config=configs/tests/tiny.py"


def _printed(tmp_path, script: str, *args: str) -> dict:
    """The config `script` prints with `args` and --print_config (exit 0, on stderr at most the note
    of which of train.num_steps and train.num_epochs ends the run)."""
    result = run_script(script, *args, "--print_config", compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 0 and all(line.startswith("note: train.num_steps=") for line in
                                          result.stderr.splitlines()), result.stderr
    return json.loads(result.stdout)


def _saved_workdir(tmp_path, config) -> str:
    """A directory holding only `config` as config.json: all that --print_config reads of a workdir."""
    workdir = tmp_path / "trained"
    workdir.mkdir()
    (workdir / "config.json").write_text(json.dumps(config.to_dict()))
    return str(workdir)


def test_train_prints_the_recipe_with_its_overrides_and_writes_nothing(tmp_path):
    workdir = tmp_path / "run"
    printed = _printed(tmp_path, "train.py", "--config=ablations:no_highway", f"--workdir={workdir}",
                       "--config.model.lstm.dim=32", "--config.model.char_cnn.filters=((1, 4), (2, 8))",
                       "--noconfig.train.stateful")
    expected = load_config("ablations:no_highway")
    expected.model.lstm.dim = 32
    expected.model.char_cnn.filters = [[1, 4], [2, 8]]
    expected.train.stateful = False
    assert printed == expected.to_dict()
    assert not workdir.exists()


def test_train_needs_a_workdir_but_to_print_the_config(tmp_path):
    assert _printed(tmp_path, "train.py", TINY) == load_config("tests/tiny").to_dict()
    result = run_script("train.py", TINY, compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "error: flags workdir=None, print_config=False: --workdir is required (but with --print_config)\n"


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
@pytest.mark.parametrize(
    "override, message",
    [("--config.model.lstm.dimm=32", "error: unknown config key 'model.lstm.dimm' (did you mean 'model.lstm.dim'?)\n"),
     ("--config.model.lstm.dim=0", "error: config key model.lstm.dim=0 is out of range (allowed: an integer >= 1)\n")],
)
def test_a_bad_config_is_one_error_line(tmp_path, script, override, message):
    workdir = tmp_path / "run"
    result = run_script(script, TINY, override, f"--workdir={workdir}", "--print_config",
                        compile_cache=str(tmp_path / "cache"))
    assert (result.returncode, result.stdout, result.stderr) == (1, "", message)
    assert not workdir.exists()


def test_evaluate_prints_the_workdirs_config_with_the_evaluation_keys_given(tmp_path):
    """evaluation_config's result: the trained model, the command line's evaluation keys; a model key
    the command line changes is its one-line error."""
    trained = load_config("tests/tiny")
    workdir = _saved_workdir(tmp_path, trained)
    printed = _printed(tmp_path, "evaluate.py", f"--workdir={workdir}", "--config.eval.batch_size=2")
    trained.eval.batch_size = 2
    assert printed == trained.to_dict()
    result = run_script("evaluate.py", f"--workdir={workdir}", "--config.model.lstm.dim=32", "--print_config",
                        compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: --config sets model.lstm.dim=32, but the model in ")


def test_evaluate_prints_a_bilm_tf_models_config_from_its_options(tmp_path):
    model = load_config("tests/no_projection")
    options = str(tmp_path / "options.json")
    save_options(model, options)
    files = [f"--options={options}", "--weights=w.hdf5", "--softmax_weights=s.hdf5", "--vocab=v.txt", "--eval_files=x"]
    printed = _printed(tmp_path, "evaluate.py", *files, TINY, "--config.eval.batch_size=2")
    assert printed["model"]["lstm"]["dim"] == printed["model"]["width"] == 8  # The options', not tiny.py's 16.
    assert printed["model"]["dtype"] == "float32" and printed["eval"]["batch_size"] == 2


def test_train_warns_of_an_override_that_the_model_does_not_read(tmp_path):
    result = run_script("train.py", TINY, "--config.model.contextualizer=gated_cnn", "--config.model.lstm.dim=99",
                        f"--workdir={tmp_path / 'run'}", "--print_config", compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 0 and json.loads(result.stdout)["model"]["lstm"]["dim"] == 99
    assert "--config.model.lstm.dim changes nothing: model.contextualizer='gated_cnn' does not read model.lstm" in (
        result.stderr), result.stderr


def test_train_says_which_of_num_steps_and_num_epochs_ends_the_run(tmp_path):
    """Both keys print (num_epochs: 10 beside num_steps: 1800): the note says which one is used."""
    result = run_script("train.py", TINY, "--config.train.num_steps=7", "--print_config",
                        compile_cache=str(tmp_path / "cache"))
    assert result.stderr.splitlines() == [
        "note: train.num_steps=7 ends the run; train.num_epochs=10 is used only when num_steps is 0"
    ]
    result = run_script("train.py", TINY, "--config.train.num_steps=0", "--print_config",
                        compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 0 and result.stderr == ""
