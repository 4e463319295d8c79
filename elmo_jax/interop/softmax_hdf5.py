"""The softmax of a bilm-tf/AllenNLP biLM, stored apart from its weights (as the original ELMo's):
`softmax/W` `[V, P]` and `softmax/b` `[V]`, row i for word i of the vocabulary, as elmo-jax's.
"""

from __future__ import annotations

from typing import Callable

import h5py
import numpy as np

from elmo_jax.runtime.atomic_write import write_atomic
from elmo_jax.interop.export_sets import WeightFileError, open_hdf5, read_finite, write_hdf5

DATASETS = ("softmax/W", "softmax/b")


def check_softmax(w: np.ndarray, b: np.ndarray, vocab_size: int, dim: int, where: str) -> None:
    """Raises a one-line WeightFileError naming `where` unless W is `[vocab_size, dim]` and b `[vocab_size]`."""
    if w.ndim != 2 or w.shape[1] != dim:
        raise WeightFileError(f"{where}: 'softmax/W' has shape {tuple(w.shape)}, the model needs [V, {dim}]")
    if w.shape[0] != vocab_size:
        raise WeightFileError(
            f"{where}: 'softmax/W' has {w.shape[0]} rows but the vocabulary has {vocab_size} words"
        )
    if b.shape != (vocab_size,):
        raise WeightFileError(f"{where}: 'softmax/b' has shape {tuple(b.shape)}, expected ({vocab_size},)")


def save_softmax(w: np.ndarray, b: np.ndarray, path: str) -> None:
    """Writes W `[V, P]` and b `[V]` as float32 `softmax/W`, `softmax/b` (atomically: no partial file)."""
    write_atomic(path, softmax_writer(w, b, path))


def softmax_writer(w: np.ndarray, b: np.ndarray, where: str, export_id: str | None = None) -> Callable[[str], None]:
    """Checks W and b (errors name `where`); the function writing their softmax file, with `export_id`."""
    w, b = np.asarray(w, np.float32), np.asarray(b, np.float32)
    check_softmax(w, b, w.shape[0], w.shape[-1], where)
    return lambda path: write_hdf5(path, {"softmax/W": w, "softmax/b": b}, export_id)


def load_softmax(path: str, vocab_size: int, dim: int) -> dict[str, np.ndarray]:
    """`{'W': [V, P], 'b': [V]}` float32 of a softmax file, finite and checked against V and P."""
    with open_hdf5(path, "softmax") as f:
        for name in DATASETS:
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise WeightFileError(f"{path}: missing dataset '{name}'")
        w, b = (read_finite(f, name, path) for name in DATASETS)
    check_softmax(w, b, vocab_size, dim, path)
    return {"W": w, "b": b}
