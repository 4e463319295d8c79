"""Writes small TFDS text datasets (array_record) into a test directory, offline."""

from __future__ import annotations

import tensorflow_datasets as tfds


def prepare_text_dataset(data_dir: str, splits: dict[str, list], name: str = "tiny_text", feature: str = "text") -> str:
    """Prepares dataset `name` under `data_dir`: one record per item of each split (str or bytes).

    TFDS stores records in an order set by a hash of their keys; `stored_texts` reads it back.
    Returns `name`.
    """

    class TextBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            features = tfds.features.FeaturesDict({feature: tfds.features.Text()})
            return tfds.core.DatasetInfo(builder=self, features=features)

        def _split_generators(self, dl_manager):
            return {split: self._generate_examples(texts) for split, texts in splits.items()}

        def _generate_examples(self, texts):
            for i, text in enumerate(texts):
                yield i, {feature: text}

    TextBuilder.name = name
    builder = TextBuilder(data_dir=data_dir, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return name


def stored_texts(data_dir: str, name: str, split: str, feature: str = "text") -> list[str]:
    """The records of a split in stored order, decoded (the order a source reads unshuffled)."""
    records = tfds.builder(name, data_dir=data_dir).as_data_source(split=split)
    return [records[i][feature].decode("utf-8", errors="replace") for i in range(len(records))]
