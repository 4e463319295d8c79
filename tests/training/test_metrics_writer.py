"""metrics.jsonl and TensorBoard event files: the same numbers, read back with TensorBoard's reader."""

import errno
import json
import math
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elmo_jax.runtime.atomic_write import write_json_atomic
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
    # metrics.jsonl too holds each step once: the resumed run's records replace the interrupted attempt's.
    assert [(r["step"], r["train_loss"]) for r in _lines(tmp_path / "metrics.jsonl")] == [
        *[(step, float(step)) for step in range(1, 6)], *[(step, 100.0 + step) for step in range(6, 11)]
    ]


def test_a_failed_write_leaves_no_partial_line(tmp_path, monkeypatch):
    """A file-size limit or a full disk mid-line: the line is truncated away, and the error names the file."""
    writer = MetricsWriter(str(tmp_path))
    writer.write({"step": 1, "train_loss": 1.0})
    write = os.write

    def short_then_full(fd, data):
        if len(data) > 4:
            return write(fd, bytes(data[:4]))
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(os, "write", short_then_full)
    path = str(tmp_path / "metrics.jsonl")
    with pytest.raises(OSError, match=re.escape(f"[Errno {errno.EFBIG}] File too large: '{path}'")):
        writer.write({"step": 2, "train_loss": 2.0})
    monkeypatch.undo()
    writer.write({"step": 3, "train_loss": 3.0})
    assert _lines(path) == [{"step": 1, "train_loss": 1.0}, {"step": 3, "train_loss": 3.0}]


def test_a_resumed_run_drops_a_partial_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "train_loss": 1.0}\nnot json, kept\n{"step": 2, "train_lo')
    MetricsWriter(str(tmp_path), start_step=2).write({"step": 3, "train_loss": 3.0})
    assert path.read_text() == '{"step": 1, "train_loss": 1.0}\nnot json, kept\n{"step": 3, "train_loss": 3.0}\n'


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
