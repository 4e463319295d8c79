"""The workdir lock: a second run is refused naming the holder, a dead run's lock is taken over,
the lock goes when the run ends, and readers of the workdir never see it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import subprocess
import sys

import pytest

from elmo_jax.inference.embedder import embedder_from_workdir
from elmo_jax.evaluation.saved_models import evaluate_checkpoint
from elmo_jax.runtime import workdir_files, workdir_lock
from elmo_jax.training.loop import train_and_evaluate
from elmo_jax.runtime.workdir_lock import WorkdirInUseError
from tests.entry_points import ROOT, run_script
from tests.training.helpers import make_checkpoint_workdir, tiny_config

# Holds the lock of argv[1] until its stdin closes.
HOLDER = """
import sys
from elmo_jax.runtime import workdir_lock
with workdir_lock.hold(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def held_by_another_process(workdir: str):
    """Yields the holder record of a live process holding `workdir`'s lock."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, workdir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with open(os.path.join(workdir, workdir_files.LOCK)) as f:
            record = json.load(f)
        assert record["pid"] == holder.pid and record["host"] == socket.gethostname()
        yield record
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0


def _refusal(workdir: str, record: dict) -> str:
    return (
        f"{workdir}: in use by another training run (host {record['host']}, pid {record['pid']}, "
        f"started {record['start_time']})"
    )


def _write_lock(workdir: str, record: dict) -> str:
    path = os.path.join(workdir, workdir_files.LOCK)
    with open(path, "w") as f:
        json.dump(record, f)
    return path


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    workdir = str(tmp_path)
    with held_by_another_process(workdir) as record:
        with pytest.raises(WorkdirInUseError) as refused:
            with workdir_lock.hold(workdir):
                pytest.fail("a second holder entered")
        assert str(refused.value) == _refusal(workdir, record)
        with open(os.path.join(workdir, workdir_files.LOCK)) as f:
            assert json.load(f) == record  # The holder's lock is untouched.
    assert os.listdir(workdir) == []  # Released when the holder ended.


def test_train_py_refuses_at_once_with_one_line(tmp_path):
    workdir = str(tmp_path / "run")
    os.makedirs(workdir)
    with held_by_another_process(workdir) as record:
        done = run_script(
            "train.py", "--config=configs/tests/tiny.py", f"--workdir={workdir}", compile_cache=str(tmp_path / "cache")
        )
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [f"error: {_refusal(workdir, record)}"]
        assert os.listdir(workdir) == [workdir_files.LOCK]  # Not even config.json was written.


def test_train_and_evaluate_refuses_before_touching_the_workdir(tmp_path):
    workdir = str(tmp_path / "run")
    os.makedirs(workdir)
    with held_by_another_process(workdir) as record:
        with pytest.raises(WorkdirInUseError, match=f"^{re.escape(_refusal(workdir, record))}$"):
            train_and_evaluate(tiny_config(), workdir)
        assert os.listdir(workdir) == [workdir_files.LOCK]


def test_the_lock_of_a_dead_process_is_taken_over_with_a_warning(tmp_path, caplog):
    workdir = str(tmp_path)
    dead = {"host": socket.gethostname(), "pid": _dead_pid(), "start_time": "2020-01-01T00:00:00+00:00"}
    path = _write_lock(workdir, dead)
    with caplog.at_level(logging.WARNING):
        with workdir_lock.hold(workdir):
            with open(path) as f:
                assert json.load(f)["pid"] == os.getpid()
    assert [r.getMessage() for r in caplog.records] == [
        f"{workdir}: taking over the lock of a run that is gone (host {dead['host']}, pid {dead['pid']}, "
        "started 2020-01-01T00:00:00+00:00)"
    ]
    assert not os.path.exists(path)


def test_a_lock_from_another_host_is_refused_with_how_to_clear_it(tmp_path):
    workdir = str(tmp_path)
    record = {"host": "elsewhere.example", "pid": _dead_pid(), "start_time": "2020-01-01T00:00:00+00:00"}
    path = _write_lock(workdir, record)
    with pytest.raises(WorkdirInUseError) as refused:
        with workdir_lock.hold(workdir):
            pytest.fail("took the lock of another host's run")
    assert str(refused.value) == f"{_refusal(workdir, record)}; if that run has stopped, delete {path}"


def test_an_unreadable_lock_is_refused(tmp_path):
    path = os.path.join(tmp_path, workdir_files.LOCK)
    open(path, "w").close()
    with pytest.raises(WorkdirInUseError, match=f"unreadable lock {re.escape(path)}: b''.*delete the lock if no run uses"):
        with workdir_lock.hold(str(tmp_path)):
            pytest.fail("took an unreadable lock")


def test_a_takeover_never_removes_a_newer_lock(tmp_path):
    """Two processes judged the same lock stale: the second's removal must spare the first's new lock."""
    path = os.path.join(tmp_path, workdir_files.LOCK)
    stale, new = b'{"stale": 1}', b'{"new": 1}'
    with open(path, "wb") as f:
        f.write(stale)
    workdir_lock._remove_if_unchanged(path, stale)
    assert not os.path.exists(path)
    assert workdir_lock._create(path, new)
    workdir_lock._remove_if_unchanged(path, stale)
    with open(path, "rb") as f:
        assert f.read() == new


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    with pytest.raises(KeyError):
        with workdir_lock.hold(str(tmp_path)):
            assert os.listdir(tmp_path) == [workdir_files.LOCK]
            raise KeyError("failed")
    assert os.listdir(tmp_path) == []


def test_a_finished_run_leaves_no_lock(tiny_training_run):
    workdir, _, _ = tiny_training_run
    assert os.path.exists(os.path.join(workdir, "config.json"))
    assert not os.path.exists(os.path.join(workdir, workdir_files.LOCK))


# Process argv[2] of 2 (jax.distributed on localhost:argv[1]) takes the lock of argv[3]; prints the outcome.
TWO_PROCESSES = """
import os, sys, jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"localhost:{sys.argv[1]}", num_processes=2, process_id=int(sys.argv[2]))
from elmo_jax.runtime import workdir_files, workdir_lock
try:
    with workdir_lock.hold(sys.argv[3]):
        lock = os.path.join(sys.argv[3], workdir_files.LOCK)
        print("held", open(lock).read() if jax.process_index() == 0 else "")
