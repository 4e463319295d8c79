"""PyTorch state dicts read without PyTorch (ELMoForManyLangs' token_embedder.pkl, encoder.pkl): the legacy
and zip formats read exactly, malicious, truncated and corrupt files refused with one line naming them.

The files of torch_pickles/ were written by tools/make_torch_pickle_fixtures.py under PyTorch (versions.json);
these tests need none.
"""

from __future__ import annotations

import ast
import os
import struct
import sys
import zipfile

import numpy as np
import pytest

from elmo_jax.interop import torch_pickle
from elmo_jax.interop.torch_pickle import read_state_dict

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_pickles")
PAYLOAD_FILE = "torch_pickle_payload_ran"  # what the malicious fixtures' pickles would create


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def expected(npz: str) -> dict[str, np.ndarray]:
    with np.load(fixture(npz)) as f:
        return {name: f[name] for name in f.files}


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert list(got) == list(want)
    for name, array in want.items():
        assert isinstance(got[name], np.ndarray), name
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tobytes() == np.ascontiguousarray(array).tobytes(), name
        assert got[name].flags.c_contiguous and got[name].dtype.isnative, name


def one_line_error(path: str, match: str) -> str:
    with pytest.raises(ValueError, match=match) as raised:
        read_state_dict(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


@pytest.mark.parametrize("name", ["state_dict_legacy.pkl", "state_dict_zip.pt"])
def test_both_formats_read_exactly_as_torch_saved_them(name):
    assert_same(read_state_dict(fixture(name)), expected("state_dict.npz"))


def test_views_scalars_empty_tensors_and_bfloat16_come_out_as_tensors_do():
    sd = read_state_dict(fixture("state_dict_legacy.pkl"))
    base = sd["float32.base"]
    assert np.array_equal(sd["float32.transposed"], base.T)  # saved as a stride (1, 3) view of base's storage
    assert np.array_equal(sd["float32.offset"], base.ravel()[5:9])  # the same storage, from element 5
    assert sd["float32.scalar"].shape == () and sd["float32.scalar"] == np.float32(3.25)
    assert sd["float32.empty"].shape == (0, 3) and sd["float32.empty"].dtype == np.float32
    assert sd["bfloat16"].dtype == np.float32 and sd["bfloat16"].tolist() == [1.0, -3.140625, 2.0**100]
    assert sd["parameter"].shape == (2, 2) and sd["bool"].dtype == np.bool_
    sd["float32.transposed"][0, 0] = 99  # copies: no array shares memory with another
    assert base[0, 0] != 99


def test_pytorch_0_3_files_rebuild_tensor_and_storage_views():
    """PyTorch 0.3 pickled `_rebuild_tensor(storage, offset, size, stride)`, and views of a storage."""
    assert_same(read_state_dict(fixture("legacy_v03.pkl")), expected("legacy_v03.npz"))


@pytest.mark.parametrize("name", ["zip_big_endian.pt", "zip_no_byteorder.pt"])
def test_the_byteorder_record_is_respected_little_endian_without_it(name):
    got = read_state_dict(fixture(name))
    assert_same(got, {k: v for k, v in expected("state_dict.npz").items() if k in got})
    assert "float32.base" in got


@pytest.mark.parametrize("name, global_name", [
    ("malicious_legacy.pkl", "os.system"), ("malicious_zip.pt", "builtins.eval"),
])
def test_a_pickle_naming_another_global_is_refused_before_it_runs(name, global_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the payload would create its file
    monkeypatch.setattr(os, "system", lambda *args: pytest.fail(f"os.system ran: {args}"))
    message = one_line_error(fixture(name), "refuses the pickle global")
    assert message == f"{fixture(name)}: refuses the pickle global {global_name} (only tensors and OrderedDicts are read)"
    assert not (tmp_path / PAYLOAD_FILE).exists()


def test_a_top_level_other_than_a_dict_of_tensors_is_refused(tmp_path):
    one_line_error(fixture("not_a_dict.pt"), r"holds a list, not a state dict")
    path = str(tmp_path / "ints.pt")
    write_zip(path, b"\x80\x02}X\x01\x00\x00\x00aK\x01s.")  # {'a': 1}
    one_line_error(path, r"'a' maps to a int, not a tensor \(only tensors and OrderedDicts are read\)")


@pytest.mark.parametrize("name", ["state_dict_legacy.pkl", "state_dict_zip.pt", "legacy_v03.pkl"])
def test_a_truncated_file_is_one_error_naming_it(name, tmp_path):
    with open(fixture(name), "rb") as f:
        data = f.read()
    path = str(tmp_path / name)
    for length in [*range(0, len(data), 11), len(data) - 1]:
        with open(path, "wb") as f:
            f.write(data[:length])
        one_line_error(path, "truncated")


def test_corrupt_files_are_one_error_naming_them(tmp_path):
    with open(fixture("state_dict_zip.pt"), "rb") as f:
        data = bytearray(f.read())
    with zipfile.ZipFile(fixture("state_dict_zip.pt")) as archive:
        start = next(info for info in archive.infolist() if "/data/" in info.filename).header_offset
    name_length, extra_length = struct.unpack("<HH", data[start + 26:start + 30])  # of the local header
    data[start + 30 + name_length + extra_length] ^= 0xFF  # the first byte of a storage
    path = str(tmp_path / "flipped.pt")
    with open(path, "wb") as f:
        f.write(data)
    one_line_error(path, r"corrupt \(BadZipFile: Bad CRC-32")
    with open(path, "wb") as f:
        f.write(np.random.default_rng(0).bytes(300))
    one_line_error(path, "corrupt")


def tensor_pickle(numel: int, offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> bytes:
    """`{'w': _rebuild_tensor_v2(FloatStorage '0' of numel elements, offset, size, stride, False, None)}`."""
    ints = lambda values: b"(" + b"".join(b"J" + struct.pack("<i", v) for v in values) + b"t"
    storage = b"((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
    return (b"\x80\x02}X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n" + storage + ints([numel])[1:]
            + b"Q" + ints([offset])[1:-1] + ints(size) + ints(stride) + b"\x89Nt" + b"Rs.")


def write_zip(path: str, pickle_bytes: bytes, storages: dict[str, bytes] | None = None) -> None:
    with zipfile.ZipFile(path, "w") as f:
        f.writestr("archive/data.pkl", pickle_bytes)
        for key, data in (storages or {}).items():
            f.writestr(f"archive/data/{key}", data)


def test_a_tensor_reaching_past_its_storage_is_refused(tmp_path):
    """as_strided reads any memory it is told to: sizes and strides are checked against the storage first."""
    data = np.arange(4, dtype="<f4").tobytes()
    path = str(tmp_path / "strided.pt")
    write_zip(path, tensor_pickle(4, 1, (2,), (2,)), {"0": data})
    assert read_state_dict(path)["w"].tolist() == [1.0, 3.0]
    write_zip(path, tensor_pickle(4, 0, (3,), (2,)), {"0": data})
    one_line_error(path, r"tensor 'w' reaches past the 4 elements of its storage")
    write_zip(path, tensor_pickle(5, 0, (2,), (1,)), {"0": data})
    one_line_error(path, r"storage 0 is missing or not of 5 elements")


def test_the_module_imports_only_the_standard_library_and_numpy():
    with open(torch_pickle.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported - set(sys.stdlib_module_names) == {"numpy"}
