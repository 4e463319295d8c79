"""ELMoForManyLangs model directories read without PyTorch, and the NumPy biLM of tests/reference/manylangs_numpy.py
equal to ELMoForManyLangs' `Embedder.sents2elmo` (first batch, zero LSTM state) to 1e-5 for every output_layer.

manylangs/ was written by tools/make_manylangs_fixtures.py with ELMoForManyLangs itself under PyTorch
(versions.json: its commit, torch's version); these tests need no PyTorch.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from elmo_jax.interop.manylangs import (
    BUNDLED_CONFIGS,
    BUNDLED_PREFIX,
    WHITESPACE_ENTRY,
    find_config,
    read_dictionary,
    read_model,
)
from tests.reference.manylangs_numpy import char_ids, manylangs_layers, select_output_layer, sentence_tokens

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manylangs")
MODELS = ["cnn_words", "cnn_chars", "words_only"]  # legacy pickles; zip; zip (versions.json)
OUTPUT_LAYERS = (0, 1, 2, -1, -2)

with open(os.path.join(FIXTURES, "sentences.json"), encoding="utf-8") as _f:
    SENTENCES = json.load(_f)


def expected(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(FIXTURES, name, "expected.npz")) as f:
        return {key: f[key] for key in f.files}


def copy_model(name: str, tmp_path) -> str:
    directory = str(tmp_path / name)
    shutil.copytree(os.path.join(FIXTURES, name), directory)
    return directory


def one_line_error(directory: str, match: str) -> str:
    with pytest.raises(ValueError, match=match) as raised:
        read_model(directory)
    message = str(raised.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("name", MODELS)
def test_every_output_layer_is_elmoformanylangs_to_1e_5(name):
    want = expected(name)
    layers = manylangs_layers(read_model(os.path.join(FIXTURES, name)), SENTENCES)
    for k in OUTPUT_LAYERS:
        for i, sentence_layers in enumerate(layers):
            got, ref = select_output_layer(sentence_layers, k), want[f"output_layer_{k}_sentence_{i}"]
            assert got.shape == ref.shape, (k, i)
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5, err_msg=f"output_layer {k}, sentence {i}")


@pytest.mark.parametrize("name", MODELS)
def test_an_empty_sentence_has_no_rows_and_an_empty_average(name):
    """ELMoForManyLangs gives [.., 0, dim] but for output_layer -1, where np.average raises (versions.json)."""
    want = expected(name)
    (layers,) = manylangs_layers(read_model(os.path.join(FIXTURES, name)), [[]])
    for k in (0, 1, 2, -2):
        assert select_output_layer(layers, k).shape == want[f"empty_sentence_output_layer_{k}"].shape
    assert select_output_layer(layers, -1).shape == (0, layers.shape[-1])


def test_the_fixtures_hold_both_pickle_layouts():
    with open(os.path.join(FIXTURES, "versions.json")) as f:
        record = json.load(f)
    assert {record["models"][m]["pickles"] for m in MODELS} == {"legacy", "zip"}
    for name in MODELS:
        with open(os.path.join(FIXTURES, name, "encoder.pkl"), "rb") as f:
            assert (f.read(4) == b"PK\x03\x04") == (record["models"][name]["pickles"] == "zip")


def test_an_absolute_config_path_falls_back_to_its_basename_in_the_model_directory():
    directory = os.path.join(FIXTURES, "cnn_words")
    with open(os.path.join(directory, "config.json")) as f:
        named = json.load(f)["config_path"]
    assert os.path.isabs(named) and not os.path.exists(named)
    where, _ = find_config(directory)
    assert where == os.path.join(directory, os.path.basename(named))


def test_a_config_in_configs_or_only_elmoformanylangs_own(tmp_path):
    with open(tmp_path / "config.json", "w") as f:
        json.dump({"config_path": "/gone/cnn_50_100_512_4096_sample.json"}, f)
    where, config = find_config(str(tmp_path))
    assert where == BUNDLED_PREFIX + "cnn_50_100_512_4096_sample.json"
    assert config == BUNDLED_CONFIGS["cnn_50_100_512_4096_sample.json"] and config["encoder"]["dim"] == 4096
    (tmp_path / "configs").mkdir()
    with open(tmp_path / "configs" / "cnn_50_100_512_4096_sample.json", "w") as f:
        json.dump({"mine": 1}, f)
    assert find_config(str(tmp_path)) == (str(tmp_path / "configs" / "cnn_50_100_512_4096_sample.json"), {"mine": 1})
    with open(tmp_path / "config.json", "w") as f:
        json.dump({"config_path": "/gone/other.json"}, f)
    with pytest.raises(ValueError, match=r"config\.json: config_path '/gone/other\.json' is neither"):
        find_config(str(tmp_path))


def test_dictionaries_read_as_elmoformanylangs_reads_them():
    """A whitespace entry reads back as U+3000; words are cut to max_chars - 2 code points; the marks of a
    word's characters are ELMoForManyLangs' swapped ones."""
    chars = read_dictionary(os.path.join(FIXTURES, "cnn_words", "char.dic"))
    words = read_dictionary(os.path.join(FIXTURES, "cnn_words", "word.dic"))
    assert chars[WHITESPACE_ENTRY] == 17 and words[WHITESPACE_ENTRY] == 14 and chars["𠀀"] == 16
    assert sentence_tokens(["extraordinary", "sixsix", "😀x"], 8) == ["<bos>", "extrao", "sixsix", "😀x", "<eos>"]
    ids = char_ids(chars, ["<bos>", "a\u3000😀"], 8)
    bow, eow, pad, oov = chars["<bow>"], chars["<eow>"], chars["<pad>"], chars["<oov>"]
    assert ids.tolist() == [[eow, chars["<bos>"], bow, pad, pad, pad, pad, pad],
                            [eow, chars["a"], chars[WHITESPACE_ENTRY], oov, bow, pad, pad, pad]]


@pytest.mark.parametrize("line, match", [
    ("t\t5\n", r"char\.dic:27: 't' again \(line 6\)"),
    ("zz\t26\nyy\t28\n", r"char\.dic:28: id 28 of 'yy' is outside 0\.\.27"),
    ("zz\t3\n", r"char\.dic:27: id 3 of 'zz' is 's''s too \(line 4\)"),
])
def test_a_dictionary_whose_ids_are_not_0_to_n_minus_1_is_one_error(tmp_path, line, match):
    directory = copy_model("cnn_words", tmp_path)
    with open(os.path.join(directory, "char.dic"), "a", encoding="utf-8") as f:
        f.write(line)
    assert one_line_error(directory, match).startswith(os.path.join(directory, "char.dic") + ":")


@pytest.mark.parametrize("line", ["cat\tdog\t3\n", "cat\tfive\n", "\n"])
def test_a_malformed_dictionary_line_is_one_error_naming_file_and_line(tmp_path, line):
    directory = copy_model("cnn_words", tmp_path)
    with open(os.path.join(directory, "word.dic"), "a", encoding="utf-8") as f:
        f.write(line)
    one_line_error(directory, r"word\.dic:18: not 'ENTRY<tab>ID'")


def test_a_dictionary_without_a_special_entry_is_one_error(tmp_path):
    directory = copy_model("cnn_chars", tmp_path)
    path = os.path.join(directory, "char.dic")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("<bow>\t", "<BOW>\t"))
    one_line_error(directory, r"char\.dic: lacks <bow>")


@pytest.mark.parametrize("name, key, value, pickle", [
    ("cnn_words", "encoder", ("dim", 17), "encoder.pkl"),
    ("cnn_chars", "token_embedder", ("filters", [[1, 4], [2, 3]]), "token_embedder.pkl"),
])
def test_a_state_dict_whose_shapes_disagree_with_the_configuration_is_one_error(tmp_path, name, key, value, pickle):
    directory = copy_model(name, tmp_path)
    where, _ = find_config(directory)
    with open(where) as f:
        config = json.load(f)
    config[key][value[0]] = value[1]
    with open(where, "w") as f:
        json.dump(config, f)
    message = one_line_error(directory, r"has shape \[")
    assert message.startswith(os.path.join(directory, pickle) + ": ") and where in message


def test_a_dictionary_that_disagrees_with_the_embedding_is_one_error(tmp_path):
    directory = copy_model("words_only", tmp_path)
    with open(os.path.join(directory, "word.dic"), "a", encoding="utf-8") as f:
        f.write("dog\t17\n")
    message = one_line_error(directory, r"word_emb_layer\.embedding\.weight has shape \[17, 5\]")
    assert message.startswith(os.path.join(directory, "token_embedder.pkl") + ": ")


def test_an_unknown_output_layer_is_refused():
    (layers,) = manylangs_layers(read_model(os.path.join(FIXTURES, "cnn_chars")), [["cat"]])
    assert np.array_equal(select_output_layer(layers, -3), layers[0])
    with pytest.raises(ValueError, match="output_layer 3: the model has layers 0..2"):
        select_output_layer(layers, 3)
