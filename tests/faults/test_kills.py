"""kill -9 at seeded random moments of a training run (mid-checkpoint included), rerunning after
each: the finished run equals an uninterrupted one, every step's loss and the final perplexity."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time

import pytest

from tests.entry_points import (
    checkpoint_steps, run_script, script_command, script_env, training_losses, uninterrupted_run,
)

NUM_STEPS = 24


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(train.py flags without --workdir, compilation cache, an uninterrupted run's workdir)."""
    return uninterrupted_run(tmp_path_factory.mktemp("kills"), NUM_STEPS, checkpoint_every_steps=2)


def _logged_step(workdir: str) -> int:
    try:
        return max(training_losses(workdir), default=0)
    except FileNotFoundError:
        return 0


def _saving(workdir: str) -> bool:
    """An orbax save is under way: its temporary step directory exists."""
    directory = os.path.join(workdir, "checkpoints")
    return os.path.isdir(directory) and any("tmp" in name for name in os.listdir(directory))


def _kill_when(process: subprocess.Popen, ready, delay: float) -> None:
    """SIGKILL `delay` seconds after `ready()` (polled every millisecond), or when the run ends by itself."""
    deadline = time.monotonic() + 300
    while process.poll() is None and not ready():
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(delay)
    process.kill()
    process.communicate()


@pytest.mark.slow
def test_kill_9_at_random_moments_then_the_rerun_equals_an_uninterrupted_run(reference, tmp_path):
    flags, cache, expected_dir = reference
    workdir = str(tmp_path / "run")
    rng = random.Random(0)
    moments = [("step", rng.randint(1, NUM_STEPS - 1), rng.uniform(0, 0.3)) for _ in range(4)]
    moments.insert(2, ("saving", None, 0.0))  # The moment a checkpoint's files are being written.
    for kind, step, delay in moments:
        process = subprocess.Popen(
            script_command("train.py", *flags, f"--workdir={workdir}"), env=script_env(cache),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        ready = (lambda: _saving(workdir)) if kind == "saving" else (lambda: _logged_step(workdir) >= step)
        _kill_when(process, ready, delay)
        assert all(s <= NUM_STEPS for s in checkpoint_steps(workdir))
    done = run_script("train.py", *flags, f"--workdir={workdir}", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert training_losses(workdir) == training_losses(expected_dir)  # Exactly: same state, data and program.
    assert sorted(training_losses(workdir)) == list(range(1, NUM_STEPS + 1))
    name = f"eval_files_{NUM_STEPS}.json"
    with open(os.path.join(workdir, name)) as got, open(os.path.join(expected_dir, name)) as want:
        assert json.load(got) == json.load(want)
    assert checkpoint_steps(workdir)[-1] == NUM_STEPS
    assert not [n for n in os.listdir(os.path.join(workdir, "checkpoints")) if "tmp" in n or "unreadable" in n]
