"""The configured corpus: text files (per-process parts, key-named errors, sentence limits) and
data.source='tfds' (splits, process shards, vocabulary, counts)."""

import collections
import itertools
import logging
import re

import pytest

from elmo_jax.config import ConfigError, schema, validate
from elmo_jax.data import corpus
from elmo_jax.data.sources import DataError
from tests.data.tfds_helpers import prepare_text_dataset, stored_texts


def _text_config(pattern, **data):
    config = schema.get_config()
    config.data.source = "text"
    config.data.train_files = pattern
    config.data.update(data)
    return config


def _write_corpus(root, n_files, lines_per_file=17):
    """Files of unique sentences; returns (glob, every sentence as a string)."""
    lines = []
    for f in range(n_files):
        text = [f"f{f} l{i} " + " ".join(["tok"] * (i % 4)) for i in range(lines_per_file)]
        (root / f"part-{f:02d}.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
        lines += [" ".join(t.split()) for t in text]
    return str(root / "part-*.txt"), lines


@pytest.mark.parametrize(
    "n_files,n_processes",
    [(6, 2), (5, 3), (3, 3), (2, 3), (1, 4), (3, 5)],  # More, as many as, and fewer files than processes.
)
def test_process_parts_are_disjoint_and_cover_the_corpus(tmp_path, n_files, n_processes):
    pattern, lines = _write_corpus(tmp_path, n_files)
    data = _text_config(pattern, shuffle_buffer=8).data
    parts = []
    for p in range(n_processes):
        src = corpus.train_source(data, seed=1, num_epochs=None, process_index=p, process_count=n_processes)
        src.num_epochs = 1  # One pass over this process's part.
        parts.append([" ".join(s) for s in src])
    assert all(parts), "every process gets some sentences"
    union = collections.Counter(s for part in parts for s in part)
    assert union == collections.Counter(lines)  # Exactly the corpus: nothing lost, nothing twice.
    for i in range(n_processes):
        for j in range(i + 1, n_processes):
            assert not set(parts[i]) & set(parts[j])
    if n_files >= n_processes:  # Whole files per process.
        for part in parts:
            owners = {s.split()[0] for s in part}
            assert all(sum(o in {s.split()[0] for s in other} for other in parts) == 1 for o in owners)


def test_train_source_uses_the_data_config(tmp_path):
    pattern, lines = _write_corpus(tmp_path, 3)
    data = _text_config(pattern, shuffle_buffer=5, max_sentence_tokens=2).data
    src = corpus.train_source(data, seed=0, num_epochs=1)
    assert src.block_size == 5 and src.max_sentence_tokens == 2
    assert all(len(s) <= 2 for s in src)
    data.shuffle = False
    assert corpus.train_source(data, seed=0, num_epochs=1).block_size == 1


def test_training_sentences_stream_with_the_token_limit_and_eval_lines_stay_whole(tmp_path):
    (tmp_path / "train.txt").write_text("a b c d e\nf\n")
    (tmp_path / "valid.txt").write_text("a b c d e\n")
    data = _text_config(str(tmp_path / "train.txt"), max_sentence_tokens=2, eval_files=str(tmp_path / "valid.txt")).data
    sentences = corpus.training_sentences(data)
    assert not isinstance(sentences, list)  # A stream, not a list in memory.
    assert list(sentences) == [["a", "b"], ["c", "d"], ["e"], ["f"]]
    assert corpus.count_positions(corpus.training_sentences(data)) == 3 + 3 + 2 + 2
    assert corpus.eval_sentences(data, "valid") == [["a", "b", "c", "d", "e"]]


def test_glob_matching_nothing_names_the_key_and_glob(tmp_path):
    missing = str(tmp_path / "nope-*.txt")
    data = _text_config(missing).data
    for make in (lambda: corpus.train_source(data, 0, 1), lambda: corpus.training_sentences(data)):
        with pytest.raises(DataError, match=r"data\.train_files: no file matches") as e:
            make()
        assert missing in str(e.value)
    (tmp_path / "t.txt").write_text("x\n")
    data = _text_config(str(tmp_path / "t.txt"), eval_files=missing).data
    with pytest.raises(DataError, match=r"data\.eval_files: no file matches"):
        corpus.eval_sentences(data, "valid")


@pytest.mark.parametrize(
    "train_files, error",
    [("", "data.source='text' needs data.train_files"), ("nope-*.txt", "data.train_files: no file matches")],
)
def test_the_training_files_are_checked_before_the_vocabulary_is_said_to_be_built(tmp_path, caplog, train_files,
                                                                                   error):
    """No "Building the vocabulary" line before the error saying that there is nothing to build it from."""
    building = "Building the vocabulary from the training data"
    with caplog.at_level(logging.INFO), pytest.raises(DataError, match=re.escape(error)):
        corpus.load_or_build_vocab(_text_config(train_files and str(tmp_path / train_files)).data, str(tmp_path))
    assert building not in caplog.text
    pattern, _ = _write_corpus(tmp_path, 1)
    with caplog.at_level(logging.INFO):
        corpus.load_or_build_vocab(_text_config(pattern).data, str(tmp_path))
    assert building in caplog.text


def test_file_names_with_glob_characters(tmp_path):
    (tmp_path / "a[1].txt").write_text("one\n")
    (tmp_path / "a1.txt").write_text("two\n")
    data = _text_config(str(tmp_path / "a*.txt"), shuffle=False).data
    assert sorted(map(tuple, corpus.train_source(data, 0, 1))) == [("one",), ("two",)]


def test_several_processes_stream_endlessly(tmp_path):
    # Parts differ in size (3 files over 2 processes): none may run out before the planned steps.
    pattern, lines = _write_corpus(tmp_path, 3)
    data = _text_config(pattern).data
    for p in range(2):
        src = corpus.train_source(data, seed=0, num_epochs=1, process_index=p, process_count=2)
        assert len([s for _, s in zip(range(3 * len(lines)), src)]) == 3 * len(lines)
    single = corpus.train_source(data, seed=0, num_epochs=1)
    assert len(list(single)) == len(lines)
    ptb = schema.get_config().data
    src = corpus.train_source(ptb, seed=0, num_epochs=1, process_index=1, process_count=2)
    assert src.num_epochs is None


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
    data = schema.get_config().data
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
    n = len(_tokenized(data_dir, "train"))
    parts = [corpus.train_source(data, seed=5, num_epochs=1, process_index=i, process_count=2) for i in range(2)]
    shards = [list(itertools.islice(part, len(part.sentences))) for part in parts]  # Endless with 2 processes.
    assert n == sum(len(part.sentences) for part in parts)
    assert sorted(shards[0] + shards[1]) == sorted(_tokenized(data_dir, "train"))
    assert sorted(shards[0]) == sorted(_tokenized(data_dir, "train")[0::2])
    data.shuffle = False
    assert list(corpus.train_source(data, seed=5, num_epochs=1)) == _tokenized(data_dir, "train")


def test_vocabulary_built_from_the_tfds_training_split(data_dir, tmp_path):
    vocab = corpus.load_or_build_vocab(_data(data_dir, vocab_min_count=2), str(tmp_path))
    assert vocab.words == ["<S>", "</S>", "<UNK>", "b", "c0", "c1", "c2", "c3"]
    assert vocab.counts[3:] == [17, 5, 4, 4, 4]


def test_source_tfds_is_known():
    """data.source is checked where a config enters (validation), before the corpus reads it."""
    assert "tfds" in schema.keys()["data.source"].check.choices
    config = schema.get_config()
    config.data = _data("", source="tfdz")
    with pytest.raises(ConfigError, match="^config key data.source='tfdz' is not one of 'ptb', 'text', 'tfds'$"):
        validate(config)


def test_an_evaluation_of_files_is_named_files_and_takes_no_split():
    """data.source='text' evaluates data.eval_files whatever data.eval_split says."""
    assert corpus.eval_set_name("text", "test") == corpus.eval_set_name("ptb", "test", "held_out/*.txt") == "files"
    assert corpus.eval_set_name("ptb", "test") == "test" and corpus.eval_set_name("tfds", "valid") == "valid"
    data = schema.get_config().data
    data.source, data.eval_files = "text", "held_out/*.txt"
    with pytest.raises(DataError, match=r"^--split=test does not apply to data.source='text', which has no splits: "
                                        r"data.eval_files='held_out/\*.txt' is evaluated$"):
        corpus.check_split_applies(data, "test")
    data.source = "ptb"
    corpus.check_split_applies(data, "test")
    with pytest.raises(DataError, match="^--split=valid does not apply beside --eval_files"):
        corpus.check_split_applies(data, "valid", "held_out/*.txt")


# ---------------------------------------------------------------- CoNLL-U files, segmentation


def _write_conllu(path, sentences):
    """A CoNLL-U file of `sentences` (lists of FORMs), a multiword token over each one's first two words."""
    blocks = []
    for n, forms in enumerate(sentences):
        rows = [f"# sent_id = {n}", "\t".join(["1-2", "".join(forms[:2])] + ["_"] * 8)]
        rows += ["\t".join([str(i), form, "_", "X", "_", "_", "0", "dep", "_", "_"]) for i, form in enumerate(forms, 1)]
        blocks.append("\r\n".join(rows) + "\r\n")
    path.write_text("\r\n".join(blocks), encoding="utf-8")
    return str(path)


TRAIN_FORMS = [["他", "来到", "了", "网易", "杭研", "大厦"], ["我", "爱", "北京", "天安门"], ["１９９７年", "，", "北京", "。"]]


def test_conllu_files_are_trained_on_counted_for_the_vocabulary_and_evaluated(tmp_path):
    train = _write_conllu(tmp_path / "train.conllu", TRAIN_FORMS)
    valid = _write_conllu(tmp_path / "dev.conllu", TRAIN_FORMS[1:])
    data = _text_config(train, eval_files=valid, shuffle=False).data
    assert list(corpus.train_source(data, seed=0, num_epochs=1)) == TRAIN_FORMS
    assert list(corpus.training_sentences(data)) == TRAIN_FORMS
    (tmp_path / "run").mkdir()
    vocab = corpus.load_or_build_vocab(data, str(tmp_path / "run"))
    assert vocab.words[3:5] == ["北京", "。"] and "他来到" not in vocab and "１９９７年" in vocab  # FORMs, not tokens.
    assert corpus.eval_sentences(data, "valid") == TRAIN_FORMS[1:]
    assert corpus.eval_sentences(schema.get_config().data, "test", eval_files=valid) == TRAIN_FORMS[1:]


def test_data_segmenter_cuts_the_training_and_evaluation_text(tmp_path):
    pytest.importorskip("jieba", reason="data.segmenter='jieba' needs the jieba package (pip install 'elmo-jax[zh]')")
    (tmp_path / "train.txt").write_text("我爱北京天安门\r\n", encoding="utf-8")
    (tmp_path / "valid.txt").write_text("他来到了网易杭研大厦\n", encoding="utf-8")
    data = _text_config(str(tmp_path / "train.txt"), eval_files=str(tmp_path / "valid.txt"), segmenter="jieba").data
    validate(_text_config(str(tmp_path / "train.txt"), segmenter="jieba"))
    assert list(corpus.train_source(data, seed=0, num_epochs=1)) == [["我", "爱", "北京", "天安门"]]
    assert list(corpus.training_sentences(data)) == [["我", "爱", "北京", "天安门"]]
    assert corpus.eval_sentences(data, "valid") == [["他", "来到", "了", "网易", "杭研", "大厦"]]
    assert corpus.eval_sentences(data, "valid", str(tmp_path / "train.txt")) == [["我", "爱", "北京", "天安门"]]


def test_an_unknown_segmenter_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="data.segmenter"):
        validate(_text_config("x.txt", segmenter="mecab"))


