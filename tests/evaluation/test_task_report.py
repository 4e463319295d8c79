"""elmo-report on task workdirs: a row per run, learning curves of the seeds' means with their range,
and one-line errors for an unfinished run or task and biLM workdirs mixed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from elmo_jax.cli import report as report_cli
from elmo_jax.evaluation.report import ReportError
from elmo_jax.evaluation.task_report import inputs_name, is_task_workdir, learning_curves, load_task_run, task_table
from elmo_jax.tasks import schema


def task_workdir(root, name: str, seed: int, sentences: int, test: float, **inputs) -> str:
    config = schema.get_config()
    config.seed, config.task.kind, config.data.train_file = seed, "ner", "data/x/en_ewt-ud-train.iob2"
    for key, value in inputs.items():
        section, field = key.split("__")
        config.inputs[section][field] = value
    directory = root / name
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config.to_dict()))
    results = {"task": "ner", "best_epoch": 3, "epochs": 8, "train_sentences": sentences, "labels": 7,
               "dev": {"score": test + 0.01}, "test": {"score": test}}
    (directory / "results.json").write_text(json.dumps(results))
    return str(directory)


@pytest.fixture
def runs(tmp_path):
    made = []
    for seed, scores in enumerate([(0.50, 0.70), (0.54, 0.74)]):
        for sentences, score in zip((100, 1000), scores):
            made.append(task_workdir(tmp_path, f"w{sentences}_s{seed}", seed, sentences, score, word__dim=50))
    made.append(task_workdir(tmp_path, "e100", 0, 100, 0.60, elmo__workdir="runs/demo", static__file="v/glove.txt"))
    return made


def test_the_table_has_a_row_per_run(runs):
    table = task_table([load_task_run(d) for d in runs]).splitlines()
    assert table[0].startswith("| run | task | inputs | seed |") and len(table) == 2 + len(runs)
    assert table[-1] == ("| e100 | ner (en_ewt-ud-train.iob2): span F1 | elmo:demo + static:glove | 0 | 100 | 3 | "
                         "0.6100 | 0.6000 |")


def test_the_learning_curves_are_the_seeds_means_with_their_range(runs):
    fig = learning_curves([load_task_run(d) for d in runs])
    (ax,) = fig.axes
    curves = {bars.get_label(): bars.lines[0].get_xydata() for bars in ax.containers}
    np.testing.assert_allclose(curves["words"], [[100, 0.52], [1000, 0.72]])
    np.testing.assert_allclose(curves["elmo:demo + static:glove"], [[100, 0.60]])
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "span F1"


def test_inputs_are_named_as_the_legend_shows_them():
    config = schema.get_config().to_dict()
    config["inputs"]["elmo"].update(workdir="runs/demo/", mix="top")
    config["inputs"]["char_cnn"]["dim"] = 30
    assert inputs_name(config) == "elmo:demo (top) + char_cnn"


def test_an_unfinished_run_and_mixed_workdirs_are_one_error(runs, tmp_path, capsys):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text(json.dumps(schema.get_config().to_dict()))
    assert is_task_workdir(str(unfinished)) and not is_task_workdir(str(tmp_path))
    with pytest.raises(ReportError, match="no results.json"):
        load_task_run(str(unfinished))
    bilm = tmp_path / "bilm"
    bilm.mkdir()
    (bilm / "config.json").write_text(json.dumps({"train": {}}))
    assert report_cli.main([runs[0], str(bilm), "--output", str(tmp_path / "r.png")]) == 1
    assert "a task model's workdir" in capsys.readouterr().err
    assert report_cli.main([*runs, "--output", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").stat().st_size > 0
