"""The ctypes side of the CPU kernels: contiguous float32/int32 arrays and their pointers, and the
kernels' packed models."""

from __future__ import annotations

import ctypes
import os
import weakref
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


def packed_model(owner: object, library: ctypes.CDLL, kernel: str, args: ctypes.Structure) -> int:
    """The handle of `elmo_{kernel}_model(args)`: the kernel's own copy of a model's weights, packed
    once for every call; freed (`elmo_{kernel}_free`) when `owner` is."""
    make, free = getattr(library, f"elmo_{kernel}_model"), getattr(library, f"elmo_{kernel}_free")
    make.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    handle = make(ctypes.byref(args))
    weakref.finalize(owner, free, handle)
    return handle
