"""List-valued config keys overridden on the command line: `--config.model.char_cnn.filters='((1,8),(2,8))'`."""

from __future__ import annotations

import json
import sys

import pytest
from absl import flags

from elmo_jax.config import schema
from elmo_jax.cli.config_flags import define_config_flag
from tests.entry_points import run_script
from tests.training.helpers import write_corpus

FILTERS = "--config.model.char_cnn.filters"


def _parse(monkeypatch, *overrides: str):
    """The config `--config=configs/tests/tiny.py *overrides` gives, parsed as train.py and evaluate.py do."""
    flag_values = flags.FlagValues()
    define_config_flag("The config.", flag_values)
    argv = ["prog", "--config=configs/tests/tiny.py", *overrides]
    monkeypatch.setattr(sys, "argv", argv)  # ml_collections finds the overrides in sys.argv.
    flag_values(argv)
    return flag_values.config


@pytest.mark.parametrize("value", ["((1,8),(2,8))", "[[1, 8], [2, 8]]", "([1, 8], (2, 8))"])
def test_list_override_is_stored_as_lists(monkeypatch, value):
    filters = _parse(monkeypatch, f"{FILTERS}={value}").model.char_cnn.filters
    assert filters == [[1, 8], [2, 8]]
    assert type(filters) is list and all(type(f) is list for f in filters)


@pytest.mark.parametrize("value", ["((1,8),(2,8)", "8", "[[1, 8], [2, x]]", "wide"])
def test_malformed_list_override_names_the_key(monkeypatch, value):
    with pytest.raises(flags.IllegalFlagValueError) as error:
        _parse(monkeypatch, f"{FILTERS}={value}")
    assert str(error.value) == f"flag {FILTERS}={value}: expected a Python list literal such as '[[1, 8], [2, 8]]'"


def _list_keys(config, prefix: str = "") -> dict[str, list]:
    """Dotted key -> value of every list-valued key of `config`."""
    found = {}
    for key, value in config.items():
        if hasattr(value, "items"):
            found.update(_list_keys(value, f"{prefix}{key}."))
        elif isinstance(value, list):
            found[f"{prefix}{key}"] = value
    return found


def test_every_list_valued_key_is_overridable(monkeypatch):
    keys = _list_keys(schema.get_config())
    assert "model.char_cnn.filters" in keys
    config = _parse(monkeypatch, *(f"--config.{key}={value[:1]!r}" for key, value in keys.items()))
    for key, value in keys.items():
        node = config
        for part in key.split("."):
            node = node[part]
        assert node == value[:1]


@pytest.mark.slow
def test_train_py_records_the_override_in_config_json(tmp_path):
    """A one-step run with a list override: WORKDIR/config.json, written once the run is accepted, holds it."""
    workdir = tmp_path / "run"
    done = run_script(
        "train.py", "--config=configs/tests/tiny.py", f"{FILTERS}=((1,4),(2,8))", "--config.data.source=text",
        f"--config.data.train_files={write_corpus(str(tmp_path / 'train'), 20, seed=0)}",
        f"--config.data.eval_files={write_corpus(str(tmp_path / 'valid'), 4, seed=1, n_files=1)}",
        "--config.train.num_steps=1", f"--workdir={workdir}", compile_cache=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((workdir / "config.json").read_text())["model"]["char_cnn"]["filters"] == [[1, 4], [2, 8]]


def test_evaluate_py_accepts_the_override(tmp_path):
    """Flags parse; the run stops at the workdir, which holds no trained model."""
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("a b c\n")
    done = run_script(
        "evaluate.py", "--config=configs/tests/tiny.py", f"{FILTERS}=[[1,4],[2,8]]", f"--eval_files={held_out}",
        f"--workdir={tmp_path}", compile_cache=str(tmp_path / "cache"),
    )
    assert done.returncode == 1 and "no config.json" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
def test_entry_point_rejects_a_malformed_list_naming_the_key(tmp_path, script):
    done = run_script(
        script, "--config=configs/tests/tiny.py", f"{FILTERS}=((1,4),(2,8)", f"--workdir={tmp_path}",
        compile_cache=str(tmp_path / "cache"),
    )
    assert done.returncode == 1
    assert f"flag {FILTERS}=((1,4),(2,8): expected a Python list literal" in done.stderr
