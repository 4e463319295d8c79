"""TFDS source: exact content, per-epoch reshuffling, exact resumption, process striding, errors.

Each test prepares a small array_record dataset in tmp_path from in-memory text (no network).
"""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from elmo_jax.data import tfds_source
from elmo_jax.data.sources import DataError
from elmo_jax.data.tfds_source import TfdsSource
from tests.data.tfds_helpers import prepare_text_dataset, stored_texts

# Record i starts with the unique word s<i>; record 5 is blank and record 9 has invalid UTF-8.
TRAIN = [f"s{i}  w{i % 3}\tx{i % 5} " for i in range(23)]
TRAIN[5] = "  "
TRAIN[7] = "s7 naïve café"
TRAIN[9] = b"s9 bad \xff byte"
TEST = [f"t{i} y" for i in range(6)]
N_TEXT = 22  # Non-blank training records.


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tfds"))
    prepare_text_dataset(path, {"train": TRAIN, "test": TEST})
    return path


def _source(data_dir, **kwargs):
    return TfdsSource("tiny_text", kwargs.pop("split", "train"), data_dir, **kwargs)


def _ids(sentences):
    return [int(s[0][1:]) for s in sentences]


def _take(it, n):
    return list(itertools.islice(it, n))


def test_unshuffled_pass_is_the_stored_records_tokenized(data_dir):
    got = list(_source(data_dir, shuffle=False))
    expected = [t.split() for t in stored_texts(data_dir, "tiny_text", "train") if t.strip()]
    assert got == expected
    assert len(got) == N_TEXT
    # Same multiset as the text that was written, whitespace-split, blank record dropped.
    written = [(t.decode("utf-8", "replace") if isinstance(t, bytes) else t).split() for t in TRAIN]
    assert sorted(got) == sorted(w for w in written if w)
    assert ["s7", "naïve", "café"] in got
    assert ["s9", "bad", "\ufffd", "byte"] in got


def test_epochs_are_reshuffled_permutations_determined_by_seed(data_dir):
    out = _ids(_source(data_dir, seed=3, num_epochs=3))
    epochs = [out[i * N_TEXT:(i + 1) * N_TEXT] for i in range(3)]
    assert len(out) == 3 * N_TEXT
    for order in epochs:
        assert sorted(order) == sorted(i for i in range(23) if i != 5)
    assert len({tuple(e) for e in epochs}) == 3
    assert out == _ids(_source(data_dir, seed=3, num_epochs=3))
    assert out != _ids(_source(data_dir, seed=4, num_epochs=3))


@pytest.mark.parametrize("block", [4, 1024])
def test_resume_from_state_mid_epoch_is_exact(data_dir, monkeypatch, block):
    monkeypatch.setattr(tfds_source, "READ_BLOCK", block)
    reference = _ids(_source(data_dir, seed=1, num_epochs=4))
    for stop in (0, 13, N_TEXT + 6, 2 * N_TEXT):
        src = _source(data_dir, seed=1, num_epochs=4)
        head = _ids(_take(src, stop))
        state = json.loads(json.dumps(src.state_dict()))  # Checkpoints store it as JSON-like data.
        restored = _source(data_dir, seed=1, num_epochs=4)
        restored.load_state_dict(state)
        assert head + _ids(restored) == reference, stop


def test_state_and_epochs_count_records_blank_included(data_dir):
    blank = [t.strip() for t in stored_texts(data_dir, "tiny_text", "train")].index("")
    src = _source(data_dir, shuffle=False, num_epochs=None)
    _take(src, N_TEXT + 8)  # One epoch, then 8 sentences: 9 records if the blank one is among them.
    index = 8 + (blank < 8)
    assert src.state_dict() == {"epoch": 1, "index": index}
    assert src.epochs_at(src.state_dict()) == pytest.approx(1 + index / 23)


def test_endless_source_keeps_going(data_dir):
    assert len(_take(_source(data_dir, num_epochs=None), 5 * N_TEXT)) == 5 * N_TEXT


