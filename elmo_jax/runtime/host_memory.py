"""Host memory: keep freed large buffers in the process (glibc malloc), so they are reused; and
how much the machine has (`physical_memory_bytes`).

XLA:CPU mallocs its large arrays from worker threads, whose glibc arenas serve them with a fresh
`mmap` returned on `free`: every step page-faults its buffers in again. `reuse_freed_memory()` puts
all threads on the main arena, serves large requests from the heap and keeps up to 2 GiB free at
its top, at the price of keeping the peak heap size. It must run before JAX starts its CPU backend,
and applies only where JAX computes on the CPU: one arena serializes the XLA:GPU compiler's threads.
Elsewhere than glibc it does nothing. docs/performance.md has the numbers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
import os
import sys

# mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
TRIM_THRESHOLD_BYTES = 2**31 - 1  # mallopt takes an int: the largest it accepts.
ENV_VAR = "ELMO_JAX_REUSE_FREED_MEMORY"  # 1 / 0: on / off, whatever the platform.
ACCELERATOR_PLUGINS = ("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu")  # Distribution name prefixes.


def computes_on_cpu() -> bool:
    """Whether JAX will compute on the CPU, decided without starting a backend: from
    `$JAX_PLATFORMS` when set, else from the absence of an installed accelerator plugin."""
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms:
        return platforms.split(",")[0].strip() == "cpu"
    names = (dist.metadata["Name"] or "" for dist in importlib.metadata.distributions())
    return not any(name.lower().startswith(ACCELERATOR_PLUGINS) for name in names)


def reuse_freed_memory() -> bool:
    """Tunes glibc malloc as described in the module docstring; True where it was applied."""
    forced = os.environ.get(ENV_VAR, "")
    if forced not in ("", "0", "1"):
        raise ValueError(f"${ENV_VAR} must be 1, 0 or unset, got {forced!r}")
    if not sys.platform.startswith("linux") or forced == "0" or (forced == "" and not computes_on_cpu()):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # Not glibc.
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return all(mallopt(param, value) == 1 for param, value in settings)


def physical_memory_bytes() -> int:
    """The machine's physical memory in bytes (what a table that cannot fit is refused against)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
