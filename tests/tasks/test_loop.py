"""The task trainer on tiny files the tests write: it learns a toy tagging task, resumes a killed run
exactly, refuses a workdir trained with another config, and its command line prints its config and
its one-line errors."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import jax
import numpy as np
import pytest

from elmo_jax.sections import ConfigError
from elmo_jax.tasks import features, loop, schema
from elmo_jax.tasks import trained as trained_module
from elmo_jax.tasks.trained import TrainedTask
from elmo_jax.training.metrics_writer import MetricsWriter
from tests.probing.helpers import tiny_bilm

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "big", "red"]
UPOS = {"the": "DET", "a": "DET", "cat": "NOUN", "dog": "NOUN", "sat": "VERB", "ran": "VERB", "on": "ADP",
        "mat": "NOUN", "big": "ADJ", "red": "ADJ"}


def write_conllu(path, sentences: int, seed: int) -> str:
    """Random sentences whose UPOS follow from their words, each word headed by the one before."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for s in range(sentences):
            f.write(f"# sent_id = {s}\n")
            for i in range(1, rng.randint(2, 9) + 1):
                word = rng.choice(WORDS)
                f.write(f"{i}\t{word}\t{word}\t{UPOS[word]}\t_\t_\t{i - 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n")
            f.write("\n")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("task_files")
    return {split: write_conllu(root / f"{split}.conllu", n, seed)
            for split, n, seed in (("train", 40, 0), ("dev", 12, 1), ("test", 12, 2))}


def tiny_config(files, **overrides):
    config = schema.get_config()
    config.data.train_file, config.data.dev_file, config.data.test_file = files["train"], files["dev"], files["test"]
    config.inputs.word.dim = 16
    config.encoder.dim = 16
    config.head.kind = "softmax"
    config.train.batch_size = 8
    config.train.epochs = 6
    config.train.learning_rate = 0.02
    for key, value in overrides.items():
        section, name = key.rsplit(".", 1)
        node = config
        for part in section.split("."):
            node = node[part]
        node[name] = value
    return config


@pytest.fixture(scope="module")
def trained(files, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("upos"))
    return workdir, loop.train_task(tiny_config(files), workdir, progress=False)


