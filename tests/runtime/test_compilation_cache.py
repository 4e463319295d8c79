"""The tools' persistent compilation cache: where it goes by default, and that a tool run fills it
and a second run reads it back to the same output."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import numpy as np

from elmo_jax.runtime import compilation_cache
from tests.entry_points import ROOT
from tests.reference.bilm_numpy import random_bilm_weights, write_bilm_files
from tests.inference.test_embedder import LINES, options


def test_default_dir(monkeypatch):
    monkeypatch.delenv(compilation_cache.ENV_VAR, raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert compilation_cache.default_dir() == "/xdg/elmo_jax/jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert compilation_cache.default_dir() == "/home/u/.cache/elmo_jax/jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/jax")
    assert compilation_cache.default_dir() == "/jax"
    monkeypatch.setenv(compilation_cache.ENV_VAR, "")  # Off, whatever JAX's variable says.
    assert compilation_cache.default_dir() == ""


def files_under(directory) -> list[str]:
    return [os.path.join(d, f) for d, _, names in os.walk(directory) for f in names]


def test_embed_runs_fill_and_reuse_the_cache(tmp_path):
    """Three `elmo-embed --engine xla` runs (the C++ kernels leave XLA nothing to
    compile): the first writes compiled programs under $XDG_CACHE_HOME/elmo_jax/jax, the second
    reads them (adding nothing, the same output), and `--compilation_cache=` writes no cache at all."""
    opts = options(True)
    options_path, weights_path = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    write_bilm_files(opts, random_bilm_weights(opts, seed=3), options_path, weights_path)
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (compilation_cache.ENV_VAR, "JAX_COMPILATION_CACHE_DIR")}
    env.update(JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    cache = tmp_path / "xdg" / "elmo_jax" / "jax"

    def embed(output: str, *flags: str) -> dict[str, np.ndarray]:
        command = [sys.executable, "-m", "elmo_jax.cli.embed", "--options", options_path, "--weights", weights_path,
                   "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / output), "--batch_size", "3", "--engine", "xla", *flags]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        with h5py.File(tmp_path / output, "r") as f:
            return {name: f[name][...] for name in f}

    first = embed("first.hdf5")
    written = sorted(files_under(cache))
    assert len(written) >= 3  # The char CNN, the gates, the LSTM chunks.
    second = embed("second.hdf5")
    assert sorted(files_under(cache)) == written  # Every program came from the cache.
    for name in first:
        np.testing.assert_array_equal(second[name], first[name])
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg_off")
    embed("third.hdf5", "--compilation_cache=")
    assert not (tmp_path / "xdg_off").exists()