except workdir_lock.WorkdirInUseError as e:
    print("refused", e)
"""


def _two_processes(workdir: str) -> list[str]:
    """The last stdout line of each of two processes taking `workdir`'s lock together."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESSES, str(port), str(i), workdir], stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
        for i in range(2)
    ]
    return [p.communicate(timeout=300)[0].strip().splitlines()[-1] for p in processes]


def test_with_two_processes_process_0_holds_it_and_a_refusal_stops_both(tmp_path):
    workdir = str(tmp_path)
    first, second = _two_processes(workdir)
    assert json.loads(first.removeprefix("held "))["pid"] > 0 and second == "held"
    assert os.listdir(workdir) == []
    record = {"host": "elsewhere.example", "pid": 1, "start_time": "2020-01-01T00:00:00+00:00"}
    path = _write_lock(workdir, record)
    assert _two_processes(workdir) == [
        f"refused {_refusal(workdir, record)}; if that run has stopped, delete {path}",
        f"refused {workdir}: process 0 could not take the workdir lock (see its error)",
    ]


def test_evaluation_and_embedding_are_not_blocked(tmp_path, capsys):
    workdir = make_checkpoint_workdir(tmp_path)
    with held_by_another_process(workdir):
        result = evaluate_checkpoint(workdir)
        embedder = embedder_from_workdir(workdir)
    assert result["step"] == 2 and result["tokens"] > 0
    assert embedder.model.token_encoder == "char_cnn"
    assert "files @ step 2" in capsys.readouterr().out
