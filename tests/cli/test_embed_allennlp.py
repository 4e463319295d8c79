"""AllenNLP's `allennlp elmo` tests (allennlp/tests/commands/elmo_test.py, `TestElmoCommand`) on
`elmo-embed`, call for call with AllenNLP's names and tolerances, and the rest of the command as
AllenNLP's.

The flags are elmo-embed's spelling of AllenNLP's: `--input`/`--output` for its positional
`input_file output_file`, `--options`/`--weights` for `--options-file`/`--weight-file`, underscores
for dashes (`--use_sentence_keys`, `--forget_sentences`); `--all`, `--top` and `--average` as
AllenNLP's (or `--layers`). The fixture files are tests/inference/test_embedder_allennlp.py's.
Differences by design: empty lines are embedded (AllenNLP refuses them: `test_empty_sentences_raise_errors`
becomes `test_empty_sentences_are_embedded`); with `--use_sentence_keys` a repeated sentence is
written once (AllenNLP stops with an error); the `_w_softmax` test is not ported (no softmax here).
"""

from __future__ import annotations

import json
import logging
import os

import h5py
import numpy
import pytest

from elmo_jax.data.sources import MAX_LINE_BYTES
from elmo_jax.cli.embed import main
from elmo_jax.inference.embedder import ElmoEmbedder
from tests.inference.test_embedder_allennlp import write_elmo_files

SENTENCES = [
    "Michael went to the store to buy some eggs .",
    "Joel rolled down the street on his skateboard .",
    "test / this is a first sentence",
    "Take a look , then , at Tuesday 's elections in New York City , New Jersey and Virginia :",
]


