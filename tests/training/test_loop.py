"""End to end: train a tiny biLM in a workdir, log, checkpoint, resume exactly, evaluate."""

import json
import logging
import math
import os
import re

import numpy as np
import pytest

from elmo_jax.data.vocab import Vocabulary
from elmo_jax.runtime import data_parallel
from elmo_jax.training import loop
from elmo_jax.training.loop import NonFiniteLossError, train_and_evaluate
from elmo_jax.training.preemption import PreemptionWatcher, TrainingPreempted
from tests.data.tfds_helpers import prepare_text_dataset
from tests.training.helpers import WORDS, tensorboard_scalars, tiny_config, write_corpus


def _text_config(tmp_path, **overrides):
    train = write_corpus(str(tmp_path / "train"), 60, seed=0)
    valid = write_corpus(str(tmp_path / "valid"), 10, seed=1, n_files=1)
    return tiny_config(
        **{"data.source": "text", "data.train_files": train, "data.eval_files": valid, **overrides}
    )


def _metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_train_writes_metrics_config_checkpoints_and_eval(tiny_training):
    """The shared tiny run (tests/conftest.py): text corpus, evaluated every 5 steps."""
    workdir, result = tiny_training["workdir"], tiny_training["result"]
    records = [r for r in _metrics(workdir) if "train_loss" in r]
    assert [r["step"] for r in records] == [5, 10]
    for key in ("train_loss", "train_perplexity", "tokens_per_sec", "learning_rate", "epoch", "skipped_steps"):
        assert key in records[0]
    assert [r["steps"] for r in records] == [5, 5]
    assert records[0]["softmax"] == "sampled"
    assert json.load(open(os.path.join(workdir, "config.json")))["model"]["lstm"]["dim"] == 16
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["10", "5"]
    assert os.path.exists(os.path.join(workdir, "eval_files_5.json"))
    assert len(tiny_training["eval_reads"]) == 1  # Evaluated at steps 5 and 10 from one read of the split.
    saved = json.load(open(os.path.join(workdir, "eval_files_10.json")))
    for key in ("step", "tokens", "forward_perplexity", "backward_perplexity", "perplexity", "oov_rate"):
        assert key in saved
    assert saved == pytest.approx(result)
    assert result["tokens"] == sum(len(l.split()) + 1 for l in open(tiny_training["eval_file"]))


@pytest.mark.slow
def test_rerun_resumes_and_reproduces_uninterrupted_losses(tmp_path):
    """Sentence streams; contiguous ones are the LSTM case of
    test_each_contextualizer_trains_resumes_exactly_and_evaluates."""
    overrides = {"train.num_steps": 10, "train.log_every_steps": 1, "data.streams": "sentences"}
    config = _text_config(tmp_path, **overrides)
    straight = str(tmp_path / "straight")
    result = train_and_evaluate(config, straight)
    assert result["tokens"] == sum(len(l.split()) + 1 for l in open(tmp_path / "valid" / "part-0.txt"))

    resumed = str(tmp_path / "resumed")
    first = _text_config(tmp_path, **overrides)
    first.train.num_steps = 6  # Stops after a checkpoint at 5 and the final one at 6.
    train_and_evaluate(first, resumed)
    train_and_evaluate(config, resumed)  # Same command as `straight`: resumes from step 6.

    def losses(workdir):
        return {r["step"]: r["train_loss"] for r in _metrics(workdir) if "train_loss" in r}

    expected, got = losses(straight), losses(resumed)
    assert sorted(got) == list(range(1, 11))
    assert got == expected  # Exactly: same state, same data position, same compiled step.


def test_word_encoder_full_softmax_adam_run(tmp_path):
    config = _text_config(
        tmp_path,
        **{
            "model.token_encoder": "word",
            "model.softmax.sampled": False,
            "train.optimizer.name": "adam",
            "train.optimizer.learning_rate": 0.01,
            "train.optimizer.schedule": "cosine",
        },
    )
    result = train_and_evaluate(config, str(tmp_path / "run"))
    assert result["perplexity"] < 40  # Vocabulary of 18 words + specials: chance is ~21.


