"""Sentences from a TensorFlow Datasets (TFDS) text dataset prepared as array_record, read by
random access (docs/training.md): one record's text feature is one sentence, blank ones skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from elmo_jax.data.sources import DataError, InMemorySource

# Records fetched per read: array_record serves a batch of keys >10x faster than key by key.
READ_BLOCK = 1024


def prepare_command(name: str, data_dir: str) -> str:
    """The shell command that prepares `name` under `data_dir` in the format read here."""
    return f"tfds build {name} --data_dir={data_dir} --file_format=array_record"


def open_split(name: str, split: str, data_dir: str = "", feature: str = "text") -> Any:
    """The records of one split (it may be sliced: 'train[:99%]') as a random-access sequence of
    feature dicts; `data_dir` '' is TFDS's default. DataError, with the command that prepares it,
    when the dataset is not prepared there, is not array_record, or lacks the split or feature.
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise DataError("data.source='tfds' needs tensorflow-datasets: pip install tensorflow-datasets") from e
    root = data_dir or str(tfds.core.constants.get_default_data_dir())
    try:
        builder = tfds.builder(name, data_dir=root)
    except tfds.core.registered.DatasetNotFoundError:
        builder = None
    if builder is None or not builder.is_prepared():
        raise DataError(
            f"TFDS dataset {name!r} is not prepared under {root}: on a machine with internet and "
            f"TensorFlow run `{prepare_command(name, root)}` (or in Python: tfds.builder({name!r}, "
            f"data_dir={root!r}, file_format='array_record').download_and_prepare()), then copy {root} here"
        )
    info = builder.info
    if info.file_format not in tfds.core.file_adapters.FileFormat.with_random_access():
        raise DataError(
            f"{builder.data_dir} holds {info.file_format.value} files, which cannot be read by random "
            f"access: prepare it again with `{prepare_command(name, root)}`"
        )
    if feature not in info.features:
        raise DataError(
            f"TFDS dataset {name!r} has no feature {feature!r} (data.tfds_feature); "
            f"its features: {', '.join(info.features)}"
        )
    spec = info.features[feature]
    if spec.shape != () or np.dtype(spec.np_dtype) != np.dtype(object):  # TFDS stores text as object bytes.
        raise DataError(
            f"feature {feature!r} of TFDS dataset {name!r} is {type(spec).__name__} of shape {spec.shape}, "
            "not one text string per record"
        )
    try:
        return builder.as_data_source(split=split)
    except ValueError as e:  # An unknown split or a malformed slice.
        raise DataError(f"TFDS dataset {name!r}, split {split!r}: {e} (its splits: {', '.join(info.splits)})") from None


class TfdsSentences(Sequence):
    """This process's records of a split (records i::n), as whitespace-tokenized sentences."""

    def __init__(self, records: Any, feature: str, process_index: int = 0, process_count: int = 1):
        self._records = records
        self._feature = feature
        self._keys = range(process_index, len(records), process_count)

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i: int) -> list[str]:
        return self.read([i])[0]

    def read(self, indices: Sequence[int]) -> list[list[str]]:
        """The sentences at `indices`, fetched in one batched read."""
        keys = [self._keys[int(i)] for i in indices]
        records = self._records.__getitems__(keys)
        return [record[self._feature].decode("utf-8", errors="replace").split() for record in records]


class TfdsSource(InMemorySource):
    """A TFDS split as a sentence source: an InMemorySource over this process's records, read
    `READ_BLOCK` at a time."""

    def __init__(
        self,
        name: str,
        split: str,
        data_dir: str = "",
        feature: str = "text",
        shuffle: bool = True,
        seed: int = 0,
        num_epochs: int | None = 1,
        process_index: int = 0,
        process_count: int = 1,
    ):
        records = open_split(name, split, data_dir, feature)
        self.where = f"TFDS {name}[{split}]"
        sentences = TfdsSentences(records, feature, process_index, process_count)
        if not len(sentences):
            raise DataError(
                f"{self.where} has {len(records)} records, none for process {process_index} of {process_count}"
            )
        super().__init__(sentences, shuffle=shuffle, seed=seed, num_epochs=num_epochs)
        self._block_key = (-1, -1)  # (epoch, block number) of the sentences in self._block.
        self._block: list[list[str]] = []

    def __next__(self) -> list[str]:
        # Any 2n consecutive positions hold a whole epoch: that many blanks means all are blank.
        for _ in range(2 * len(self.sentences)):
            words = super().__next__()
            if words:
                return words
        raise DataError(f"{self.where}: every record's text is blank")

    def _sentence_at(self, position: int) -> list[str]:
        block, offset = divmod(position, READ_BLOCK)
        if self._block_key != (self.epoch, block):
            start = block * READ_BLOCK
            self._block = self.sentences.read(self._order[start:start + READ_BLOCK])
            self._block_key = (self.epoch, block)
        return self._block[offset]
