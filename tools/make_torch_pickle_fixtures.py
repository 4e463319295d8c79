"""Writes tests/interop/torch_pickles/: small `torch.save` files and what they hold, for
tests/interop/test_torch_pickle.py (which reads them with elmo_jax/interop/torch_pickle.py, without PyTorch).

Runs under a PyTorch of its own, outside the project's venv (the project does not depend on PyTorch):

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch numpy
    /tmp/torchvenv/bin/python tools/make_torch_pickle_fixtures.py

Last run with torch 2.14.1+cu130 (CPU), NumPy 2.4.6, Python 3.11.7: versions.json beside the files
records the versions of the run that wrote them. The files (under 20 KB together):

- state_dict.npz: the arrays expected of state_dict_{legacy.pkl,zip.pt} (bfloat16 as float32), written by NumPy;
- state_dict_legacy.pkl: `torch.save(sd, _use_new_zipfile_serialization=False)`, PyTorch 0.4's format, the one
  ELMoForManyLangs' token_embedder.pkl and encoder.pkl are in; state_dict_zip.pt: `torch.save(sd)` (zip);
  `sd` is an nn.Linear's state dict (with its `_metadata`) and float32 tensors (a transposed view saved as is,
  a slice at an offset of the same storage, 0-d, empty), float64, float16, bfloat16, int64, int32, int8,
  uint8, bool ones and an nn.Parameter;
- legacy_v03.pkl + legacy_v03.npz: PyTorch 0.3's way, written here by hand: `torch._utils._rebuild_tensor`
  (4 arguments) and storage views `(view_key, offset, numel)` in the persistent ids;
- zip_big_endian.pt: the float32 tensors of `sd`, byteorder 'big' and its storages byte-swapped;
  zip_no_byteorder.pt: `float32.base` saved without a byteorder record (read as little endian);
- malicious_legacy.pkl (legacy, its object `os.system("touch torch_pickle_payload_ran")`) and malicious_zip.pt
  (zip, `{'weight': builtins.eval("open('torch_pickle_payload_ran', 'w')")}`), written with pickle opcodes:
  never executed here, refused by the reader;
- not_a_dict.pt: `torch.save([tensor])`, a list at the top level.

Each file torch can read is checked here against what it should hold (`torch.load`).
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import platform
import struct
import sys
import zipfile

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "interop", "torch_pickles")
MAGIC_NUMBER, PROTOCOL_VERSION = 0x1950A86A20F9469CFC6C, 1001
PAYLOAD_FILE = "torch_pickle_payload_ran"


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """What the reader should give for `t` (NumPy has no bfloat16: float32)."""
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def state_dict() -> collections.OrderedDict:
    torch.manual_seed(0)
    sd = torch.nn.Linear(3, 2).state_dict()  # an OrderedDict with `_metadata`, as modules save them
    base = torch.randn(4, 3)
    sd["float32.base"] = base
    sd["float32.transposed"] = base.t()  # stride (1, 3): non-contiguous, shares base's storage
    sd["float32.offset"] = base.view(-1)[5:9]  # storage offset 5 of the same storage
    sd["float32.scalar"] = torch.tensor(3.25)
    sd["float32.empty"] = torch.zeros(0, 3)
    sd["float64"] = torch.linspace(-1, 1, 5, dtype=torch.float64) / 3
    sd["float16"] = torch.tensor([1.5, -2.25, 65504.0, 1e-7], dtype=torch.float16)
    sd["bfloat16"] = torch.tensor([1.0, -3.140625, 2.0**100], dtype=torch.bfloat16)
    sd["int64"] = torch.tensor([[0, -(2**40)], [2**62, 7]], dtype=torch.int64)
    sd["int32"] = torch.tensor([-(2**31), 2**31 - 1], dtype=torch.int32)
    sd["int8"] = torch.tensor([-128, 127], dtype=torch.int8)
    sd["uint8"] = torch.tensor([0, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True])
    sd["num_batches_tracked"] = torch.tensor(12, dtype=torch.int64)
    sd["parameter"] = torch.nn.Parameter(torch.randn(2, 2))
    return sd


def check(path: str, expected: dict[str, np.ndarray]) -> None:
    """torch itself reads `path` as `expected`: the same names, dtypes and values."""
    loaded = torch.load(path, weights_only=False)
    assert list(loaded) == list(expected), path
    for name, want in expected.items():
        got = as_numpy(loaded[name])
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), (path, name)


def write_state_dicts(sd: collections.OrderedDict) -> dict[str, np.ndarray]:
    expected = {name: as_numpy(t) for name, t in sd.items()}
    np.savez_compressed(os.path.join(OUT, "state_dict.npz"), **expected)
    for name, zip_format in (("state_dict_legacy.pkl", False), ("state_dict_zip.pt", True)):
        path = os.path.join(OUT, name)
        torch.save(sd, path, _use_new_zipfile_serialization=zip_format)
        check(path, expected)
    return expected


def write_byteorders(sd: collections.OrderedDict, expected: dict[str, np.ndarray]) -> None:
    """The float32 tensors of `sd` in a big endian zip file, and in one without a byteorder record."""
    floats = collections.OrderedDict((k, t) for k, t in sd.items() if t.dtype == torch.float32)
    want = {k: expected[k] for k in floats}
    path = os.path.join(OUT, "zip_no_byteorder.pt")
    torch.save({"float32.base": floats["float32.base"]}, path, _disable_byteorder_record=True)
    check(path, {"float32.base": want["float32.base"]})
    buffer = io.BytesIO()
    torch.save(floats, buffer)
    path = os.path.join(OUT, "zip_big_endian.pt")
    with zipfile.ZipFile(buffer) as little, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as big:
        for info in little.infolist():
            data = little.read(info)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename:  # every storage here is float32
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            big.writestr(info.filename, data)
    check(path, want)


class V03Storage:
    """A storage of the 0.3-style file: `view` is None or (view_key, offset, numel) of the root storage."""

    def __init__(self, storage_type: type, root_key: str, root: np.ndarray, view: tuple | None = None) -> None:
        self.storage_type, self.root_key, self.root, self.view = storage_type, root_key, root, view


class V03Tensor:
    def __init__(self, storage: V03Storage, offset: int, size: tuple, stride: tuple) -> None:
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class V03Pickler(pickle.Pickler):
    """Pickles as PyTorch 0.3's `_save` did: tensors by `_rebuild_tensor`, storages (and views) by id."""

    def persistent_id(self, obj: object) -> tuple | None:
        if isinstance(obj, V03Storage):
            return ("storage", obj.storage_type, obj.root_key, "cpu", obj.root.size, obj.view)
        return None

    def reducer_override(self, obj: object) -> object:
        if isinstance(obj, V03Tensor):
            return torch._utils._rebuild_tensor, (obj.storage, obj.offset, obj.size, obj.stride)
        return NotImplemented