def _poison_training_batch(monkeypatch, at_step):
    """Training batch `at_step` (1-based) gets an out-of-range char id: a NaN loss and NaN gradients."""
    calls = []
    shard_batch = data_parallel.shard_batch

    def poisoned(batch, mesh):
        calls.append(None)
        if len(calls) == at_step:
            batch["char_ids"][0, 0, 0, 0] = 10**6
        return shard_batch(batch, mesh)

    monkeypatch.setattr(data_parallel, "shard_batch", poisoned)


@pytest.mark.slow
def test_stop_policy_raises_and_never_checkpoints_a_nonfinite_state(tmp_path, monkeypatch):
    # Step 4 is non-finite; it is checkpointed before being logged at step 5.
    config = _text_config(tmp_path, **{"train.checkpoint_every_steps": 2, "train.nonfinite_policy": "stop"})
    _poison_training_batch(monkeypatch, at_step=4)
    workdir = str(tmp_path / "run")
    with pytest.raises(NonFiniteLossError, match=r"at step 4 .*last good checkpoint is kept in .*/checkpoints"):
        train_and_evaluate(config, workdir)
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2"]
    assert not os.path.exists(os.path.join(workdir, "metrics.jsonl"))


def _failing_config(tmp_path, failure: str, monkeypatch):
    """A config that fails before step 1: in the data, or building the model (after vocab.txt; a
    config the validation would refuse never gets that far, so the model's build is made to fail)."""
    if failure == "data":
        return _text_config(tmp_path, **{"data.train_files": str(tmp_path / "nowhere" / "*.txt")})

    def failing_build(model, vocab_size, n_characters):
        raise ValueError(f"the model cannot be built for {vocab_size} words")

    monkeypatch.setattr(loop, "bilm_from_config", failing_build)
    return _text_config(tmp_path)


@pytest.mark.parametrize("failure", ["data", "model"])
@pytest.mark.parametrize("workdir_before", ["missing", "empty"])
def test_a_run_failing_before_its_first_step_leaves_nothing_behind(tmp_path, failure, workdir_before, monkeypatch):
    workdir = tmp_path / "run"
    if workdir_before == "empty":
        workdir.mkdir()
    with pytest.raises(ValueError, match="nowhere" if failure == "data" else "cannot be built"):
        train_and_evaluate(_failing_config(tmp_path, failure, monkeypatch), str(workdir))
    if workdir_before == "empty":
        assert os.listdir(workdir) == []
    else:
        assert not workdir.exists()


def test_a_failing_run_never_removes_what_the_workdir_held(tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="cannot be built"):
        train_and_evaluate(_failing_config(tmp_path, "model", monkeypatch), str(workdir))
    assert (workdir / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(workdir)) == ["notes.txt", "vocab.txt"]  # config.json only once the run is accepted.


def test_unsegmented_training_text_is_warned_about_before_the_vocabulary_is_built(tmp_path, caplog):
    """One warning naming the file, before the passes over the corpus; here the vocabulary of one
    word a line is then too small to train on."""
    (tmp_path / "zh.txt").write_text("我爱北京天安门广场的早晨\n" * 20 + "他来到了网易杭研大厦\n", encoding="utf-8")
    config = tiny_config(**{"data.source": "text", "data.train_files": str(tmp_path / "zh.txt"),
                            "data.eval_files": str(tmp_path / "zh.txt")})
    with caplog.at_level(logging.INFO), pytest.raises(ValueError, match="training needs at least"):
        train_and_evaluate(config, str(tmp_path / "run"))
    messages = [r.getMessage() for r in caplog.records]
    (warned,) = [i for i, m in enumerate(messages) if "without spaces between words" in m]
    assert messages[warned].startswith(str(tmp_path / "zh.txt"))
    assert warned < messages.index("Building the vocabulary from the training data")


@pytest.mark.slow
def test_skip_policy_skips_the_update_and_counts_it(tmp_path, monkeypatch):
    config = _text_config(tmp_path, **{"train.nonfinite_policy": "skip"})
    _poison_training_batch(monkeypatch, at_step=4)
    workdir = str(tmp_path / "run")
    result = train_and_evaluate(config, workdir)
    records = [r for r in _metrics(workdir) if "train_loss" in r]
    assert [(r["step"], r["skipped_steps"]) for r in records] == [(5, 1), (10, 0)]
    assert all(math.isfinite(r[k]) for r in records for k in ("train_loss", "grad_norm"))  # Means of applied steps.
    assert math.isfinite(result["perplexity"])


