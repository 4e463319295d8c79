"""reuse_freed_memory: after it, repeated XLA:CPU computations stop page-faulting their outputs in."""

import json
import os
import subprocess
import sys

import pytest

from elmo_jax.runtime import host_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Minor page faults in the median call of a jitted op whose 64 MiB output is freed again after each call.
FAULTS_PER_CALL = """
import json, resource, sys
from elmo_jax.runtime import host_memory
tuned = host_memory.reuse_freed_memory() if sys.argv[1] == "tune" else False
import jax, jax.numpy as jnp
x = jnp.ones((4096, 4096), jnp.float32)
double = jax.jit(lambda x: x * 2)
for _ in range(20):  # The heap grows for a few calls before the pattern of frees settles.
    jax.block_until_ready(double(x))
faults = []
for _ in range(9):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    jax.block_until_ready(double(x))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"tuned": tuned, "faults": sorted(faults)[len(faults) // 2]}))
"""
PAGES = 4096 * 4096 * 4 // 4096


def faults_per_call(mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", host_memory.ENV_VAR)}
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", FAULTS_PER_CALL, mode], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only")
def test_freed_outputs_are_reused_instead_of_faulted_in_again():
    untuned, tuned = faults_per_call("plain"), faults_per_call("tune")
    assert tuned["tuned"] is True
    # Without the tuning every call faults its whole output in again (the effect being fixed)...
    assert untuned["faults"] > 0.5 * PAGES, untuned
    # ...with it, the freed buffer is reused. One more process if the first measured otherwise: on a
    # loaded 2-core machine the allocation pattern has once taken longer than the warm-up to settle.
    if tuned["faults"] >= 0.05 * PAGES:
        tuned = faults_per_call("tune")
    assert tuned["faults"] < 0.05 * PAGES, tuned


def test_does_nothing_off_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert host_memory.reuse_freed_memory() is False


class _FakeLibc:
    """Records mallopt calls instead of changing this process's allocator."""

    def __init__(self):
        self.calls = []

        def mallopt(param, value):
            self.calls.append((param, value))
            return 1

        self.mallopt = mallopt


@pytest.fixture
def fake_libc(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(host_memory.ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv(host_memory.ENV_VAR, raising=False)
    return libc


def _installed(monkeypatch, *names):
    dists = [type("Dist", (), {"metadata": {"Name": name}})() for name in names]
    monkeypatch.setattr(host_memory.importlib.metadata, "distributions", lambda: dists)


@pytest.mark.parametrize(
    "platforms, plugins, on_cpu",
    [
        ("cpu", ["jax-cuda13-plugin"], True),  # The variable decides when set.
        ("cuda", [], False),
        ("cuda,cpu", [], False),
        ("", ["jax", "jaxlib"], True),
        ("", ["jax", "jax-cuda13-plugin"], False),
        ("", ["jax_cuda12_plugin"], False),
        ("", ["libtpu"], False),
    ],
)
def test_computes_on_cpu_from_platforms_or_installed_plugins(monkeypatch, platforms, plugins, on_cpu):
    monkeypatch.setenv("JAX_PLATFORMS", platforms)
    _installed(monkeypatch, *plugins)
    assert host_memory.computes_on_cpu() is on_cpu


def test_applied_where_jax_computes_on_cpu(monkeypatch, fake_libc):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert host_memory.reuse_freed_memory() is True
    assert (host_memory.M_ARENA_MAX, 1) in fake_libc.calls


def test_left_alone_where_a_gpu_computes(monkeypatch, fake_libc):
    """One arena serializes the XLA:GPU compiler's threads (a 2.4x slower compile on an H200)."""
    monkeypatch.setenv("JAX_PLATFORMS", "")
    _installed(monkeypatch, "jax", "jax-cuda13-plugin")
    assert host_memory.reuse_freed_memory() is False
    assert fake_libc.calls == []


@pytest.mark.parametrize("forced, platforms, applied", [("1", "cuda", True), ("0", "cpu", False)])
def test_variable_forces_it(monkeypatch, fake_libc, forced, platforms, applied):
    monkeypatch.setenv("JAX_PLATFORMS", platforms)
    monkeypatch.setenv(host_memory.ENV_VAR, forced)
    assert host_memory.reuse_freed_memory() is applied
    assert bool(fake_libc.calls) is applied


def test_bad_variable_is_one_line_error(monkeypatch, fake_libc):
    monkeypatch.setenv(host_memory.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="ELMO_JAX_REUSE_FREED_MEMORY must be 1, 0 or unset, got 'yes'"):
        host_memory.reuse_freed_memory()