class TestElmoCommand:
    @pytest.fixture(autouse=True)
    def setUp(self, tmp_path, elmo_files):
        self.options_file, self.weight_file, self.reference = elmo_files
        self.sentences_path = str(tmp_path / "sentences.txt")
        self.output_path = str(tmp_path / "output.txt")

    def run(self, *flags: str) -> None:
        """`allennlp elmo sentences_path output_path FLAGS --options-file ... --weight-file ...`."""
        argv = ["--input", self.sentences_path, "--output", self.output_path, *flags,
                "--options", self.options_file, "--weights", self.weight_file]
        assert main(argv) == 0

    def write_lines(self, sentences: list[str]) -> None:
        with open(self.sentences_path, "w") as f:
            for line in sentences:
                f.write(line + "\n")

    def test_all_embedding_works(self):
        sentence = "Michael went to the store to buy some eggs ."
        with open(self.sentences_path, "w") as f:
            f.write(sentence)

        self.run("--all")

        assert os.path.exists(self.output_path)

        embedder = ElmoEmbedder(options_file=self.options_file, weight_file=self.weight_file)
        expected_embedding = embedder.embed_sentence(sentence.split())

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == {"0", "sentence_to_index"}
            # The vectors in the test configuration are smaller (32 length)
            embedding = h5py_file.get("0")
            assert embedding.shape == (3, len(sentence.split()), 32)
            numpy.testing.assert_allclose(embedding, expected_embedding, rtol=1e-4)
            assert json.loads(h5py_file.get("sentence_to_index")[0]) == {sentence: "0"}
        want = self.reference.embed_batches([sentence.split()], 1)[0]
        numpy.testing.assert_allclose(expected_embedding, want, rtol=1e-5, atol=1e-6)

    def test_top_embedding_works(self):
        sentence = "Michael went to the store to buy some eggs ."
        with open(self.sentences_path, "w") as f:
            f.write(sentence)

        self.run("--top")

        assert os.path.exists(self.output_path)

        embedder = ElmoEmbedder(options_file=self.options_file, weight_file=self.weight_file)
        expected_embedding = embedder.embed_sentence(sentence.split())[2]

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == {"0", "sentence_to_index"}
            # The vectors in the test configuration are smaller (32 length)
            embedding = h5py_file.get("0")
            assert embedding.shape == (len(sentence.split()), 32)
            numpy.testing.assert_allclose(embedding, expected_embedding, rtol=1e-4)
            assert json.loads(h5py_file.get("sentence_to_index")[0]) == {sentence: "0"}

    def test_average_embedding_works(self):
        sentence = "Michael went to the store to buy some eggs ."
        with open(self.sentences_path, "w") as f:
            f.write(sentence)

        self.run("--average")

        assert os.path.exists(self.output_path)

        embedder = ElmoEmbedder(options_file=self.options_file, weight_file=self.weight_file)
        expected_embedding = embedder.embed_sentence(sentence.split())
        expected_embedding = (expected_embedding[0] + expected_embedding[1] + expected_embedding[2]) / 3

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == {"0", "sentence_to_index"}
            # The vectors in the test configuration are smaller (32 length)
            embedding = h5py_file.get("0")
            assert embedding.shape == (len(sentence.split()), 32)
            numpy.testing.assert_allclose(embedding, expected_embedding, rtol=1e-4)
            assert json.loads(h5py_file.get("sentence_to_index")[0]) == {sentence: "0"}

    def test_batch_embedding_works(self):
        sentences = SENTENCES
        self.write_lines(sentences)

        self.run("--all")

        assert os.path.exists(self.output_path)

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == {"0", "1", "2", "3", "sentence_to_index"}
            # The vectors in the test configuration are smaller (32 length)
            for sentence_id, sentence in zip(["0", "1", "2", "3"], sentences):
                assert h5py_file.get(sentence_id).shape == (3, len(sentence.split()), 32)
            assert (json.loads(h5py_file.get("sentence_to_index")[0]) ==
                    {sentences[i]: str(i) for i in range(len(sentences))})

    def test_batch_embedding_works_with_sentences_as_keys(self):
        sentences = SENTENCES[:2]
        self.write_lines(sentences)

        self.run("--all", "--use_sentence_keys")

        assert os.path.exists(self.output_path)

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == set(sentences)
            # The vectors in the test configuration are smaller (32 length)
            for sentence in sentences:
                assert h5py_file.get(sentence).shape == (3, len(sentence.split()), 32)

    def test_batch_embedding_works_with_forget_sentences(self):
        sentences = SENTENCES
        self.write_lines(sentences)

        self.run("--all", "--forget_sentences")

        assert os.path.exists(self.output_path)

        with h5py.File(self.output_path, "r") as h5py_file:
            assert set(h5py_file.keys()) == {"0", "1", "2", "3"}
            # The vectors in the test configuration are smaller (32 length)
            for sentence_id, sentence in zip(["0", "1", "2", "3"], sentences):
                assert h5py_file.get(sentence_id).shape == (3, len(sentence.split()), 32)

    def test_duplicate_sentences(self):
        sentences = [
            "Michael went to the store to buy some eggs .",
            "Michael went to the store to buy some eggs .",
        ]
        self.write_lines(sentences)

        self.run("--all")

        assert os.path.exists(self.output_path)

        with h5py.File(self.output_path, "r") as h5py_file:
            assert len(h5py_file.keys()) == 3
            assert set(h5py_file.keys()) == {"0", "1", "sentence_to_index"}
            # The vectors in the test configuration are smaller (32 length)
            for sentence_id, sentence in zip(["0", "1"], sentences):
                assert h5py_file.get(sentence_id).shape == (3, len(sentence.split()), 32)
            assert json.loads(h5py_file.get("sentence_to_index")[0]) == {sentences[0]: "1"}  # The last line, as AllenNLP.

    def test_empty_sentences_are_embedded(self):
        """AllenNLP's `test_empty_sentences_raise_errors`: elmo-embed embeds an empty line as
        `(3, 0, 32)` and leaves its row's states as they were."""
        sentences = ["A", "", "", "B"]
        self.write_lines(sentences)

        self.run("--all", "--batch_size", "2")

        with h5py.File(self.output_path, "r") as h5py_file:
            got = [h5py_file[str(i)][...] for i in range(4)]
            assert json.loads(h5py_file.get("sentence_to_index")[0]) == {"A": "0", "": "2", "B": "3"}
        assert got[1].shape == got[2].shape == (3, 0, 32)
        want = self.reference.embed_batches([s.split() for s in sentences], 2)
        for g, w in zip(got, want):
            numpy.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def elmo_files(tmp_path_factory):
    return write_elmo_files(tmp_path_factory.mktemp("elmo"))


# ----------------------------------------------------------------------------- the rest of the command


def embed(tmp_path, elmo_files, lines: list[str], *flags: str) -> tuple[int, str]:
    """Runs elmo-embed on `lines`; (exit status, output path)."""
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = str(tmp_path / "out.hdf5")
    argv = ["--options", elmo_files.options_file, "--weights", elmo_files.weight_file,
            "--input", str(tmp_path / "in.txt"), "--output", output, *flags]
    return main(argv), output


