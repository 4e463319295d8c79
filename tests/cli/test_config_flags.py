"""The command line of train.py and evaluate.py: help lists the command's own flags; a misspelled
config path, preset or key, or a bad flag, is one `error:` line (exit 1) before any work."""

from __future__ import annotations

import os

import pytest

from elmo_jax.cli import config_flags
from elmo_jax.config import EVAL_SPLITS
from tests.entry_points import ROOT, run_script

TINY = "--config=configs/tests/tiny.py"


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
@pytest.mark.parametrize(
    "args, message",
    [
        ([TINY, "--config.model.lstm.dimm=512"], "error: unknown config key 'model.lstm.dimm' (did you mean 'model.lstm.dim'?)"),
        ([TINY, "--config.opt.learning_rate=0.1"],
         "error: unknown config key 'opt.learning_rate' (did you mean 'train.optimizer.learning_rate'?)"),
        ([TINY, "--noconfig.train.statefull"], "error: unknown config key 'train.statefull' (did you mean 'train.stateful'?)"),
        ([TINY, "--config.model.lstm.projection_dim=8"], "error: config key 'model.lstm.projection_dim' is now 'model.width'"),
        ([TINY, "--config.model.unroll=2"], "error: config key 'model.unroll' is now 'model.lstm.unroll'"),
        ([TINY, "--config.model.lstm_kernel=pallas"], "error: config key 'model.lstm_kernel' is now 'model.lstm.kernel'"),
        (["--config=configs/dmeo.py"], "error: config file 'configs/dmeo.py' not found (did you mean 'configs/demo.py'?)"),
        (["--config=configs/ablations.py:no_higway"], "error: configs/ablations.py:no_higway: unknown ablation 'no_higway'; choose one of"),
        ([TINY, "--config.train.batch_size=four"], "error: flag --config.train.batch_size=four: invalid literal for int()"),
        ([TINY, "--workdirr=x"], "error: Unknown command line flag 'workdirr'"),
    ],
)
def test_a_bad_command_line_is_one_line_and_writes_nothing(tmp_path, script, args, message):
    workdir = tmp_path / "run"
    result = run_script(script, *args, f"--workdir={workdir}", compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == "" and not workdir.exists()


@pytest.mark.parametrize("script, flag", [("train.py", "--workdir"), ("evaluate.py", "--softmax_weights")])
@pytest.mark.parametrize("help_arg", ["--help", "-h"])
def test_help_lists_the_commands_own_flags(tmp_path, script, flag, help_arg):
    result = run_script(script, help_arg, compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    flag_lines = [line for line in lines if line.startswith("  --")]
    assert any(line.startswith(f"  {flag}: ") for line in flag_lines)
    assert any(line.startswith("  --config: ") for line in flag_lines)
    assert not any("orbax" in line.split(":")[0] or "--helpfull" in line for line in flag_lines)  # No library flags.
    assert lines[-1] == config_flags.KEYS_DOC


def test_check_config_arguments_accepts_every_key_of_the_config():
    config_flags.check_config_arguments([TINY, "--config.model.lstm.dim=4", "--config.model.char_cnn.filters=[[1, 2]]",
                                         "--noconfig.train.stateful", "--config.train.optimizer.name", "adam"])


def test_load_config_file_passes_the_argument_after_the_colon():
    config = config_flags.load_config_file("configs/ablations.py:no_highway")
    assert config.model.char_cnn.n_highway == 0
    with pytest.raises(config_flags.CommandLineError, match="not found$"):
        config_flags.load_config_file(os.path.join("no_such_dir", "x.py"))


def test_overrides_without_config_take_the_workdirs_config(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    workdir = f"--workdir={tmp_path}"
    assert config_flags.add_workdir_config([workdir, "--config.eval.stateful=False"]) == [
        f"--config=workdir:{tmp_path}", workdir, "--config.eval.stateful=False"]
    for kept in ([workdir], [TINY, workdir, "--config.eval.stateful=False"], ["--config.eval.stateful=False"]):
        assert config_flags.add_workdir_config(kept) == kept  # No override, a --config, or no workdir.
    with pytest.raises(FileNotFoundError, match="no config.json"):
        config_flags.add_workdir_config([f"--workdir={tmp_path / 'empty'}", "--noconfig.eval.stateful"])


def test_a_missing_workdir_config_is_named_as_given(tmp_path):
    """`--config=workdir:DIR` of a directory without config.json: the recipe as typed, not its
    resolved path, and the missing file."""
    missing = tmp_path / "none"
    result = run_script("train.py", f"--config=workdir:{missing}", f"--workdir={missing}",
                        compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 1
    assert result.stderr == f"error: workdir:{missing}: {missing}: no config.json (is this an elmo-jax training workdir?)\n"


@pytest.mark.parametrize(
    "spec, name",
    [("configs/demo.py", "demo"), ("configs/ablations.py:no_highway", "ablations:no_highway"),
     ("configs/tests/tiny.py", "tests/tiny")],
)
def test_a_recipe_path_missing_outside_the_repository_suggests_its_name(tmp_path, monkeypatch, spec, name):
    monkeypatch.chdir(tmp_path)
    path = spec.split(":")[0]
    with pytest.raises(config_flags.CommandLineError) as error:
        config_flags.load_config_file(spec)
    assert str(error.value) == (
        f"config file {path!r} not found (a shipped recipe: --config={name} works from any directory)")
    assert config_flags.load_config_file(name) == config_flags.load_config_file(os.path.join(ROOT, spec))


def test_train_help_shows_the_recipe_as_a_path_and_by_name(tmp_path):
    result = run_script("train.py", "--help", compile_cache=str(tmp_path / "cache"))
    lines = result.stdout.splitlines()
    assert any("python train.py --config=configs/demo.py" in line for line in lines)
    assert any("elmo-train --config=demo " in line for line in lines)
    (config_line,) = [line for line in lines if line.startswith("  --config: ")]
    assert "configs/demo.py" in config_line and "by name" in config_line and "demo," in config_line


def test_evaluates_split_is_one_list_in_its_help_and_its_check(tmp_path):
    """--split takes data.eval_split's values (schema.EVAL_SPLITS): --help lists them, and another
    value is one error line naming the same list, before any work."""
    splits = "<" + "|".join(EVAL_SPLITS) + ">"
    result = run_script("evaluate.py", "--help", compile_cache=str(tmp_path / "cache"))
    (split_line,) = [line for line in result.stdout.splitlines() if line.startswith("  --split: ")]
    assert split_line.startswith(f"  --split: {splits}: ")
    workdir = tmp_path / "run"
    result = run_script("evaluate.py", f"--workdir={workdir}", "--split=dev", compile_cache=str(tmp_path / "cache"))
    assert result.returncode == 1 and result.stdout == "" and not workdir.exists()
    assert result.stderr == f"error: flag --split=dev: value should be one of {splits}\n"
