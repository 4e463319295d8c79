"""PyTorch state dicts (`torch.save(module.state_dict(), path)`) read without PyTorch, and safely.

ELMoForManyLangs (HIT-SCIR) releases its biLMs as `token_embedder.pkl` and `encoder.pkl`, state dicts
that PyTorch 0.3/0.4 wrote in the legacy format; saved again by PyTorch >= 1.6 they are zip archives.
`read_state_dict` reads both into `{name: np.ndarray}` (each array of the tensor's shape and dtype,
C-contiguous, native byte order) without importing PyTorch, so elmo-jax needs no PyTorch to convert them.

It is safer than `torch.load`: a pickle may name any global, and unpickling calls it (`os.system` ...).
Here `find_class` answers only what a state dict needs (OrderedDict, the tensor and parameter rebuild
functions, the storage classes, dtypes), each by a stand-in of this module: torch's own functions never
run, and any other global is refused with a one-line ValueError before anything is called.

The two formats (torch/serialization.py: `_legacy_save`, `_legacy_load`, `_save`, `_load`):
- zip: `<archive>/data.pkl`, the pickle, whose persistent ids `('storage', torch.FloatStorage, key,
  location, numel)` name the records `<archive>/data/<key>` (raw bytes, in the order of
  `<archive>/byteorder`, little endian without it);
- legacy: pickles one after the other: the magic number 0x1950a86a20f9469cfc6c, the protocol version
  1001, a sys_info dict, the object (persistent ids `('storage', type, key, location, numel,
  view_metadata)`; PyTorch 0.3 could save a view `(view_key, offset, numel)` of a storage), the sorted list
  of storage keys; then each storage in that order: its element count (int64, little endian) and its raw
  bytes (little endian, as torch reads them).

Tensors are `torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, ...)` (0.4 on;
0.3's `_rebuild_tensor` takes the first four), offsets and strides in elements: each is rebuilt with
`as_strided` over its storage and copied, so a non-contiguous tensor (a transposed weight saved as is)
and tensors sharing a storage come out right. A bfloat16 tensor comes out float32 (exactly: NumPy has no
bfloat16). Any failure to parse the file is one ValueError naming it.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001

# torch's storage classes -> their elements' NumPy dtype (bfloat16 read as its uint16 bits).
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8",  # bytes: what current torch pickles for a storage saved without a dtype
}
# torch's dtype globals (`torch.float32`) -> NumPy's names.
_TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool", "complex64": "complex64", "complex128": "complex128",
}
_REFUSED = "(only tensors and OrderedDicts are read)"


class TorchPickleError(ValueError):
    """A file that is not a readable state dict: one line, naming the file."""


@dataclass(frozen=True, slots=True)
class _StorageType:
    """A storage class of the pickle (`torch.FloatStorage`): what dtype its elements have."""

    name: str
    dtype: str  # a NumPy name, or "bfloat16"

    @property
    def stored(self) -> np.dtype:
        """The dtype of the elements as the file holds them (little endian)."""
        return np.dtype("<u2" if self.dtype == "bfloat16" else self.dtype).newbyteorder("<")


@dataclass(frozen=True, slots=True)
class _TorchDtype:
    """A dtype global of the pickle (`torch.float32`); read, never used to build anything."""

    name: str


@dataclass(frozen=True, slots=True)
class _StorageRef:
    """A persistent id's storage: `numel` elements from `offset` of the root storage `root` (a view in 0.3)."""

    root: str
    kind: _StorageType
    offset: int
    numel: int


@dataclass(frozen=True, slots=True)
class _TensorRef:
    """A tensor as the pickle rebuilds it: `size` elements of `storage`, `stride` apart, from `offset`."""

    storage: Any
    offset: Any
    size: Any
    stride: Any


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any) -> _TensorRef:
    """Stands in for `torch._utils._rebuild_tensor` (0.3) and the start of `_rebuild_tensor_v2`."""
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> _TensorRef:
    """Stands in for `torch._utils._rebuild_tensor_v2`: gradients, hooks and metadata are dropped."""
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None, state: Any = None) -> Any:
    """Stands in for `torch._utils._rebuild_parameter(_with_state)`: an nn.Parameter is its tensor."""
    return data


