"""Host memory: keep freed large buffers in the process (glibc malloc), so they are reused.

XLA:CPU allocates every large array (step outputs, the temporaries of a compiled step) with
`malloc` from its worker threads. glibc serves a large request from a worker thread's arena with a
fresh `mmap` and returns it to the kernel on `free`, whatever `M_MMAP_MAX` says (a non-main arena
cannot grow past 64 MiB), so every step page-faults all of its large buffers in again: one fault
per 4 KiB page, zero-filled by the kernel, a large share of a CPU train step (numbers in
docs/performance.md).

`reuse_freed_memory()` makes all threads share the main arena, serves large requests from the heap
instead of `mmap`, and keeps up to 2 GiB of free memory at the top of the heap: after the first
step the same pages are reused. The price is that the process keeps its peak heap size. It must run
before JAX starts its CPU backend (before the first computation or `jax.devices()`), when the
worker threads have no arenas of their own yet; the entry points call it first. Elsewhere than
glibc (macOS, musl) it does nothing. Accelerator memory is not affected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
TRIM_THRESHOLD_BYTES = 2**31 - 1  # mallopt takes an int: the largest it accepts.


def reuse_freed_memory() -> bool:
    """Tunes glibc malloc as described in the module docstring; True where it was applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # Not glibc.
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return all(mallopt(param, value) == 1 for param, value in settings)
