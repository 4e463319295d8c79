"""Probes during training (config.eval.probe): files read before any work, probe_<task>_<step>.json
beside the evaluations, not redone for a step already probed, and a run without a task unchanged."""

import json
import logging
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.evaluation import report
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.training import probes
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.model.initial_params import init_params
from tests.data.coarsewsd_helpers import write_made_up_dataset
from tests.entry_points import run_script
from tests.probing.helpers import random_sentences, write_conllu
from tests.training.helpers import WORDS, tiny_config, write_corpus


@pytest.fixture
def probe_files(tmp_path):
    """{train_file, dev_file, test_file}: CoNLL-U files of 40, 10 and 12 random sentences."""
    return {
        "train_file": write_conllu(tmp_path / "train.conllu", random_sentences(40, seed=0)),
        "dev_file": write_conllu(tmp_path / "dev.conllu", random_sentences(10, seed=1)),
        "test_file": write_conllu(tmp_path / "test.conllu", random_sentences(12, seed=2)),
    }


def _probe_config(task="upos", **files):
    settings = tiny_config().eval.probe
    settings.task = task
    for key, path in files.items():
        settings[key] = path
    return settings


def _text_config(tmp_path, **overrides):
    return tiny_config(**{
        "data.source": "text", "data.train_files": write_corpus(str(tmp_path / "corpus"), 60, seed=0),
        "data.eval_files": write_corpus(str(tmp_path / "valid"), 10, seed=1, n_files=1), **overrides,
    })


def test_without_a_task_nothing_is_read():
    assert probes.read_probe_data(_probe_config(task="", train_file="/nonexistent.conllu")) is None


def test_the_files_are_read_and_dev_is_optional(probe_files):
    data = probes.read_probe_data(_probe_config(**probe_files))
    assert (len(data.train), len(data.dev), len(data.test)) == (40, 10, 12)
    assert probes.read_probe_data(_probe_config(**{**probe_files, "dev_file": ""})).dev is None


@pytest.mark.parametrize("key", probes.FILE_KEYS)
def test_a_missing_file_is_an_error_naming_its_key_and_path(probe_files, tmp_path, key):
    missing = str(tmp_path / "missing.conllu")
    with pytest.raises(FileNotFoundError) as error:
        probes.read_probe_data(_probe_config(**{**probe_files, key: missing}))
    assert str(error.value) == f"config key eval.probe.{key}={missing!r}: no such file"


def test_a_malformed_file_or_a_token_without_a_label_is_an_error_naming_file_and_line(probe_files, tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tcat\n")
    with pytest.raises(ValueError, match=r"bad\.conllu:1: expected 10 tab-separated columns"):
        probes.read_probe_data(_probe_config(**{**probe_files, "test_file": str(bad)}))
    unlabelled = write_conllu(tmp_path / "unlabelled.conllu", [[("a", "DET"), ("cat", "_")]])
    with pytest.raises(ValueError, match=r"unlabelled\.conllu:3: no upos label"):
        probes.read_probe_data(_probe_config(**{**probe_files, "dev_file": unlabelled}))


def test_splits_the_probes_cannot_use_are_errors_naming_the_file(probe_files, tmp_path):
    """Checked with the files, before training, not when the first probe runs after it."""
    one = write_conllu(tmp_path / "one.conllu", random_sentences(1, seed=0))
    with pytest.raises(ValueError, match=f"^{re.escape(one)}: 1 training sentence"):
        probes.read_probe_data(_probe_config(**{**probe_files, "train_file": one, "dev_file": ""}))
    lower = write_conllu(tmp_path / "lower.conllu", [[(w, t.lower()) for w, t in s] for s in random_sentences(3, 1)])
    with pytest.raises(ValueError, match=f"^{re.escape(lower)}: no dev token has a label of the training tokens"):
        probes.read_probe_data(_probe_config(**{**probe_files, "dev_file": lower}))


def test_due_every_n_steps_and_never_with_zero(probe_files):
    data = probes.read_probe_data(_probe_config(**probe_files))
    config = tiny_config(**{"eval.probe.every_steps": 5})
    prober = probes.TrainingProbes(config, Vocabulary(["<S>", "</S>", "<UNK>"]), data, "/unused")
    assert [s for s in range(1, 16) if prober.due(s)] == [5, 10, 15]
    config.eval.probe.every_steps = 0
    assert not any(prober.due(s) for s in range(1, 16))


def test_the_bilm_probed_is_float32_without_dropout_or_softmax_and_a_word_model_has_its_vocabulary():
    config = tiny_config(**{"model.token_encoder": "word", "model.dtype": "bfloat16", "model.dropout": 0.5})
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", *WORDS])
    params = init_params(bilm_from_config(config.model, len(vocab)), jax.random.key(0), 12)
    pretrained = probes.pretrained_bilm(config, params, vocab)
    assert pretrained.model.dtype == jnp.float32 and pretrained.model.dropout == 0.0
    assert "softmax" in params and "softmax" not in pretrained.params
    assert pretrained.vocab is vocab and pretrained.max_chars == config.data.max_chars_per_token
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(pretrained.params))
    char_config = tiny_config()
    char_params = init_params(bilm_from_config(char_config.model, len(vocab)), jax.random.key(0), 12)
    assert probes.pretrained_bilm(char_config, char_params, vocab).vocab is None


