"""Faults in the CPU kernels' build cache, each met by a fresh process as a user's next run would
meet it: the process exits 0 and embeds with the kernels (rebuilt where the cache is damaged) or,
where they cannot be built, with XLA after one warning line."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from elmo_jax.inference.cpu_kernels import build
from tests.inference.cpu_kernels.compiler import requires_compiler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Chooses the engine as the embedder does (`embed.cpu_kernels`, engine 'auto') for a small char-CNN
# biLM, and checks the kernels' token embeddings against XLA's. Prints the engine it got.
EMBED = """
import jax, jax.numpy as jnp, numpy as np
from elmo_jax.data.chars import words_to_char_ids
from elmo_jax.inference.embedder import cpu_kernels, encode_chars
from flax.core import FrozenDict
from elmo_jax.model.bilm import CHAR_CNN_DEFAULTS, BiLM

model = BiLM(vocab_size=1, width=8, contextualizer_fields=FrozenDict(dim=8, n_layers=1), dropout=0.0,
             char_cnn=FrozenDict(CHAR_CNN_DEFAULTS, filters=((1, 4), (2, 4)), embed_dim=4))
inputs = {"char_ids": jnp.ones((2, 1, 3, 7), jnp.int32), "mask": jnp.ones((2, 1, 3), bool)}
params = model.init(jax.random.key(0), inputs, model.initial_state(1))["params"]
kernels = cpu_kernels(model, params, "auto")
char_ids = words_to_char_ids(["a", "kernel", "cache"], 7)
if kernels.char_cnn is not None:
    want = encode_chars(model, params, jnp.asarray(char_ids))
    np.testing.assert_allclose(kernels.char_cnn.encode(char_ids), want, rtol=1e-5, atol=1e-5)
print("cpu" if kernels.char_cnn is not None else "xla")
"""


def embed(cache, **env) -> subprocess.CompletedProcess:
    """Runs EMBED in a fresh process with the kernel cache at `cache`."""
    env = {**os.environ, "PYTHONPATH": ROOT, build.CACHE_ENV: str(cache), **env}
    return subprocess.run([sys.executable, "-c", EMBED], env=env, capture_output=True, text=True, timeout=300)


def warning_lines(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stderr.strip().splitlines()


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """A kernel cache holding this machine's build, made by a fresh process."""
    cache = tmp_path_factory.mktemp("built_kernels")
    env = {**os.environ, "PYTHONPATH": ROOT, build.CACHE_ENV: str(cache)}
    load = "from elmo_jax.inference.cpu_kernels import build; build.load_library()"
    result = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return cache


def damaged_copy(built_cache, tmp_path, damage):
    """A copy of `built_cache` whose library `damage` rewrites (given its bytes)."""
    cache = tmp_path / "kernels"
    shutil.copytree(built_cache, cache)
    (library,) = cache.glob("*.so")
    library.write_bytes(damage(library.read_bytes()))
    return cache, library


@requires_compiler
@pytest.mark.parametrize("damage", [lambda data: data[: len(data) // 2], lambda data: b""], ids=["truncated", "empty"])
def test_damaged_cached_build_is_rebuilt(built_cache, tmp_path, damage):
    cache, library = damaged_copy(built_cache, tmp_path, damage)
    result = embed(cache)
    lines = warning_lines(result)
    assert result.stdout.split() == ["cpu"]
    assert len(lines) == 1 and str(library) in lines[0] and "checksum" in lines[0]
    assert library.read_bytes() == next(built_cache.glob("*.so")).read_bytes()


@requires_compiler
def test_cache_path_that_is_a_file_builds_privately(tmp_path):
    cache = tmp_path / "kernels"
    cache.write_text("someone's file")
    result = embed(cache)
    lines = warning_lines(result)
    assert result.stdout.split() == ["cpu"]
    assert len(lines) == 1 and str(cache) in lines[0] and "File exists" in lines[0]
    assert cache.read_text() == "someone's file"
    assert not list(tmp_path.glob("kernels?*"))


@pytest.mark.parametrize("compiler", ["/nonexistent", "cannot-run"])
def test_no_working_compiler_falls_back_to_xla(tmp_path, compiler):
    if compiler == "cannot-run":
        compiler = tmp_path / "cxx"
        compiler.write_text("#!/no/such/interpreter\n")
        compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    result = embed(tmp_path / "kernels", CXX=str(compiler))
    lines = warning_lines(result)
    assert result.stdout.split() == ["xla"]
    assert len(lines) == 1 and "computing with XLA" in lines[0] and str(compiler) in lines[0]
