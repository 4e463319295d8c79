"""Faults around a training run through train.py: a refused rerun, corrupt checkpoints, a file-size
limit on metrics.jsonl, a resume inside a logging window, SIGTERM before the first step. Each test
uses a copy of one trained tiny workdir."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from elmo_jax.data.vocab import fingerprint_mismatch
from elmo_jax.workdir.saved_config import saved_config
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.training.preemption import PreemptionWatcher, TrainingPreempted
from tests.entry_points import run_script
from tests.training.helpers import swap_vocabulary_lines, write_corpus

pytestmark = pytest.mark.slow


@dataclasses.dataclass
class Trained:
    workdir: str
    args: list[str]  # train.py's flags but --workdir.
    cache: str  # The compilation cache its runs share.

    def rerun(self, workdir: str, *flags: str, prefix: tuple[str, ...] = ()):
        return run_script("train.py", *self.args, *flags, f"--workdir={workdir}", compile_cache=self.cache, prefix=prefix)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    """10 steps; checkpoints at 3, 6, 9 and 10; metrics records at 5 and 10, evaluated at 10."""
    root = tmp_path_factory.mktemp("trained")
    args = [
        "--config=configs/tests/tiny.py",
        "--config.data.source=text",
        f"--config.data.train_files={write_corpus(str(root / 'train'), 60, seed=0)}",
        f"--config.data.eval_files={write_corpus(str(root / 'valid'), 10, seed=1, n_files=1)}",
        "--config.train.checkpoint_every_steps=3",
        "--config.train.keep_checkpoints=5",
    ]
    run = Trained(str(root / "run"), args, str(root / "cache"))
    done = run.rerun(run.workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(os.listdir(os.path.join(run.workdir, "checkpoints")), key=int) == ["3", "6", "9", "10"]
    return run


@pytest.fixture
def workdir(trained, tmp_path) -> str:
    copy = str(tmp_path / "run")
    shutil.copytree(trained.workdir, copy)
    return copy


def _contents(workdir: str) -> dict[str, bytes]:
    files = [f for f in glob.glob(os.path.join(workdir, "**"), recursive=True) if os.path.isfile(f)]
    return {os.path.relpath(f, workdir): open(f, "rb").read() for f in files}


def _records(workdir: str) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _log_lines(stderr: str) -> list[str]:
    """stderr without the progress bars."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(("train:", "eval:"))]


def _step_dir(workdir: str, step: int) -> str:
    return os.path.join(workdir, "checkpoints", str(step))


def test_a_rerun_refused_for_its_checkpoint_changes_nothing(trained, workdir):
    """A rerun with another model shape: config.json must still describe the checkpoints."""
    before = _contents(workdir)
    done = trained.rerun(workdir, "--config.model.lstm.dim=32")
    assert done.returncode == 1
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and "checkpoint does not match the configured model" in errors[0], done.stderr[-3000:]
    assert _contents(workdir) == before


