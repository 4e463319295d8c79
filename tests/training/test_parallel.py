"""Data parallelism: 8 simulated devices give the 1-device result for the same global batch."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from elmo_jax.runtime import data_parallel
from tests.entry_points import xla_flags
from tests.training.parallel_run import INITIAL

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_run.py")


def _assert_same_training(actual: dict, desired: dict) -> None:
    """Same losses, and each parameter's change over the run the same up to floating-point
    reassociation.

    A sum split over devices adds in another order, and that can move a ReLU pre-activation or a
    max-pool's winner across its kink for one token: the rows that token touches then take another
    gradient: the Transformer's feed-forward weights end up to 4e-5 of their change apart on an
    AMD EPYC, and its char embeddings 2.8e-3 on an Intel Xeon with AVX-512 (another summation
    order, a max-pool winner moved for a token's characters). So each parameter is compared by the
    norm of its difference against the norm of its change, within 1e-2 (a wrong split, such as one
    device's gradient or a missing mean, is tens of percent off, and fails at the losses first),
    plus a floor of 1e-7 per element for parameters that barely move (attention's key bias has no
    gradient but rounding).
    """
    assert actual.keys() == desired.keys()
    np.testing.assert_allclose(actual["losses"], desired["losses"], rtol=1e-3)  # The Transformer run: 2e-4 apart on some AMD EPYCs (summation order).
    for key in (k for k in desired if k.startswith("[")):
        np.testing.assert_array_equal(actual[INITIAL + key], desired[INITIAL + key], err_msg=key)
        change = np.linalg.norm(desired[key] - desired[INITIAL + key])
        error = np.linalg.norm(actual[key] - desired[key])
        assert error <= 1e-2 * change + 1e-7 * np.sqrt(desired[key].size), f"{key}: |difference| {error:.3g}, |change| {change:.3g}"


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
