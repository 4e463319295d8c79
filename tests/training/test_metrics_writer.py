"""metrics.jsonl and TensorBoard event files: the same numbers, read back with TensorBoard's reader."""

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from elmo_jax.atomic_write import write_json_atomic
from elmo_jax.training.metrics_writer import MetricsWriter
from tests.training.helpers import tensorboard_scalars


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_every_number_goes_to_jsonl_and_tensorboard(tmp_path):
    writer = MetricsWriter(str(tmp_path))
    writer.write({"step": 5, "train_loss": jnp.float32(2.5), "tokens_per_sec": 100.0, "softmax": "sampled"})
    writer.write({"step": 10, "train_loss": 2.25, "tokens_per_sec": np.float64(110.0), "softmax": "sampled"})
    writer.write({"step": 10, "eval_perplexity": 9.5, "eval_tokens": 56, "eval_flag": True})
    assert _lines(tmp_path / "metrics.jsonl") == [
        {"step": 5, "train_loss": 2.5, "tokens_per_sec": 100.0, "softmax": "sampled"},
        {"step": 10, "train_loss": 2.25, "tokens_per_sec": 110.0, "softmax": "sampled"},
        {"step": 10, "eval_perplexity": 9.5, "eval_tokens": 56, "eval_flag": True},
    ]
    # Read without closing anything: each record is on disk when write returns.
    assert tensorboard_scalars(str(tmp_path)) == {
        "train_loss": {5: 2.5, 10: 2.25},
        "tokens_per_sec": {5: 100.0, 10: 110.0},
        "eval_perplexity": {10: 9.5},
        "eval_tokens": {10: 56.0},
    }


def test_non_finite_values(tmp_path):
    MetricsWriter(str(tmp_path)).write({"step": 1, "train_loss": float("nan"), "grad_norm": float("inf")})
    assert _lines(tmp_path / "metrics.jsonl") == [{"step": 1, "train_loss": "nan", "grad_norm": "inf"}]
    scalars = tensorboard_scalars(str(tmp_path))
    assert math.isnan(scalars["train_loss"][1]) and scalars["grad_norm"][1] == math.inf


def test_a_resumed_run_replaces_the_steps_it_repeats(tmp_path):
    first = MetricsWriter(str(tmp_path))
    for step in range(1, 9):  # Interrupted after step 8; the last checkpoint is at step 5.
        first.write({"step": step, "train_loss": float(step)})
    first.write({"step": 8, "eval_perplexity": 80.0})
    resumed = MetricsWriter(str(tmp_path), start_step=5)
    for step in range(6, 11):
        resumed.write({"step": step, "train_loss": 100.0 + step})
    assert len([f for f in os.listdir(tmp_path) if f.startswith("events.out.tfevents.")]) == 2
    scalars = tensorboard_scalars(str(tmp_path))
    assert scalars["train_loss"] == {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.0, 6: 106.0, 7: 107.0, 8: 108.0, 9: 109.0, 10: 110.0}
    assert scalars["eval_perplexity"] == {}  # Logged after the checkpoint by the interrupted attempt.
    assert len(_lines(tmp_path / "metrics.jsonl")) == 14  # metrics.jsonl keeps everything.


def test_only_process_zero_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(jax, "process_index", lambda: 1)
    MetricsWriter(str(tmp_path)).write({"step": 1, "train_loss": 1.0})
    assert os.listdir(tmp_path) == []


def test_write_json_atomic(tmp_path):
    path = str(tmp_path / "x.json")
    write_json_atomic(path, {"b": 1, "a": [1, 2]})
    write_json_atomic(path, {"c": 3})
    assert json.load(open(path)) == {"c": 3}
    assert os.listdir(tmp_path) == ["x.json"]


def test_new_event_files_sort_after_earlier_ones(tmp_path):
    names = [os.path.basename(MetricsWriter(str(tmp_path)).events.path) for _ in range(3)]
    assert names == sorted(names) and len(set(names)) == 3