def test_processes_read_disjoint_strides_covering_the_split(data_dir):
    stored = stored_texts(data_dir, "tiny_text", "train")
    parts = [list(_source(data_dir, shuffle=False, process_index=i, process_count=3)) for i in range(3)]
    for i, part in enumerate(parts):
        assert part == [t.split() for t in stored[i::3] if t.strip()]
    ids = [set(_ids(p)) for p in parts]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert ids[0] | ids[1] | ids[2] == {i for i in range(23) if i != 5}
    # Shuffled, each process still reads only its own records.
    shuffled = _ids(_source(data_dir, seed=2, num_epochs=2, process_index=1, process_count=3))
    assert sorted(shuffled) == sorted(list(ids[1]) * 2)


def test_more_processes_than_records(data_dir):
    with pytest.raises(DataError, match=r"23 records, none for process 30 of 31"):
        _source(data_dir, process_index=30, process_count=31)


def test_sliced_split(data_dir):
    stored = stored_texts(data_dir, "tiny_text", "test")
    assert list(_source(data_dir, split="test[:50%]", shuffle=False)) == [t.split() for t in stored[:3]]


def test_every_record_blank_is_an_error(tmp_path):
    prepare_text_dataset(str(tmp_path), {"train": ["", " ", "\t"]}, name="blank_text")
    with pytest.raises(DataError, match=r"blank_text\[train\]: every record's text is blank"):
        next(TfdsSource("blank_text", "train", str(tmp_path), num_epochs=None))


def test_dataset_not_prepared_names_it_and_how_to_prepare(tmp_path):
    root = str(tmp_path / "empty")
    for name in ("no_such_text", "lm1b"):  # Unknown to TFDS; known but not prepared (never downloaded).
        with pytest.raises(DataError) as e:
            TfdsSource(name, "train", root)
        msg = str(e.value)
        assert f"TFDS dataset {name!r} is not prepared under {root}" in msg
        assert f"tfds build {name} --data_dir={root} --file_format=array_record" in msg
        assert "download_and_prepare()" in msg and "\n" not in msg
    assert not os.path.exists(root) or not os.listdir(root)


def test_missing_feature_names_the_available_ones(data_dir):
    with pytest.raises(DataError, match=r"no feature 'sentence' \(data.tfds_feature\); its features: text"):
        TfdsSource("tiny_text", "train", data_dir, feature="sentence")


def test_missing_split_names_the_available_ones(data_dir):
    with pytest.raises(DataError, match=r"'tiny_text', split 'valid'.*its splits: train, test"):
        TfdsSource("tiny_text", "valid", data_dir)


def test_non_text_feature_is_an_error(tmp_path):
    import tensorflow_datasets as tfds

    class NumberBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version("1.0.0")
        name = "number_data"

        def _info(self):
            features = tfds.features.FeaturesDict({"text": tfds.features.Scalar(dtype=np.int64)})
            return tfds.core.DatasetInfo(builder=self, features=features)

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            yield 0, {"text": 7}

    NumberBuilder(data_dir=str(tmp_path), file_format="array_record").download_and_prepare()
    with pytest.raises(DataError, match=r"feature 'text' of TFDS dataset 'number_data' is Scalar of shape \(\)"):
        TfdsSource("number_data", "train", str(tmp_path))


def test_tfrecord_dataset_is_an_error_saying_how_to_rebuild(tmp_path):
    # Preparing in TFRecord needs TensorFlow; the dataset_info of such a preparation differs only
    # in its file format, which is all this check reads.
    root = str(tmp_path)
    prepare_text_dataset(root, {"train": TRAIN}, name="record_text")
    info_path = os.path.join(root, "record_text", "1.0.0", "dataset_info.json")
    info = json.load(open(info_path))
    info["fileFormat"] = "tfrecord"
    json.dump(info, open(info_path, "w"))
    with pytest.raises(DataError, match=r"holds tfrecord files.*--file_format=array_record"):
        TfdsSource("record_text", "train", root)


def test_importing_the_data_package_does_not_import_tfds():
    code = "import sys, elmo_jax.data.corpus; assert 'tensorflow_datasets' not in sys.modules"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
