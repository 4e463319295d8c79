"""SIGTERM: the watcher reports it at the next step; several processes agree on the stop step."""

import os
import signal
import socket
import subprocess
import sys
import time

from elmo_jax.training.preemption import PreemptionWatcher
from tests.entry_points import xla_flags

SCRIPT = os.path.join(os.path.dirname(__file__), "preemption_run.py")


def test_sigterm_is_reported_and_the_previous_handler_restored():
    previous = signal.getsignal(signal.SIGTERM)
    with PreemptionWatcher() as watcher:
        assert not watcher.reached(0)
        os.kill(os.getpid(), signal.SIGTERM)  # Handled, not fatal.
        assert watcher.reached(1)
    assert signal.getsignal(signal.SIGTERM) is previous


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_processes_stop_at_the_same_step_when_one_gets_sigterm():
    """jax.distributed on localhost; only process 1 is signalled, both stop after the same step."""
    port = str(_free_port())
    env = {**os.environ, "XLA_FLAGS": xla_flags()}
    procs = [
        subprocess.Popen([sys.executable, SCRIPT, str(i), "2", port], env=env, stdout=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    try:
        assert [p.stdout.readline().strip() for p in procs] == ["ready", "ready"]
        time.sleep(0.5)
        procs[1].send_signal(signal.SIGTERM)
        outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0][0] == "stopped" and outputs[0] == outputs[1]
