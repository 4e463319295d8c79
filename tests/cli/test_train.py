"""train.py end to end in subprocesses: kill -9 and SIGTERM mid-run, then resume exactly; bad workdir."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.entry_points import (
    checkpoint_steps, last_line, run_script, script_command, script_env, training_losses, training_records, uninterrupted_run,
)

NUM_STEPS = 30


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(train.py flags without --workdir, compilation cache, reference workdir: an uninterrupted run)."""
    return uninterrupted_run(tmp_path_factory.mktemp("train_script"), NUM_STEPS, checkpoint_every_steps=3)


def _start(setup, workdir: str) -> subprocess.Popen:
    flags, cache, _ = setup
    command = script_command("train.py", *flags, f"--workdir={workdir}")
    return subprocess.Popen(command, env=script_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(process: subprocess.Popen, workdir: str, step: int) -> None:
    deadline = time.monotonic() + 300
    while not any(s >= step for s in checkpoint_steps(workdir)):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _resume(setup, workdir: str) -> None:
    flags, cache, _ = setup
    done = run_script("train.py", *flags, f"--workdir={workdir}", compile_cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_killed_run_resumes_from_latest_checkpoint_and_reproduces_losses(setup, tmp_path):
    workdir = str(tmp_path / "run")
    process = _start(setup, workdir)
    _wait_for_checkpoint(process, workdir, 6)
    process.kill()  # SIGKILL: no handler runs; an asynchronous save may be half written.
    process.communicate()
    interrupted_at = checkpoint_steps(workdir)[-1]
    assert interrupted_at < NUM_STEPS
    _resume(setup, workdir)
    expected = training_losses(setup[2])
    assert sorted(expected) == list(range(1, NUM_STEPS + 1))
    assert training_losses(workdir) == expected  # Exactly: same state, same data, same compiled step.
    assert checkpoint_steps(workdir)[-1] == NUM_STEPS


def test_sigterm_checkpoints_exits_143_and_resumes_exactly(setup, tmp_path):
    workdir = str(tmp_path / "run")
    process = _start(setup, workdir)
    _wait_for_checkpoint(process, workdir, 3)
    logged_at_signal = max(training_losses(workdir))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-3000:]
    stopped_at = max(training_losses(workdir))
    assert logged_at_signal <= stopped_at <= logged_at_signal + 2 < NUM_STEPS  # Within the current step.
    assert last_line(stderr) == (
        f"stopped by SIGTERM at step {stopped_at}; checkpoint {workdir}/checkpoints/{stopped_at} is saved, "
        "rerun the same command to resume"
    )
    assert checkpoint_steps(workdir)[-1] == stopped_at
    assert not os.path.exists(os.path.join(workdir, f"eval_files_{stopped_at}.json"))
    _resume(setup, workdir)
    assert [r["step"] for r in training_records(workdir)] == list(range(1, NUM_STEPS + 1))  # Every step once: nothing lost, nothing redone.
    assert training_losses(workdir) == training_losses(setup[2])


def _make_unwritable(workdir: str) -> list[str]:
    """A workdir that cannot be written: read-only, or for root (whom permissions do not stop) a
    file-size limit of 0 bytes set by the returned command prefix, so every write fails as on a full disk."""
    os.makedirs(workdir)
    if os.geteuid() != 0:
        os.chmod(workdir, 0o500)
        return []
    return ["bash", "-c", 'ulimit -f 0 && exec "$@"', "bash"]


def test_unwritable_workdir_is_a_one_line_error(setup, tmp_path):
    flags, cache, _ = setup
    workdir = str(tmp_path / "run")
    prefix = _make_unwritable(workdir)
    done = run_script("train.py", *flags, f"--workdir={workdir}", compile_cache=cache, prefix=prefix)
    assert done.returncode == 1, done.stderr[-3000:]
    assert last_line(done.stderr).startswith(f"error: {workdir}: cannot write to the workdir ([Errno ")
    assert os.listdir(workdir) == []