def test_a_tagger_learns_the_toy_tags_and_writes_its_results(trained):
    workdir, results = trained
    assert results["dev"]["score"] > 0.9 and results["test"]["score"] > 0.9, results
    with open(os.path.join(workdir, loop.RESULTS), encoding="utf-8") as f:
        assert json.load(f) == json.loads(json.dumps(results))
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert [r["epoch"] for r in records] == list(range(1, results["epochs"] + 1))
    best = max(range(len(records)), key=lambda i: (records[i]["dev_score"], -records[i]["dev_loss"]))
    assert results["best_epoch"] == 1 + best  # The best dev score, ties to the lowest dev loss.


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_results(files, trained, tmp_path, monkeypatch):
    """Killed after its second epoch's checkpoint: rerun, it ends with the uninterrupted run's numbers."""
    _, uninterrupted = trained
    workdir = str(tmp_path / "killed")
    write = MetricsWriter.write
    calls = []

    def killed_after_two(self, record):
        write(self, record)
        calls.append(record)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(MetricsWriter, "write", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        loop.train_task(tiny_config(files), workdir, progress=False)
    monkeypatch.setattr(MetricsWriter, "write", write)
    resumed = loop.train_task(tiny_config(files), workdir, progress=False)
    assert resumed == uninterrupted
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        assert [json.loads(line)["epoch"] for line in f] == list(range(1, uninterrupted["epochs"] + 1))


def test_a_flat_dev_score_leaves_early_stopping_to_the_dev_loss(files, tmp_path, monkeypatch):
    """Every epoch scores the same (as an NER model of a few sentences scores F1 0 at first): the best
    epoch is the one of the lowest dev loss, and the run goes on while it falls."""
    monkeypatch.setattr(loop, "scores", lambda *args: {"score": 0.0})
    config = tiny_config(files, **{"train.patience": 2, "train.learning_rate": 0.005})
    results = loop.train_task(config, str(tmp_path / "flat"), progress=False)
    with open(tmp_path / "flat" / "metrics.jsonl", encoding="utf-8") as f:
        losses = [json.loads(line)["dev_loss"] for line in f]
    assert results["best_epoch"] == 1 + int(np.argmin(losses)) > 2, losses


def test_a_capped_run_continues_with_more_epochs_as_one_begun_with_them(files, trained, tmp_path):
    _, uncapped = trained
    workdir = str(tmp_path / "capped")
    capped = loop.train_task(tiny_config(files, **{"train.epochs": 2}), workdir, progress=False)
    assert capped["epochs"] == 2 and uncapped["epochs"] > 2
    assert loop.train_task(tiny_config(files), workdir, progress=False) == uncapped
    with open(os.path.join(workdir, loop.CONFIG), encoding="utf-8") as f:
        assert json.load(f)["train"]["epochs"] == tiny_config(files).train.epochs


def test_a_workdir_trained_with_another_config_is_refused(files, trained):
    workdir, _ = trained
    with pytest.raises(ValueError, match=r"trained with another config \(encoder\.dim: 16 then, 32 now\)"):
        loop.train_task(tiny_config(files, **{"encoder.dim": 32}), workdir, progress=False)


def test_a_config_without_inputs_or_files_is_one_error(files):
    with pytest.raises(ConfigError, match="no input: set inputs.elmo.workdir"):
        schema.validate(tiny_config(files, **{"inputs.word.dim": 0}))
    with pytest.raises(ConfigError, match="data.dev_file is empty"):
        schema.validate(tiny_config(files, **{"data.dev_file": ""}))
    with pytest.raises(ConfigError, match=r"config key head.kind='hmm' is not one of 'softmax', 'crf'"):
        schema.validate(tiny_config(files, **{"head.kind": "hmm"}))


@pytest.mark.slow
def test_the_parser_and_the_crf_tagger_train_on_the_same_files(files, tmp_path):
    parser = {"task.kind": "parse", "train.epochs": 25, "train.patience": 25, "train.learning_rate": 0.005}
    parsed = loop.train_task(tiny_config(files, **parser), str(tmp_path / "p"), progress=False)
    assert parsed["test"]["uas"] > 0.9, parsed  # Each word's head is the word before.
    tagged = loop.train_task(tiny_config(files, **{"head.kind": "crf", "train.epochs": 3}), str(tmp_path / "c"),
                             progress=False)
    assert tagged["dev"]["score"] > 0.5, tagged


def test_the_command_prints_its_config_and_its_errors(files, tmp_path):
    recipe = tmp_path / "recipe.py"
    recipe.write_text(
        "from elmo_jax.tasks.schema import get_config as defaults\n\n\ndef get_config():\n    config = defaults()\n"
        f"    config.data.train_file = {files['train']!r}\n    config.data.dev_file = {files['dev']!r}\n"
        "    return config\n"
    )
    done = _run_cli("train", f"--config={recipe}", "--config.inputs.word.dim=8", "--print_config")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["inputs"]["word"]["dim"] == 8
    done = _run_cli("train", f"--config={recipe}", f"--workdir={tmp_path / 'w'}")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: no input: set")
    done = _run_cli("train", f"--config={recipe}", "--config.inputs.word.dims=8")
    assert done.returncode == 1 and "unknown config key 'inputs.word.dims'" in done.stderr


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elmo_jax.task", *args], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_a_trained_workdir_scores_other_files_and_writes_its_predictions_back(files, trained, tmp_path):
    """evaluate gives results.json's test score on the test file; predict fills the UPOS column of an
    unlabelled copy, which then scores the same, and nothing else of the file changes."""
    workdir, results = trained
    task = TrainedTask(workdir)
    assert task.evaluate(files["test"]) == results["test"]
    with open(files["test"], encoding="utf-8") as f:
        lines = f.read().split("\n")
    unlabelled = tmp_path / "unlabelled.conllu"
    unlabelled.write_text("\n".join("\t".join(c if i != 3 else "_" for i, c in enumerate(line.split("\t")))
                                    if "\t" in line else line for line in lines), encoding="utf-8")
    done = _run_cli("predict", f"--workdir={workdir}", f"--input={unlabelled}", f"--output={tmp_path / 'out.conllu'}")
    assert done.returncode == 0 and done.stdout.strip() == f"wrote 12 sentences to {tmp_path / 'out.conllu'}", done
    predicted = (tmp_path / "out.conllu").read_text(encoding="utf-8").split("\n")
    assert [line.split("\t")[:3] for line in predicted] == [line.split("\t")[:3] for line in lines]
    assert task.evaluate(str(tmp_path / "out.conllu"))["score"] == 1.0  # Its own predictions as gold.
    gold = [line.split("\t")[3] for line in lines if "\t" in line]
    agree = np.mean([p.split("\t")[3] == g for p, g in zip([p for p in predicted if "\t" in p], gold)])
    assert agree == pytest.approx(results["test"]["score"])
    done = _run_cli("evaluate", f"--workdir={tmp_path}", f"--file={files['test']}")
    assert done.returncode == 1 and "no trained task model" in done.stderr.strip().splitlines()[-1]


def test_static_vectors_count_their_oov_and_new_words_get_their_vectors_at_prediction(files, tmp_path):
    """'red' has no vector (the file's <UNK> stands for it, counted as OOV); 'zebra', in no training
    file, gets its own row from the vector file when a trained model predicts on it."""
    rng = np.random.default_rng(0)
    vocabulary = [w for w in WORDS if w != "red"] + ["zebra", "<UNK>"]
    vectors = tmp_path / "vectors.txt"
    vectors.write_text(f"{len(vocabulary)} 4\n" + "".join(
        f"{w} {' '.join(f'{x:.3f}' for x in rng.normal(size=4))}\n" for w in vocabulary), encoding="utf-8")
    config = tiny_config(files, **{"inputs.word.dim": 0, "inputs.static.file": str(vectors), "train.epochs": 2})
    results = loop.train_task(config, str(tmp_path / "w"), progress=False)
    with open(files["train"], encoding="utf-8") as f:
        reds = sum(line.split("\t")[1] == "red" for line in f if "\t" in line)
    assert results["static_oov"]["train"]["oov"] == reds > 0
    (tmp_path / "new.conllu").write_text("1\tzebra\tzebra\t_\t_\t_\t0\troot\t_\t_\n2\tred\tred\t_\t_\t_\t1\tdep\t_\t_\n\n")
    task = TrainedTask(str(tmp_path / "w"))
    assert features.static_rows(task.vectors, [[["zebra", "red"]]], known=task.static_words)[0] == ["zebra"]
    labels, _ = task.predict(task.read(str(tmp_path / "new.conllu"), unlabelled=True))
    assert len(labels) == 1 and len(labels[0]) == 2 and set(labels[0]) <= set(UPOS.values())


@pytest.fixture(scope="module")
def bilm_runs(files, tmp_path_factory):
    """The tiny biLM's layers stored, computed in each step, and fine-tuned: 3 epochs of each."""
    pretrained = tiny_bilm(projection=True)
    patch = pytest.MonkeyPatch()
    patch.setattr(loop, "load_bilm", lambda config: pretrained)
    patch.setattr(trained_module, "load_bilm", lambda config: pretrained)
    runs = {}
    for run in schema.RUNS:
        config = tiny_config(files, **{"inputs.word.dim": 0, "inputs.elmo.workdir": "tiny", "inputs.elmo.run": run,
                                       "inputs.elmo.learning_rate": 0.01, "train.epochs": 3, "train.patience": 3})
        workdir = str(tmp_path_factory.mktemp(run))
        runs[run] = workdir, loop.train_task(config, workdir, progress=False)
    yield pretrained, runs
    patch.undo()


def _epoch_losses(workdir: str) -> list[float]:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line)["loss"] for line in f]


