"""Data parallelism: 8 simulated devices give the 1-device result for the same global batch."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from elmo_jax.runtime import data_parallel
from tests.entry_points import xla_flags
from tests.training.parallel_run import FIRST, INITIAL

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_run.py")


def _assert_same_training(actual: dict, desired: dict) -> None:
    """Same losses, and each parameter's change the same up to floating-point reassociation: after
    the first step within 1e-3 of that step's change, at the end within 5e-2 of the run's change.

    A sum split over devices adds in another order, and that can move a ReLU pre-activation or a
    max-pool's winner across its kink for one token: the rows that token touches then take another
    gradient, and the steps after it train on slightly other parameters. One step stays within 2e-5
    of its change on an AMD EPYC; after 20 steps a moved winner has left a Transformer's char CNN
    1.2e-2 of its change apart on another AMD EPYC (its losses 2e-4 apart), and its char embeddings
    2.8e-3 on an Intel Xeon with AVX-512. So each parameter is compared by the norm of its
    difference against the norm of its change (a wrong split, such as one device's gradient or a
    missing mean, is tens of percent off, and fails at the losses first), plus a floor of 1e-7 per
    element for parameters that barely move (attention's key bias has no gradient but rounding).
    """
    assert actual.keys() == desired.keys()
    np.testing.assert_allclose(actual["losses"], desired["losses"], rtol=1e-3)
    for key in (k for k in desired if k.startswith("[")):
        np.testing.assert_array_equal(actual[INITIAL + key], desired[INITIAL + key], err_msg=key)
        for prefix, tolerance in ((FIRST, 1e-3), ("", 5e-2)):
            change = np.linalg.norm(desired[prefix + key] - desired[INITIAL + key])
            error = np.linalg.norm(actual[prefix + key] - desired[prefix + key])
            floor = 1e-7 * np.sqrt(desired[key].size)
            assert error <= tolerance * change + floor, f"{prefix or 'end'}{key}: |difference| {error:.3g}, |change| {change:.3g}"


def _run(device_counts: tuple[int, ...], out: str, contextualizer: str = "lstm") -> dict[int, dict]:
    """The training on each number of devices, one after the other in one process: `{n: result}`."""
    env = {**os.environ, "XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=8"), "JAX_PLATFORMS": "cpu",
           "CONTEXTUALIZER": contextualizer}
    subprocess.run([sys.executable, SCRIPT, ",".join(map(str, device_counts)), out], check=True, env=env, timeout=600)
    return {n: dict(np.load(os.path.join(out, f"{n}.npz"))) for n in device_counts}


@pytest.fixture(scope="module")
def lstm_runs(tmp_path_factory) -> dict[int, dict]:
    """The LSTM on the whole global batch on one device (the reference) and split over eight."""
    return _run((1, 8), str(tmp_path_factory.mktemp("lstm")))


@pytest.mark.slow
def test_eight_devices_match_one_device(lstm_runs):
    _assert_same_training(lstm_runs[8], lstm_runs[1])


@pytest.mark.slow
@pytest.mark.parametrize("contextualizer", ["gated_cnn", "transformer"])
def test_eight_devices_match_one_device_with_another_contextualizer(tmp_path, contextualizer):
    """The gated CNN's buffers and the Transformer's memory are split along B over the devices, as
    the LSTM states."""
    runs = _run((1, 8), str(tmp_path), contextualizer)
    assert any(contextualizer in key for key in runs[1])
    _assert_same_training(runs[8], runs[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one_process(lstm_runs, tmp_path):
    """jax.distributed on localhost (gloo CPU collectives): each process feeds its half."""
    out, port = str(tmp_path / "two.npz"), str(_free_port())
    env = {**os.environ, "XLA_FLAGS": xla_flags()}
    procs = [
        subprocess.Popen([sys.executable, SCRIPT, "--process", str(i), "--processes", "2", "--port", port, out], env=env)
        for i in range(2)
    ]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    _assert_same_training(dict(np.load(out)), lstm_runs[1])


def test_batch_size_must_divide_by_device_count():
    mesh = data_parallel.make_mesh()
    with pytest.raises(ValueError, match="train.batch_size=3 must be divisible"):
        data_parallel.check_batch_size(3, type("M", (), {"size": 2})(), "train.batch_size")
    data_parallel.check_batch_size(4, mesh, "train.batch_size")
