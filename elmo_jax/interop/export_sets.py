"""The files of one export, and the hdf5 helpers of the weight and softmax files alike.

`export_checkpoint` writes one export id (step, workdir, digest of the params) into every file: the
hdf5 root attribute `elmo_jax_export_id` and that key of options.json (ignored by bilm-tf and
AllenNLP). Files of different ids are refused together; files without one are taken as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping, Sequence

import h5py
import numpy as np

EXPORT_ID = "elmo_jax_export_id"


class WeightFileError(ValueError):
    """A weight file (or params) that does not match the options."""


def checkpoint_export_id(workdir: str, step: int, params: Mapping) -> str:
    """The id of an export of checkpoint `step` of `workdir`, e.g. 'step 10 of /runs/demo (params 3f2a9c01b7d4)'."""
    return f"step {step} of {os.path.realpath(workdir)} (params {params_digest(params)})"


def params_digest(params: Mapping) -> str:
    """The first 12 hex digits of the sha256 of a nested dict of arrays (names and bytes)."""
    digest = hashlib.sha256()
    _hash_tree(digest, params)
    return digest.hexdigest()[:12]


def _hash_tree(digest: Any, node: Any) -> None:
    """Adds the names and bytes of every leaf of a nested dict, in sorted key order."""
    if isinstance(node, Mapping):
        for key in sorted(node):
            digest.update(str(key).encode())
            _hash_tree(digest, node[key])
    else:
        digest.update(np.ascontiguousarray(node).tobytes())


def open_hdf5(path: str, what: str) -> h5py.File:
    """The hdf5 file at `path` opened to read; WeightFileError naming it when missing or unreadable."""
    if not os.path.exists(path):
        raise WeightFileError(f"{path}: {what} file not found")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise WeightFileError(f"{path}: not a readable HDF5 file ({e})") from None


def write_hdf5(path: str, datasets: Mapping[str, np.ndarray], export_id: str | None = None) -> None:
    """An hdf5 file of `datasets` (name -> array), with the export id as a root attribute when given."""
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f.create_dataset(name, data=value)
        if export_id:
            f.attrs[EXPORT_ID] = export_id


def read_finite(f: h5py.File, name: str, path: str) -> np.ndarray:
    """Dataset `name` of the open hdf5 file `path` as float32; WeightFileError naming both unless
    every value is finite (nothing downstream would notice: it computes to NaN or wrong numbers)."""
    values = f[name][...].astype(np.float32, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        first = np.argwhere(~finite)[0]
        raise WeightFileError(
            f"{path}: dataset '{name}' holds non-finite values ({finite.size - np.count_nonzero(finite)} of "
            f"{finite.size}, the first {values[tuple(first)]} at {first.tolist()}): a damaged file, or one "
            "written from a run that diverged"
        )
    return values


def read_export_id(path: str) -> str | None:
    """The export id of an hdf5 or JSON file, None when it has none."""
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            value = f.attrs.get(EXPORT_ID)
        return value.decode() if isinstance(value, bytes) else value
    with open(path, encoding="utf-8") as f:
        content = json.load(f)
    return content.get(EXPORT_ID) if isinstance(content, dict) else None


def check_one_export(paths: Sequence[str]) -> None:
    """Raises a one-line WeightFileError naming the files unless all of `paths` that have an
    export id have the same one."""
    found = {path: value for path in paths if (value := read_export_id(path)) is not None}
    if len(set(found.values())) > 1:
        listed = ", ".join(f"{path} ({value})" for path, value in found.items())
        raise WeightFileError(f"files of different exports: {listed}; export them again together")
