"""A build of the CPU kernels for CPUs without AVX-512, compiled once per test session."""

import platform

import pytest

from elmo_jax.inference.cpu_kernels import build


@pytest.fixture(scope="session")
def avx2_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("avx2_kernels")


@pytest.fixture
def avx2_build(monkeypatch, avx2_cache_dir):
    """While the test runs, `load_library` gives the kernels built for x86-64-v3 (AVX2, 8-float
    vectors, other register blocks) instead of this machine's."""
    if platform.machine() != "x86_64":
        pytest.skip("AVX2 is an x86-64 instruction set")
    monkeypatch.setattr(build, "FLAGS", tuple("-march=x86-64-v3" if f == "-march=native" else f for f in build.FLAGS))
    monkeypatch.setenv(build.CACHE_ENV, str(avx2_cache_dir))
    build.forget_library()
    yield
    build.forget_library()
