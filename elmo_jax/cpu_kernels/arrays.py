"""Arrays passed to the CPU kernels through ctypes: contiguous float32/int32 and their pointers."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

F32 = ctypes.POINTER(ctypes.c_float)
I32 = ctypes.POINTER(ctypes.c_int32)


def pointer(array: np.ndarray | None, kind: Any) -> Any:
    """A ctypes pointer to a contiguous array's data (None -> a null pointer)."""
    return None if array is None else array.ctypes.data_as(kind)


def f32(array: Any) -> np.ndarray:
    """`array` as a C-contiguous float32 NumPy array (no copy when it is one)."""
    return np.ascontiguousarray(array, np.float32)


def cpu_threads() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
