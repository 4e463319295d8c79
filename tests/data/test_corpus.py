"""The corpus a config names, with data.source='tfds': splits, process shards, vocabulary, counts."""

import pytest

from configs import default
from elmo_jax.data import corpus
from elmo_jax.data.sources import DataError
from tests.data.tfds_helpers import prepare_text_dataset, stored_texts

SPLITS = {
    "train": [f"a{i} b c{i % 4}" for i in range(17)],
    "heldout": [f"h{i} b" for i in range(5)],
    "test": [f"t{i}" for i in range(3)],
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tfds"))
    prepare_text_dataset(path, SPLITS, name="corpus_text", feature="sentence")
    return path


def _data(data_dir, **overrides):
    data = default.get_config().data
    data.source = "tfds"
    data.tfds_name = "corpus_text"
    data.tfds_data_dir = data_dir
    data.tfds_feature = "sentence"
    data.tfds_valid_split = "heldout"
    for key, value in overrides.items():
        data[key] = value
    return data


def _tokenized(data_dir, split):
    return [t.split() for t in stored_texts(data_dir, "corpus_text", split, feature="sentence")]


def test_eval_sentences_read_the_mapped_tfds_split(data_dir):
    data = _data(data_dir)
    assert corpus.eval_sentences(data, "valid") == _tokenized(data_dir, "heldout")
    assert corpus.eval_sentences(data, "test") == _tokenized(data_dir, "test")
    data.tfds_test_split = "heldout[:2]"
    assert corpus.eval_sentences(data, "test") == _tokenized(data_dir, "heldout")[:2]
    with pytest.raises(DataError, match=r"unknown split 'dev' for data.source='tfds'"):
        corpus.eval_sentences(data, "dev")


def test_training_sentences_and_positions(data_dir):
    data = _data(data_dir)
    train = _tokenized(data_dir, "train")
    assert list(corpus.training_sentences(data)) == train
    assert corpus.count_positions(corpus.training_sentences(data)) == sum(len(s.split()) + 1 for s in SPLITS["train"])


def test_train_source_shuffles_per_epoch_and_shards_by_process(data_dir):
    data = _data(data_dir)
    source = corpus.train_source(data, seed=5, num_epochs=2)
    out = list(source)
    assert sorted(out[:17]) == sorted(out[17:]) == sorted(_tokenized(data_dir, "train"))
    assert out[:17] != out[17:]
    shards = [list(corpus.train_source(data, seed=5, num_epochs=1, process_index=i, process_count=2)) for i in range(2)]
    assert sorted(shards[0] + shards[1]) == sorted(_tokenized(data_dir, "train"))
    assert sorted(shards[0]) == sorted(_tokenized(data_dir, "train")[0::2])
    data.shuffle = False
    assert list(corpus.train_source(data, seed=5, num_epochs=1)) == _tokenized(data_dir, "train")


def test_vocabulary_built_from_the_tfds_training_split(data_dir, tmp_path):
    vocab = corpus.load_or_build_vocab(_data(data_dir, vocab_min_count=2), str(tmp_path))
    assert vocab.words == ["<S>", "</S>", "<UNK>", "b", "c0", "c1", "c2", "c3"]
    assert vocab.counts[3:] == [17, 5, 4, 4, 4]


def test_source_tfds_is_known():
    assert "tfds" in corpus.SOURCES
    with pytest.raises(DataError, match="data.source must be one of"):
        corpus.train_source(_data("", source="tfdz"), seed=0, num_epochs=1)