def _allowed_global(module: str, name: str) -> Any:
    """The stand-in for the global `module.name` of a state dict's pickle, None for any other global."""
    if (module, name) == ("collections", "OrderedDict"):
        return collections.OrderedDict
    if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
        return _rebuild_tensor if name == "_rebuild_tensor" else _rebuild_tensor_v2
    if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
        return _rebuild_parameter
    if module in ("torch", "torch.storage") and name in _STORAGE_DTYPES:
        return _StorageType(name, _STORAGE_DTYPES[name])
    if module == "torch" and name in _TORCH_DTYPES:
        return _TorchDtype(_TORCH_DTYPES[name])
    return None


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles with nothing but `_allowed_global`'s stand-ins; notes each root storage (kind, numel)."""

    def __init__(self, file: BinaryIO, where: str, roots: dict[str, tuple[_StorageType, int]]) -> None:
        super().__init__(file, encoding="utf-8")
        self.where, self.roots = where, roots

    def find_class(self, module: str, name: str) -> Any:
        found = _allowed_global(module, name)
        if found is None:
            raise TorchPickleError(f"{self.where}: refuses the pickle global {module}.{name} {_REFUSED}")
        return found

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage":
            raise TorchPickleError(f"{self.where}: refuses the persistent id {_short(pid)} (not a storage)")
        _, kind, key, _location, numel, *view = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not _is_count(numel):
            raise TorchPickleError(f"{self.where}: a malformed storage id {_short(pid)}")
        if self.roots.setdefault(key, (kind, numel)) != (kind, numel):
            raise TorchPickleError(f"{self.where}: storage {key} is named with two types or sizes")
        if view and view[0] is not None:  # PyTorch 0.3: (view_key, offset, numel) of the root storage
            _view_key, offset, view_numel = view[0]
            if not (_is_count(offset) and _is_count(view_numel) and offset + view_numel <= numel):
                raise TorchPickleError(f"{self.where}: storage view {_short(view[0])} outside storage {key}")
            return _StorageRef(key, kind, offset, view_numel)
        return _StorageRef(key, kind, 0, numel)


def read_state_dict(path: str) -> dict[str, np.ndarray]:
    """`{name: array}` of a file of `torch.save(state_dict)`: zip (PyTorch >= 1.6) or legacy (0.3 on).

    Arrays have the tensors' shapes (`[]` for a 0-d tensor, zero-sized ones too) and dtypes (float32,
    float64, float16, int64 ..., bool; bfloat16 as float32), in the dict's order. Raises a one-line
    ValueError (TorchPickleError) naming `path` for a pickle global other than a state dict's, a top level
    that is not a dict of names -> tensors, and a truncated or corrupt file; OSError if it can't be opened.
    """
    with open(path, "rb") as f:
        try:
            is_zip = f.read(4) == b"PK\x03\x04"
            f.seek(0)
            obj, arrays = (_read_zip if is_zip else _read_legacy)(f, path)
            return _state_dict(obj, arrays, path)
        except TorchPickleError:
            raise
        except Exception as e:  # anything else the bytes made go wrong: a truncated or corrupt file
            reason = " ".join(f"{type(e).__name__}: {e}".split())
            raise TorchPickleError(f"{path}: not a readable PyTorch state dict, truncated or corrupt ({reason})") from e