def legacy_header() -> bytes:
    sys_info = dict(protocol_version=PROTOCOL_VERSION, little_endian=True, type_sizes=dict(short=2, int=4, long=8))
    return b"".join(pickle.dumps(x, protocol=2) for x in (MAGIC_NUMBER, PROTOCOL_VERSION, sys_info))


def write_v03() -> None:
    floats = np.arange(10, dtype="<f4") * 0.5 + 1
    longs = np.array([1, -2, 3, -(2**50), 5, 6], "<i8")
    whole = V03Storage(torch.FloatStorage, "140001", floats)
    view = V03Storage(torch.FloatStorage, "140001", floats, ("140002", 2, 6))
    long_storage = V03Storage(torch.LongStorage, "140003", longs)
    obj = collections.OrderedDict([
        ("view.matrix", V03Tensor(view, 0, (2, 3), (3, 1))),
        ("view.column", V03Tensor(view, 1, (2,), (3,))),
        ("whole", V03Tensor(whole, 0, (10,), (1,))),
        ("long.transposed", V03Tensor(long_storage, 0, (3, 2), (1, 3))),
    ])
    expected = {
        "view.matrix": floats[2:8].reshape(2, 3), "view.column": floats[[3, 6]], "whole": floats,
        "long.transposed": longs.reshape(2, 3).T,
    }
    main = io.BytesIO()
    V03Pickler(main, protocol=2).dump(obj)
    storages = [("140001", floats), ("140003", longs)]  # sorted keys, as _save wrote them
    path = os.path.join(OUT, "legacy_v03.pkl")
    with open(path, "wb") as f:
        f.write(legacy_header() + main.getvalue() + pickle.dumps([k for k, _ in storages], protocol=2))
        for _, data in storages:
            f.write(struct.pack("<q", data.size) + data.tobytes())
    check(path, expected)
    np.savez_compressed(os.path.join(OUT, "legacy_v03.npz"), **expected)


def unicode(text: str) -> bytes:
    """Pickle's BINUNICODE of `text`."""
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def write_malicious() -> None:
    """Pickles that would run code (never run here): GLOBAL, an argument tuple, REDUCE."""
    system = b"\x80\x02cos\nsystem\n" + unicode(f"touch {PAYLOAD_FILE}") + b"\x85R."
    with open(os.path.join(OUT, "malicious_legacy.pkl"), "wb") as f:
        f.write(legacy_header() + system + pickle.dumps([], protocol=2))
    call = unicode(f"open({PAYLOAD_FILE!r}, 'w')")
    evaluate = b"\x80\x02}" + unicode("weight") + b"cbuiltins\neval\n" + call + b"\x85Rs."
    with zipfile.ZipFile(os.path.join(OUT, "malicious_zip.pt"), "w") as f:
        f.writestr("malicious_zip/data.pkl", evaluate)
        f.writestr("malicious_zip/byteorder", "little")
        f.writestr("malicious_zip/version", "3\n")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    sd = state_dict()
    expected = write_state_dicts(sd)
    write_byteorders(sd, expected)
    write_v03()
    write_malicious()
    torch.save([torch.arange(3)], os.path.join(OUT, "not_a_dict.pt"))
    versions = {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()}
    with open(os.path.join(OUT, "versions.json"), "w") as f:
        json.dump(versions, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, to {OUT}, torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