def test_default_batch_size_is_allennlps_64(tmp_path, elmo_files):
    """Stateful embeddings depend on the batch size: the defaults give AllenNLP's numbers."""
    lines = [SENTENCES[i % 4] for i in range(70)]
    rc, output = embed(tmp_path, elmo_files, lines)
    assert rc == 0
    with h5py.File(output, "r") as f:
        got = [f[str(i)][...] for i in range(70)]
    want = elmo_files.reference.embed_batches([line.split() for line in lines], 64)
    for g, w in zip(got, want):
        numpy.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    batches_of_1 = elmo_files.reference.embed_batches([line.split() for line in lines[:6]], 1)
    assert not numpy.allclose(want[5], batches_of_1[5], atol=1e-3)  # Batches of 1 give other numbers.


def test_sentence_to_index_is_allennlps_json(tmp_path, elmo_files):
    """A string dataset of shape (1,), json.dumps of {sentence: line number} (non-ASCII escaped, as
    AllenNLP's); sentences are the lines' tokens joined by single spaces."""
    rc, output = embed(tmp_path, elmo_files, ["naïve  café\t中文", "a b"])
    assert rc == 0
    with h5py.File(output, "r") as f:
        dataset = f["sentence_to_index"]
        assert dataset.shape == (1,) and h5py.check_string_dtype(dataset.dtype) is not None
        text = dataset[0]
    assert json.loads(text) == {"naïve café 中文": "0", "a b": "1"}
    assert text == json.dumps({"naïve café 中文": "0", "a b": "1"}).encode()


def test_use_sentence_keys_writes_a_repeated_sentence_once(tmp_path, elmo_files, caplog):
    lines = [SENTENCES[0], SENTENCES[1], SENTENCES[0]]
    with caplog.at_level(logging.WARNING):
        rc, output = embed(tmp_path, elmo_files, lines, "--use_sentence_keys", "--batch_size", "1")
    assert rc == 0
    assert "1 line(s) repeat an earlier line's sentence; each sentence is written once" in caplog.text
    with h5py.File(output, "r") as f:
        assert set(f) == set(SENTENCES[:2])
        first = f[SENTENCES[0]][...]
    want = elmo_files.reference.embed_batches([line.split() for line in lines], 1)
    numpy.testing.assert_allclose(first, want[0], rtol=1e-5, atol=1e-6)  # The first line's layers.


@pytest.mark.parametrize(
    "line", ["", ".", "test / this is a first sentence", "a\x00b"], ids=["empty", "dot", "slash", "nul"]
)
def test_use_sentence_keys_refuses_a_sentence_hdf5_cannot_name(tmp_path, elmo_files, capsys, line):
    rc, output = embed(tmp_path, elmo_files, ["a b", line], "--use_sentence_keys")
    last = capsys.readouterr().err.split("\n")[-2:]  # After the progress bar: one line, then the end.
    assert rc == 1 and not os.path.exists(output)
    assert last[0].startswith(f"error: {tmp_path / 'in.txt'}:2: {line!r} cannot name an hdf5 dataset") and last[1] == ""


def test_a_line_over_the_bound_is_refused_before_it_is_read_whole(tmp_path, elmo_files, capsys):
    """A file without newlines (gigabytes, say) would fill the memory as one line."""
    rc, output = embed(tmp_path, elmo_files, ["a b", "word " * (MAX_LINE_BYTES // 5 + 1)])
    assert rc == 1 and not os.path.exists(output)
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {tmp_path / 'in.txt'}:2: line longer than 4,194,304 bytes (text files hold one sentence per line)"]


@pytest.mark.parametrize("flags, message", [
    (["--all", "--top"], "give one of --all, --top and --average, got --all, --top"),
    (["--average", "--layers", "top"], "--average and --layers=top disagree"),
])
def test_layer_flags_that_disagree_are_refused(tmp_path, elmo_files, capsys, flags, message):
    rc, output = embed(tmp_path, elmo_files, ["a b"], *flags)
    err = capsys.readouterr().err
    assert rc == 1 and not os.path.exists(output)
    assert err == f"error: {message}\n"


def test_layers_flag_and_allennlps_flag_agree(tmp_path, elmo_files):
    rc, output = embed(tmp_path, elmo_files, ["a b c"], "--layers", "average", "--average")
    assert rc == 0
    with h5py.File(output, "r") as f:
        assert f["0"].shape == (3, 32)
