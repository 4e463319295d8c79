"""Compiles the CPU kernels (lstm_stack.cc, char_cnn.cc) into one library for this machine on
first use and keeps it in a cache directory.

The kernels are built with `-march=native` (the vector width and instructions of this CPU), so
they are compiled where they run, once: the library's name is a hash of the sources, the compiler
and its version, the flags and the CPU, so a changed source, compiler or CPU (a home directory shared by
machines of different kinds) builds afresh. The directory: `$ELMO_JAX_KERNEL_CACHE` if set, else
`$XDG_CACHE_HOME/elmo_jax/kernels` (`~/.cache/elmo_jax/kernels`). The compiler: `$CXX`, else g++.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCES = tuple(Path(__file__).with_name(name) for name in ("lstm_stack.cc", "char_cnn.cc"))
HEADERS = (Path(__file__).with_name("kernels.h"),)
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-pthread")
CACHE_ENV = "ELMO_JAX_KERNEL_CACHE"


class KernelUnavailable(RuntimeError):
    """The CPU kernels cannot be built here (no C++ compiler, or it failed)."""


def cache_dir() -> Path:
    """`$ELMO_JAX_KERNEL_CACHE` if set, else `$XDG_CACHE_HOME/elmo_jax/kernels`."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "elmo_jax" / "kernels"


def _cpu_identity() -> str:
    """The CPU model and its instruction-set flags (what -march=native compiles for)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine() + platform.processor()
    keys = ("model name", "flags", "Features", "CPU part")
    return "\n".join(sorted({line for line in lines if line.split(":")[0].strip() in keys}))


def _compiler() -> str:
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler) is None:
        raise KernelUnavailable(f"no C++ compiler: {compiler!r} is not on PATH (set $CXX)")
    return compiler


def library_path() -> Path:
    """Where this machine's build of the kernels is (or will be) cached."""
    compiler = _compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    sources = [path.read_text() for path in SOURCES + HEADERS]
    key = "\0".join([*sources, compiler, version, " ".join(FLAGS), _cpu_identity()])
    return cache_dir() / f"elmo_kernels_{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"


@functools.cache
def load_library() -> ctypes.CDLL:
    """The kernels' shared library, compiled first if this machine has no cached build (a few
    seconds). Raises KernelUnavailable if it cannot be built."""
    path = library_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(fd)
        try:
            command = [_compiler(), *FLAGS, *map(str, SOURCES), "-o", tmp]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                first_error = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr)
                raise KernelUnavailable(f"compiling the CPU kernels failed: {first_error.strip()}")
            os.replace(tmp, path)  # Atomic: a concurrent process sees no library or a whole one.
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return ctypes.CDLL(str(path))