def test_train_py_refuses_a_missing_probe_file_before_creating_the_workdir(probe_files, tmp_path):
    workdir, missing = tmp_path / "run", str(tmp_path / "nowhere.conllu")
    done = run_script(
        "train.py", "--config=configs/tests/tiny.py", "--config.eval.probe.task=upos",
        f"--config.eval.probe.train_file={probe_files['train_file']}", f"--config.eval.probe.test_file={missing}",
        f"--workdir={workdir}", compile_cache=str(tmp_path / "cache"),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: config key eval.probe.test_file={missing!r}: no such file"]
    assert not workdir.exists()


def test_word_senses_are_read_and_their_splits_checked_with_or_without_a_task(tmp_path):
    data_dir = write_made_up_dataset(str(tmp_path / "senses"))
    data = probes.read_probe_data(_probe_config(task="", wsd_data=data_dir))
    assert data.train is None and [w.word for w in data.words] == ["bank", "bass"]
    missing = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=re.escape(f"config key eval.probe.wsd_data={missing!r}: no such directory")):
        probes.read_probe_data(_probe_config(task="", wsd_data=missing))
    write_made_up_dataset(str(tmp_path / "one"), train=1)  # Nothing left to hold out a dev sentence from.
    with pytest.raises(ValueError, match="bank: 1 training sentence"):
        probes.read_probe_data(_probe_config(task="", wsd_data=str(tmp_path / "one")))


def test_word_senses_are_probed_once_per_step_beside_the_token_task(probe_files, tmp_path, monkeypatch):
    config = tiny_config(**{f"eval.probe.{key}": path for key, path in probe_files.items()},
                         **{"eval.probe.task": "upos", "eval.probe.wsd_data": write_made_up_dataset(str(tmp_path / "s"))})
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", *WORDS])
    params = init_params(bilm_from_config(config.model, len(vocab)), jax.random.key(0), 12)
    calls = []
    real_probe_wsd = probes.wsd.probe_wsd
    monkeypatch.setattr(probes.wsd, "probe_wsd", lambda *a, **k: calls.append("wsd") or real_probe_wsd(*a, **k))
    prober = probes.TrainingProbes(config, vocab, probes.read_probe_data(config.eval.probe), str(tmp_path))
    prober(params, 7)
    with open(probes.result_path(str(tmp_path), "wsd", 7)) as f:
        saved = json.load(f)
    assert saved["task"] == "wsd" and saved["step"] == 7 and saved["data"] == config.eval.probe.wsd_data
    assert len(saved["layers"]) == config.model.lstm.n_layers + 1 and list(saved["words"]) == ["bank", "bass"]
    assert os.path.exists(probes.result_path(str(tmp_path), "upos", 7))
    prober(params, 7)  # Both files exist: nothing is probed again.
    assert calls == ["wsd"]
    assert set(report.read_probes(str(tmp_path))) == {"upos", "wsd"}  # elmo-report shows both.


def _metrics_without_timings(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return [{k: v for k, v in r.items() if k != "tokens_per_sec"} for r in records]


@pytest.mark.slow
def test_a_run_with_probes_writes_them_beside_the_evaluations_and_trains_as_one_without(
    tmp_path, probe_files, monkeypatch, caplog
):
    overrides = {"eval.every_steps": 5}
    plain = str(tmp_path / "plain")
    calls = []
    real_probe = probes.probe
    monkeypatch.setattr(probes, "probe", lambda *args, **kwargs: calls.append(args[4]) or real_probe(*args, **kwargs))
    plain_result = train_and_evaluate(_text_config(tmp_path, **overrides), plain)
    assert calls == [] and not [name for name in os.listdir(plain) if name.startswith("probe_")]

    probed = str(tmp_path / "probed")
    settings = {f"eval.probe.{key}": path for key, path in probe_files.items()}
    config = _text_config(tmp_path, **overrides, **settings, **{"eval.probe.task": "upos", "eval.probe.every_steps": 5})
    with caplog.at_level(logging.INFO):
        result = train_and_evaluate(config, probed)
    assert result == plain_result
    assert _metrics_without_timings(probed) == _metrics_without_timings(plain)
    assert calls == ["upos", "upos"]
    assert sorted(n for n in os.listdir(probed) if n.startswith(("probe_", "eval_"))) == [
        "eval_files_10.json", "eval_files_5.json", "probe_upos_10.json", "probe_upos_5.json"
    ]
    test_tokens = sum(len(s) for s in random_sentences(12, seed=2))
    for step in (5, 10):
        with open(probes.result_path(probed, "upos", step)) as f:
            saved = json.load(f)
        assert saved["step"] == step and saved["task"] == "upos" and saved["model"] == f"probed step {step}"
        assert len(saved["layers"]) == config.model.lstm.n_layers + 1
        assert all(0.0 <= a <= 1.0 for a in [*saved["layers"], saved["mix"], saved["word_baseline"]])
        assert saved["test_tokens"] == test_tokens and saved["dev"] == "dev"
        assert saved["test"] == probe_files["test_file"] and saved["workdir"] == probed
    assert any(r.getMessage().startswith("probe upos @ step 10: best layer ") for r in caplog.records)
    assert report.load_run(probed).probes["upos"].result["step"] == 10  # elmo-report shows the latest.

    before = open(probes.result_path(probed, "upos", 10)).read()
    assert train_and_evaluate(config, probed) == pytest.approx(result)  # A rerun of the finished run.
    assert calls == ["upos", "upos"]  # Step 10's file exists: not probed again.
    assert open(probes.result_path(probed, "upos", 10)).read() == before