def test_unsegmented_training_text_is_warned_about_unless_it_is_segmented(tmp_path, caplog):
    (tmp_path / "en.txt").write_text("plain english text\n" * 10, encoding="utf-8")
    (tmp_path / "zh.txt").write_text("他来到了网易杭研大厦\n我爱北京天安门广场的早晨\n", encoding="utf-8")
    data = _text_config(f"{tmp_path}/en.txt,{tmp_path}/zh.txt").data
    with caplog.at_level(logging.WARNING):
        corpus.warn_if_unsegmented(data)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{tmp_path / 'zh.txt'} looks like Chinese or Japanese text without spaces")
    caplog.clear()
    for key, value in [("segmenter", "jieba"), ("source", "ptb")]:
        with caplog.at_level(logging.WARNING):
            corpus.warn_if_unsegmented(_text_config(data.train_files, **{key: value}).data)
        assert caplog.records == [], key


def test_the_character_vocabulary_is_built_from_the_training_text(tmp_path):
    (tmp_path / "train.txt").write_text("北京 是 首都\n北京 人\nthe 京\n", encoding="utf-8")
    config = _text_config(str(tmp_path / "train.txt"), char_vocab_min_count=2)
    assert corpus.load_characters(config.data).characters == ("京", "北")  # 3 and 2 times; the rest once.
    assert corpus.load_characters(_text_config(str(tmp_path / "train.txt")).data) is None  # Bytes.
    config.data.char_vocab_min_count = 4
    with pytest.raises(DataError, match="no non-ASCII character of the training data is seen "
                                        "data.char_vocab_min_count=4 times: set it to 0"):
        corpus.load_characters(config.data)


def test_an_evaluations_unsegmented_text_files_are_warned_about(tmp_path, caplog):
    """evaluate.py on raw Chinese (OOV 100%) said nothing; data.segmenter='jieba' cuts them, no warning."""
    import logging

    from elmo_jax.config import schema
    from elmo_jax.data.corpus import warn_if_eval_unsegmented

    path = tmp_path / "raw.txt"
    path.write_text("苹果公司发布了新手机。\n我今天在北京大学图书馆看书。\n" * 20, encoding="utf-8")
    data = schema.get_config().data
    with caplog.at_level(logging.WARNING):
        warn_if_eval_unsegmented(data, str(path))
        data.segmenter = "jieba"
        warn_if_eval_unsegmented(data, str(path))
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{path} looks like Chinese or Japanese text without spaces between words")