def _read_zip(f: BinaryIO, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    """The unpickled object of a zip file, and its root storages' flat arrays by key."""
    with zipfile.ZipFile(f) as archive:
        names = set(archive.namelist())
        pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise TorchPickleError(f"{where}: a zip archive without one <archive>/data.pkl (not of torch.save)")
        prefix = pickles[0].removesuffix("data.pkl")
        order = archive.read(prefix + "byteorder").decode() if prefix + "byteorder" in names else "little"
        if order not in ("little", "big"):
            raise TorchPickleError(f"{where}: unknown byteorder {order!r}")
        roots: dict[str, tuple[_StorageType, int]] = {}
        obj = _StateDictUnpickler(io.BytesIO(archive.read(pickles[0])), where, roots).load()
        arrays = {}
        for key, (kind, numel) in roots.items():
            name = f"{prefix}data/{key}"
            if name not in names or archive.getinfo(name).file_size != numel * kind.stored.itemsize:
                raise TorchPickleError(f"{where}: storage {key} is missing or not of {numel} elements")
            arrays[key] = _decode(archive.read(name), kind, order)
    return obj, arrays


def _read_legacy(f: BinaryIO, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    """The unpickled object of a legacy file, and its root storages' flat arrays by key."""
    roots: dict[str, tuple[_StorageType, int]] = {}
    load = lambda: _StateDictUnpickler(f, where, roots).load()
    if load() != MAGIC_NUMBER:
        raise TorchPickleError(f"{where}: neither a zip archive nor a legacy PyTorch file (no magic number)")
    if (version := load()) != PROTOCOL_VERSION:
        raise TorchPickleError(f"{where}: legacy protocol version {_short(version)}, not {PROTOCOL_VERSION}")
    load()  # sys_info: the writer's byte order and C type sizes; storages are little endian as torch reads them
    obj, keys = load(), load()
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or sorted(keys) != sorted(roots):
        raise TorchPickleError(f"{where}: the list of storages does not match the storages of the pickle")
    size, arrays = os.fstat(f.fileno()).st_size, {}
    for key in keys:
        kind, numel = roots[key]
        (count,) = struct.unpack("<q", _read_exactly(f, 8, size, where))
        if count != numel:
            raise TorchPickleError(f"{where}: storage {key} holds {count} elements, its tensors say {numel}")
        arrays[key] = _decode(_read_exactly(f, count * kind.stored.itemsize, size, where), kind, "little")
    return obj, arrays


def _read_exactly(f: BinaryIO, n: int, size: int, where: str) -> bytes:
    """The next `n` bytes of `f` (of `size` bytes), or a TorchPickleError saying it is truncated."""
    if f.tell() + n > size:
        raise TorchPickleError(f"{where}: truncated (a storage runs past the end of the file)")
    return f.read(n)


def _decode(data: bytes, kind: _StorageType, order: str) -> np.ndarray:
    """A storage's raw bytes (`order` endian) as a flat array in native byte order."""
    if kind.dtype == "bool":
        return np.frombuffer(data, np.uint8) != 0
    stored = kind.stored.newbyteorder("<" if order == "little" else ">")
    return np.frombuffer(data, stored).astype(kind.stored.newbyteorder("="), copy=False)  # a view if native


def _state_dict(obj: Any, arrays: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """The unpickled top level as `{name: array}`, refused unless a dict of str -> tensor."""
    if not isinstance(obj, dict):
        raise TorchPickleError(f"{where}: holds a {type(obj).__name__}, not a state dict (a dict of names -> tensors)")
    out = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TorchPickleError(f"{where}: the key {_short(key)} is a {type(key).__name__}, not a name")
        if not isinstance(value, _TensorRef):
            raise TorchPickleError(f"{where}: {_short(key)} maps to a {type(value).__name__}, not a tensor {_REFUSED}")
        out[key] = _tensor(value, arrays, f"{where}: tensor {key!r}")
    return out


def _tensor(t: _TensorRef, arrays: dict[str, np.ndarray], where: str) -> np.ndarray:
    """A tensor's array: `as_strided` over its storage, bounds checked, copied (C-contiguous)."""
    ref, offset, size, stride = t.storage, t.offset, t.size, t.stride
    if not isinstance(ref, _StorageRef) or not _is_count(offset) or not _is_counts(size) or not _is_counts(stride):
        raise TorchPickleError(f"{where} is malformed (storage, offset, size, stride)")
    if len(size) != len(stride):
        raise TorchPickleError(f"{where} has {len(size)} sizes but {len(stride)} strides")
    flat = arrays[ref.root][ref.offset:ref.offset + ref.numel]
    if 0 in size:
        array = np.zeros(size, flat.dtype)
    else:
        if offset + sum((n - 1) * s for n, s in zip(size, stride)) >= len(flat):
            raise TorchPickleError(f"{where} reaches past the {len(flat)} elements of its storage")
        strides = tuple(s * flat.itemsize for s in stride)
        array = np.array(np.lib.stride_tricks.as_strided(flat[offset:], size, strides), order="C", copy=True)
    return (array.astype(np.uint32) << 16).view(np.float32) if ref.kind.dtype == "bfloat16" else array


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_counts(x: Any) -> bool:
    return isinstance(x, tuple) and all(_is_count(n) for n in x)


def _short(x: Any, limit: int = 80) -> str:
    """`repr(x)` on one line, cut to `limit` characters (for errors on untrusted values)."""
    text = " ".join(repr(x).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."

