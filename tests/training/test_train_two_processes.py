"""train.py as two processes (jax.distributed on localhost): SIGTERM both mid-run, then resume.

The pre-empted pair agrees on a step, checkpoints it cooperatively (orbax, with each process's
data position) and exits 143; rerunning the command resumes, and the losses equal those of an
uninterrupted two-process run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from tests.entry_points import ROOT, script_command, script_env
from tests.training.helpers import write_corpus

NUM_STEPS = 40  # Long enough that the pair is still training when the signal arrives.
PREEMPTED = 143

pytestmark = pytest.mark.slow  # Trains real runs: the full suite only.


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


class Pair:
    """The two processes of one train.py run; their stderr goes to files (a pipe read one process
    at a time can fill up and block the other inside a collective)."""

    def __init__(self, flags: list[str], workdir: str, cache: str):
        port = _free_port()
        logs = workdir + "_logs"
        os.makedirs(logs, exist_ok=True)
        self.logs = [os.path.join(logs, f"stderr_{i}_{time.monotonic_ns()}.txt") for i in range(2)]
        self.processes = []
        for i, log in enumerate(self.logs):
            with open(log, "w") as stderr:
                self.processes.append(subprocess.Popen(
                    script_command(
                        "train.py", *flags, f"--workdir={workdir}", "--config.distributed.enabled=True",
                        f"--config.distributed.coordinator_address=localhost:{port}",
                        "--config.distributed.num_processes=2", f"--config.distributed.process_id={i}",
                    ),
                    env=script_env(cache), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                ))

    def running(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def signal(self, signum: int) -> None:
        for process in self.processes:
            process.send_signal(signum)

    def wait(self) -> list[int]:
        """The exit codes; fails with a process's stderr if one is neither 0 nor 143."""
        codes = []
        for process, log in zip(self.processes, self.logs):
            process.wait(timeout=600)
            with open(log) as f:
                assert process.returncode in (0, PREEMPTED), f.read()[-3000:]
            codes.append(process.returncode)
        return codes


def _losses(workdir: str) -> dict[int, float]:
    """Training loss per step from process 0's metrics.jsonl; a re-logged step takes its later value."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.endswith("\n")]
    return {r["step"]: r["train_loss"] for r in records if "train_loss" in r}


def _checkpoints(workdir: str) -> list[int]:
    directory = os.path.join(workdir, "checkpoints")
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit()) if os.path.isdir(directory) else []


@pytest.fixture(scope="module")
def flags(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_processes")
    return [
        "--config=configs/tests/tiny.py",
        "--config.data.source=text",
        f"--config.data.train_files={write_corpus(str(root / 'train'), 60, seed=0, n_files=4)}",
        f"--config.data.eval_files={write_corpus(str(root / 'valid'), 8, seed=1, n_files=2)}",
        f"--config.train.num_steps={NUM_STEPS}",
        "--config.train.log_every_steps=1",
        "--config.train.checkpoint_every_steps=2",
    ], str(root / "jax_cache")


def test_preempted_pair_checkpoints_and_resumes_to_the_uninterrupted_losses(flags, tmp_path):
    flags, cache = flags
    reference = str(tmp_path / "reference")
    assert Pair(flags, reference, cache).wait() == [0, 0]
    expected = _losses(reference)
    assert sorted(expected) == list(range(1, NUM_STEPS + 1))

    workdir = str(tmp_path / "run")
    pair = Pair(flags, workdir, cache)
    deadline = time.monotonic() + 300
    while not _checkpoints(workdir):  # Wait for step 2's checkpoint: the pair is training.
        assert pair.running() and time.monotonic() < deadline
        time.sleep(0.02)
    pair.signal(signal.SIGTERM)
    assert pair.wait() == [PREEMPTED, PREEMPTED]
    stopped_at = _checkpoints(workdir)[-1]
    assert 2 <= stopped_at < NUM_STEPS

    assert Pair(flags, workdir, cache).wait() == [0, 0]
    with open(os.path.join(workdir, "run_info.json")) as f:
        assert [start["step"] for start in json.load(f)["starts"]] == [0, stopped_at]  # resumed
    got = _losses(workdir)
    assert sorted(got) == sorted(expected)
    for step in expected:
        assert got[step] == pytest.approx(expected[step], rel=1e-6), step