@pytest.mark.slow
def test_the_biLM_run_in_each_step_gives_the_stored_layers_losses_and_fine_tuning_moves_its_weights(bilm_runs):
    pretrained, runs = bilm_runs
    (stored_dir, stored), (step_dir, in_step) = runs["once"], runs["every_step"]
    np.testing.assert_allclose(_epoch_losses(step_dir), _epoch_losses(stored_dir), rtol=1e-4)
    assert in_step["dev"]["score"] == pytest.approx(stored["dev"]["score"])
    fine_dir, _ = runs["fine_tune"]
    assert not np.allclose(_epoch_losses(fine_dir), _epoch_losses(stored_dir), rtol=1e-4)
    for workdir, moved in ((step_dir, False), (fine_dir, True)):
        task = TrainedTask(workdir)
        inputs = loop.split_inputs(task.config, [[["the", "cat"]]], pretrained, None, None, False)[0]
        _, params = task._model(inputs, None)
        changed = jax.tree.map(lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))),
                               dict(params["params"]["bilm"]), dict(pretrained.params))
        assert any(jax.tree.leaves(changed)) == moved, workdir


@pytest.mark.slow
def test_a_fine_tuned_workdir_predicts_with_its_trained_biLM(files, bilm_runs):
    _, runs = bilm_runs
    workdir, results = runs["fine_tune"]
    assert TrainedTask(workdir).evaluate(files["test"]) == results["test"]