@pytest.mark.slow
def test_train_on_a_tfds_dataset(tmp_path):
    rng = np.random.default_rng(0)
    splits = {
        split: [" ".join(rng.choice(WORDS, rng.integers(2, 9))) for _ in range(n)]
        for split, n in [("train", 40), ("test", 6)]
    }
    data_dir = str(tmp_path / "tfds")
    prepare_text_dataset(data_dir, splits, name="loop_text")
    config = tiny_config(
        **{
            "data.source": "tfds",
            "data.tfds_name": "loop_text",
            "data.tfds_data_dir": data_dir,
            "train.num_steps": 4,
            "train.log_every_steps": 2,
        }
    )
    workdir = str(tmp_path / "run")
    result = train_and_evaluate(config, workdir)
    losses = [r["train_loss"] for r in _metrics(workdir) if "train_loss" in r]
    assert len(losses) == 2 and all(np.isfinite(losses))
    # Evaluated on the TFDS test split, which data.tfds_valid_split names by default.
    assert result["tokens"] == sum(len(s.split()) + 1 for s in splits["test"])
    assert os.path.exists(os.path.join(workdir, "eval_valid_4.json"))
    built = Vocabulary.load(os.path.join(workdir, "vocab.txt"))
    assert built.words == Vocabulary.build(s.split() for s in splits["train"]).words


def test_run_records_its_start_tensorboard_scalars_and_progress(tiny_training_run):
    workdir, stderr, result = tiny_training_run
    starts = json.load(open(os.path.join(workdir, "run_info.json")))["starts"]
    assert [s["step"] for s in starts] == [0]
    expected = {}
    for record in _metrics(workdir):
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                expected.setdefault(key, {})[record["step"]] = pytest.approx(value, rel=1e-6)
    assert {"train_loss", "tokens_per_sec", "eval_perplexity"} <= set(expected)
    assert set(expected["eval_perplexity"]) == {5, 10}
    assert tensorboard_scalars(workdir) == expected
    # Training bar: steps of total, time left, loss and tokens/s; evaluation bar in tokens.
    assert re.search(r"train: 100%.*\| 10/10 \[\d\d:\d\d<\d\d:\d\d, .*loss=\d+\.\d+, tok_s=\d+\]", stderr)
    assert re.search(rf"eval: .*\| \d+/{result['tokens']} \[.*tok/s\]", stderr)


def test_sigterm_before_the_first_step_says_that_nothing_was_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(PreemptionWatcher, "reached", lambda self, step: True)  # SIGTERM during start-up.
    workdir = tmp_path / "run"
    with pytest.raises(TrainingPreempted, match=r"^stopped by SIGTERM before the first step; nothing was saved$"):
        train_and_evaluate(_text_config(tmp_path), str(workdir))
    assert not workdir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("contextualizer", ["lstm", "gated_cnn", "transformer"])
def test_each_contextualizer_trains_resumes_exactly_and_evaluates(tmp_path, contextualizer):
    """A tiny run per contextualizer on contiguous streams; stopped at step 6 and rerun, it gives
    the uninterrupted run's losses (the carried state is in the checkpoint) and the same evaluation,
    of every validation token."""
    overrides = {"train.num_steps": 10, "train.log_every_steps": 1, "data.streams": "contiguous",
                 "model.contextualizer": contextualizer}
    straight = str(tmp_path / "straight")
    result = train_and_evaluate(_text_config(tmp_path, **overrides), straight)
    assert math.isfinite(result["perplexity"]) and result["tokens"] > 0
    assert result["tokens"] == sum(len(l.split()) + 1 for l in open(tmp_path / "valid" / "part-0.txt"))
    resumed = str(tmp_path / "resumed")
    train_and_evaluate(_text_config(tmp_path, **{**overrides, "train.num_steps": 6}), resumed)
    assert train_and_evaluate(_text_config(tmp_path, **overrides), resumed) == result

    def losses(workdir):
        return {r["step"]: r["train_loss"] for r in _metrics(workdir) if "train_loss" in r}

    assert losses(resumed) == losses(straight) and sorted(losses(straight)) == list(range(1, 11))
    saved = json.load(open(os.path.join(straight, "config.json")))["model"]
    assert saved["contextualizer"] == contextualizer
