"""Compiles the CPU kernels (lstm_stack.cc, char_cnn.cc) with `-march=native` into one library on
first use, cached under a hash of the sources, compiler, flags and CPU (where, and what makes the
cache safe to share: docs/embeddings.md). A failed build raises KernelUnavailable, remembered by
the process until `forget_library()`.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from elmo_jax.runtime.atomic_write import write_atomic

SOURCES = tuple(Path(__file__).with_name(name) for name in ("lstm_stack.cc", "char_cnn.cc"))
HEADERS = (Path(__file__).with_name("kernels.h"),)
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-pthread")
CACHE_ENV = "ELMO_JAX_KERNEL_CACHE"
PREFIX = "elmo_kernels"  # Every file of the cache is named `<PREFIX>_<key>...`, but the lock.
LOCK_NAME = f"{PREFIX}.lock"
MAX_UNUSED_DAYS = 30


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


def compiler() -> str:
    """The C++ compiler (`$CXX`, else g++); KernelUnavailable if it is not on PATH."""
    name = os.environ.get("CXX", "g++")
    if shutil.which(name) is None:
        raise KernelUnavailable(f"no C++ compiler: {name!r} is not on PATH (set $CXX)")
    return name


def _run_compiler(*args: str) -> subprocess.CompletedProcess:
    """The compiler run with `args`; KernelUnavailable if it cannot be started."""
    name = compiler()
    try:
        return subprocess.run([name, *args], capture_output=True, text=True)
    except OSError as e:
        reason = e.strerror
    # Raised outside `except`: it carries no OSError that a caller could take for an I/O error.
    raise KernelUnavailable(f"cannot run the C++ compiler {name!r}: {reason}")


def library_path() -> Path:
    """Where this machine's build of the kernels is (or will be) cached."""
    version = _run_compiler("--version").stdout
    sources = [path.read_text() for path in SOURCES + HEADERS]
    key = "\0".join([*sources, compiler(), version, " ".join(FLAGS), _cpu_identity()])
    return cache_dir() / f"{PREFIX}_{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"


def load_library() -> ctypes.CDLL:
    """The kernels' shared library, compiled first unless a verified build is cached; KernelUnavailable
    if it cannot be built, now and on every later call (until `forget_library()`)."""
    library = _load_once()
    if isinstance(library, KernelUnavailable):
        raise KernelUnavailable(*library.args)
    return library


@functools.cache
def _load_once() -> ctypes.CDLL | KernelUnavailable:
    """The library, or why it cannot be built: a failure is remembered too."""
    try:
        return _load(library_path())
    except KernelUnavailable as e:
        return e


def forget_library() -> None:
    """Makes the next `load_library` look, build and load again (after changing the cache directory,
    the compiler or the flags); a library already loaded stays mapped."""
    _load_once.cache_clear()


def _load(path: Path) -> ctypes.CDLL:
    """The library cached at `path` (built there first if needed), else a private build."""
    try:
        with _locked(path.parent):
            return _load_cached(path)
    except OSError as e:
        logging.warning("the CPU kernels' cache %s cannot be used (%s): building them in a temporary directory",
                        path.parent, e)
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}_") as private:
        library = Path(private) / path.name
        _compile(str(library))
        return _open(library)  # The directory goes; the loaded library stays mapped.


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Holds the cache's exclusive lock (creating the directory); OSError if it cannot."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_NAME, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # Closing the file releases the lock.


def _load_cached(path: Path) -> ctypes.CDLL:
    """The verified library at `path`, compiled (and the cache pruned) first unless there is one."""
    if _verified(path):
        _mark_used(path)
    else:
        write_atomic(str(path), _compile)
        write_atomic(str(_checksum_path(path)), lambda tmp: Path(tmp).write_text(_checksum_line(path)))
        _prune(path)
    return _open(path)


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _checksum_line(path: Path) -> str:
    """`path`'s SHA-256 as `sha256sum` writes it."""
    return f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"


def _verified(path: Path) -> bool:
    """Whether `path` exists and matches the checksum beside it (warning when it does not)."""
    checksum = _checksum_path(path)
    if not (path.exists() and checksum.exists()):
        return False
    if checksum.read_bytes() == _checksum_line(path).encode():
        return True
    logging.warning("the CPU kernels' build %s does not match its checksum %s: compiling it again", path, checksum)
    return False


def _mark_used(path: Path) -> None:
    """Sets the modification time of the library and its checksum to now, so `_prune` keeps them."""
    for used in (path, _checksum_path(path)):
        with contextlib.suppress(OSError):  # Another user's cache, read only: it is only pruned sooner.
            os.utime(used)


def _prune(current: Path) -> None:
    """Removes the files of builds other than `current` unused for MAX_UNUSED_DAYS (lock held)."""
    oldest = time.time() - MAX_UNUSED_DAYS * 24 * 3600
    key = current.name.split(".")[0]
    for path in current.parent.glob(f"{PREFIX}_*"):
        with contextlib.suppress(FileNotFoundError):
            if path.name.split(".")[0] != key and path.stat().st_mtime < oldest:
                path.unlink()


def _compile(out: str) -> None:
    """Compiles the kernels into the library `out`; KernelUnavailable with the first error if it fails."""
    result = _run_compiler(*FLAGS, *map(str, SOURCES), "-o", out)
    if result.returncode != 0:
        first_error = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr)
        raise KernelUnavailable(f"compiling the CPU kernels failed: {first_error.strip()}")


def _open(path: Path) -> ctypes.CDLL:
    """The loaded library at `path`; KernelUnavailable if the dynamic loader refuses it."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise KernelUnavailable(f"loading the CPU kernels failed: {e}") from None
