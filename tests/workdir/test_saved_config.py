"""A workdir's saved config: config.json completed with the schema's defaults, and the `workdir`
recipe (`--config=workdir:WORKDIR`) that loads it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from elmo_jax.config import ConfigError, schema
from elmo_jax.config.recipes import load_config
from elmo_jax.workdir.saved_config import saved_config, with_paths_from_start


def _workdir_with(tmp_path, saved: dict) -> str:
    (tmp_path / "config.json").write_text(json.dumps(saved))
    return str(tmp_path)


def test_the_saved_keys_are_kept_and_the_missing_ones_take_the_schemas_defaults(tmp_path):
    saved = schema.get_config().to_dict()
    saved["model"]["lstm"]["dim"] = 123
    del saved["eval"]["stateful"]  # A key the run's older elmo-jax did not write.
    config = saved_config(_workdir_with(tmp_path, saved))
    assert config.model.lstm.dim == 123
    assert config.eval.stateful == schema.get_config().eval.stateful


def test_the_workdir_recipe_is_the_saved_config(tmp_path):
    saved = schema.get_config().to_dict()
    saved["train"]["batch_size"] = 7
    workdir = _workdir_with(tmp_path, saved)
    assert load_config(f"workdir:{workdir}").to_dict() == saved_config(workdir).to_dict()


def test_a_directory_without_config_json_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path}: no config.json"):
        saved_config(str(tmp_path))


@pytest.mark.parametrize("text", ['{"model": {"lstm": {"dim": 1', "[1, 2]"], ids=["cut short", "a list"])
def test_a_config_json_that_is_no_config_is_named(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match=f"^{tmp_path}/config.json: not "):
        saved_config(str(tmp_path))


RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_every_committed_config_json_loads_with_todays_keys(tmp_path):
    """The biLM configs of the runs under benchmarks/results/, written before model.lstm.projection_dim
    became model.width, read as complete, valid configs of today (task models' configs, under
    benchmarks/results/tasks/, are elmo-task's)."""
    paths = sorted(p for p in RESULTS.rglob("config.json") if "task" not in json.loads(p.read_text()))
    assert len(paths) >= 20
    for i, path in enumerate(paths):
        saved = json.loads(path.read_text())
        workdir = tmp_path / str(i)
        workdir.mkdir()
        config = saved_config(_workdir_with(workdir, saved))
        old_width = saved["model"].get("lstm", {}).get("projection_dim")
        assert config.model.width == (old_width if old_width is not None else saved["model"]["width"]), path
        assert "projection_dim" not in config.model.lstm, path


def test_a_saved_value_the_schema_does_not_allow_is_an_error_naming_the_file(tmp_path):
    saved = schema.get_config().to_dict()
    saved["train"]["keep_checkpoints"] = 0
    with pytest.raises(ConfigError, match=r"/config.json: config key train.keep_checkpoints=0 is out of range"):
        saved_config(_workdir_with(tmp_path, saved))


def test_relative_data_paths_are_read_from_where_the_run_was_trained(tmp_path, monkeypatch, caplog):
    """`elmo-evaluate --workdir=/abs/run` from another directory found no file of config.json's
    relative data.eval_files; run_info.json records the directory each start ran in."""
    started = tmp_path / "project"
    (started / "corpus").mkdir(parents=True)
    (started / "corpus" / "valid.txt").write_text("a b\n")
    workdir = started / "runs" / "demo"
    workdir.mkdir(parents=True)
    config = schema.get_config()
    config.data.source, config.data.train_files, config.data.eval_files = "text", "corpus/*.txt", "corpus/valid.txt"
    (workdir / "config.json").write_text(json.dumps(config.to_dict()))
    (workdir / "run_info.json").write_text(json.dumps({"starts": [{"directory": str(started)}]}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with caplog.at_level(logging.INFO):
        resolved = with_paths_from_start(saved_config(str(workdir)), str(workdir))
    assert resolved.data.eval_files == str(started / "corpus" / "valid.txt")
    assert resolved.data.train_files == str(started / "corpus" / "*.txt")
    assert any("where the run was trained" in r.getMessage() for r in caplog.records)
    monkeypatch.chdir(started)  # From the directory it was trained in: the paths as written.
    assert with_paths_from_start(saved_config("runs/demo"), "runs/demo").data.eval_files == "corpus/valid.txt"
    (workdir / "run_info.json").unlink()  # A run recorded before the directory: as it was.
    monkeypatch.chdir(elsewhere)
    assert with_paths_from_start(saved_config(str(workdir)), str(workdir)).data.eval_files == "corpus/valid.txt"