@pytest.mark.parametrize("trained_on", ["text", "ptb"])
def test_a_rerun_with_another_data_source_is_one_error_naming_it_and_changes_nothing(trained, workdir, trained_on):
    """text -> ptb, ptb -> text (config.json says what the checkpoint's data position is in): it
    was a KeyError traceback in the sources' load_state_dict."""
    rerun_with = {"text": "ptb", "ptb": "text"}[trained_on]
    if trained_on == "ptb":
        config_path = os.path.join(workdir, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["data"]["source"] = "ptb"
        with open(config_path, "w") as f:
            json.dump(config, f)
    before = _contents(workdir)
    done = trained.rerun(workdir, f"--config.data.source={rerun_with}")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert _error_lines(done.stderr) == [
        f"error: data.source={rerun_with!r}, but the checkpoint in {workdir} holds a position in "
        f"data.source={trained_on!r} (its config.json): resume with the source it trained on, or train in a new workdir"
    ]
    assert _contents(workdir) == before


def test_a_rerun_with_two_vocabulary_lines_swapped_is_refused_and_changes_nothing(trained, workdir):
    """vocab.txt edited in place (the same size): resuming would train each word's softmax row
    under the other word; the fingerprint recorded with the checkpoints refuses it."""
    vocab, trained_with, found = swap_vocabulary_lines(workdir)
    before = _contents(workdir)
    done = trained.rerun(workdir, "--config.train.num_steps=12")
    assert done.returncode == 1
    assert _error_lines(done.stderr) == [f"error: {fingerprint_mismatch(vocab, found, trained_with)}"], done.stderr
    assert _contents(workdir) == before


def _set_params_to_nan(step_dir: str) -> None:
    """Rewrites the checkpoint's state with NaN params: what corrupt bytes can decode to without a read error."""
    state_dir = os.path.join(step_dir, "state")
    checkpointer = ocp.PyTreeCheckpointer()
    state = checkpointer.restore(state_dir)
    state["params"] = jax.tree.map(lambda x: np.full_like(x, np.nan), state["params"])
    checkpointer.save(state_dir + ".nan", state)
    shutil.rmtree(state_dir)
    os.rename(state_dir + ".nan", state_dir)


def _truncate_array_files(step_dir: str) -> None:
    for path in glob.glob(os.path.join(step_dir, "state", "ocdbt.process_0", "d", "*")):
        os.truncate(path, os.path.getsize(path) // 2)


@pytest.mark.filterwarnings("ignore:Sharding info not provided")  # _set_params_to_nan's restore.
@pytest.mark.parametrize(
    "corrupt,reason",
    [(_set_params_to_nan, "non-finite values in params."), (_truncate_array_files, "Exception: Encountered error while reading")],
)
def test_a_corrupt_checkpoint_is_set_aside_in_one_warning_line(trained, workdir, corrupt, reason):
    corrupt(_step_dir(workdir, 10))
    done = trained.rerun(workdir, "--config.train.num_steps=12")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = _log_lines(done.stderr)
    assert len(lines) < 10, "\n".join(lines)
    warnings = [line for line in lines if "checkpoints/10: unreadable checkpoint" in line]
    assert len(warnings) == 1 and f"unreadable checkpoint ({reason}" in warnings[0], lines
    assert any("resumed from step 9" in line for line in lines), lines
    assert os.path.isdir(_step_dir(workdir, 10) + ".unreadable")
    train = [r for r in _records(workdir) if "train_loss" in r]
    assert [(r["step"], r["steps"]) for r in train[1:]] == [(10, 1), (12, 2)]  # Logged again from step 9.
    assert all(np.isfinite(r["train_loss"]) for r in train)


def test_a_metrics_line_over_the_file_size_limit_is_not_written_in_part(trained, workdir):
    """`ulimit -f` reached by the step-12 record: the file keeps whole lines, the error names it,
    and the rerun logs step 12 once."""
    path = os.path.join(workdir, "metrics.jsonl")
    limit_kib = 64  # Above every other file the resumed run writes.
    with open(path, "a") as f:  # A record that brings metrics.jsonl just under the limit.
        f.write(json.dumps({"step": 0, "note": "x" * (limit_kib * 1024 - os.path.getsize(path) - 100)}) + "\n")
    before = open(path, "rb").read()
    limited = ("bash", "-c", f'ulimit -f {limit_kib}; exec "$@"', "x")
    done = trained.rerun(workdir, "--config.train.num_steps=12", prefix=limited)
    assert done.returncode == 1
    assert _error_lines(done.stderr) == [f"error: [Errno 27] File too large: '{path}'"], done.stderr[-3000:]
    assert open(path, "rb").read() == before

    done = trained.rerun(workdir, "--config.train.num_steps=12")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in _records(workdir) if "train_loss" in r] == [5, 10, 12]


def test_a_resume_inside_a_logging_window_logs_how_many_steps_its_record_covers(trained, workdir):
    """Resumed from step 6 (logging every 5 steps): the record at 10 averages 4 steps, and says so;
    the records the first attempt wrote after step 6 are replaced, not repeated."""
    for step in (9, 10):
        shutil.rmtree(_step_dir(workdir, step))
    done = trained.rerun(workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    records = _records(workdir)
    assert [(r["step"], r["steps"]) for r in records if "train_loss" in r] == [(5, 5), (10, 4)]
    assert [r["step"] for r in records if "eval_perplexity" in r] == [10]


def test_sigterm_before_the_first_step_of_a_resumed_run_names_the_checkpoint_kept(workdir, monkeypatch):
    monkeypatch.setattr(PreemptionWatcher, "reached", lambda self, step: True)  # SIGTERM during start-up.
    kept = re.escape(f"checkpoint {workdir}/checkpoints/10 is kept")
    with pytest.raises(TrainingPreempted, match=rf"^stopped by SIGTERM before the first step; {kept}, rerun"):
        train_and_evaluate(saved_config(workdir), workdir)
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints")), key=int) == ["3", "6", "9", "10"]
