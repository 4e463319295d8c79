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
glibc (macOS, musl) it does nothing.

It applies only where JAX computes on the CPU: `$JAX_PLATFORMS` names cpu first, or, when it is
unset, no accelerator plugin (jax-cuda*, jax-rocm*, libtpu) is installed. Where a GPU computes,
one shared arena serializes the XLA:GPU compiler's threads: on an H200 the elmo_original train step
compiled in 123 s instead of 51 s (docs/performance.md). `$ELMO_JAX_REUSE_FREED_MEMORY` = 1 or 0
forces it on or off.
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
