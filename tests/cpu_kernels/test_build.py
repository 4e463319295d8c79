"""Building the CPU kernel: cached per source, compiler and CPU; clear errors when it cannot be built."""

from __future__ import annotations

import os
import stat

import pytest

from elmo_jax.cpu_kernels import build


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """An empty kernel cache and no library loaded yet in this process."""
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "kernels"))
    build.load_library.cache_clear()
    yield tmp_path / "kernels"
    build.load_library.cache_clear()


def test_builds_once_into_the_cache_dir_and_reuses_it(fresh_build):
    library = build.load_library()
    assert callable(library.elmo_lstm_stack)
    built = list(fresh_build.iterdir())
    assert [p.name for p in built] == [build.library_path().name]  # One library, no temporary left.
    mtime = built[0].stat().st_mtime_ns
    build.load_library.cache_clear()
    build.load_library()
    assert built[0].stat().st_mtime_ns == mtime  # Read back, not compiled again.


def test_library_name_follows_source_and_cpu(fresh_build, monkeypatch):
    name = build.library_path().name
    monkeypatch.setattr(build, "_cpu_identity", lambda: "another cpu")
    assert build.library_path().name != name


def test_default_cache_dir_is_under_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(build.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_dir() == tmp_path / "elmo_jax" / "kernels"


def test_missing_compiler_is_a_clear_error(fresh_build, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(build.KernelUnavailable, match="no C\\+\\+ compiler: 'no-such-compiler'"):
        build.load_library()


def test_failing_compiler_names_its_error_and_leaves_no_file(fresh_build, monkeypatch, tmp_path):
    compiler = tmp_path / "broken-cxx"
    compiler.write_text("#!/bin/sh\necho 'lstm_stack.cc:1: error: something broke' >&2\nexit 1\n")
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(compiler))
    with pytest.raises(build.KernelUnavailable, match="compiling the CPU kernels failed: lstm_stack.cc:1: error: something broke"):
        build.load_library()
    assert not fresh_build.exists() or not os.listdir(fresh_build)
