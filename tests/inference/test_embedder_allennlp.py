"""AllenNLP's `ElmoEmbedder` tests (allennlp/tests/commands/elmo_test.py, `TestElmoEmbedder`), call for
call with AllenNLP's names and tolerances, and the rest of its API as AllenNLP defines it.

AllenNLP's fixture files are not here: tests/allennlp_fixtures.py writes a random biLM of the same shapes
(2 layers, projection 16, so vectors of 32) with elmo-jax's own export, and the numbers are checked
against the NumPy reference (tests/reference/bilm_numpy.py), which follows bilm-tf, as AllenNLP's
expected embeddings (dumped by bilm-tf) do. Differences by design: an empty sentence's array has the
model's width (AllenNLP's is always 1024 wide); there is no softmax (`softmax_weight_file`), so the
`_w_softmax` tests are not ported.
"""

from __future__ import annotations

import h5py
import jax
import numpy as np
import pytest

from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.pretrained import bilm_from_files
from tests.allennlp_fixtures import ElmoFiles, write_elmo_files

WORDS = "the a of to in and is was on for it with as by at from that this an be King play game school".split()


@pytest.fixture(scope="module")
def elmo_files(tmp_path_factory) -> ElmoFiles:
    return write_elmo_files(tmp_path_factory.mktemp("elmo"))


def load_sentences_embeddings(files: ElmoFiles) -> tuple[list[list[str]], list[list[np.ndarray]]]:
    """AllenNLP's `_load_sentences_embeddings`: 3 lists of 10 sentences, the k-th of each in batch k
    (as bilm-tf wrote them, batches of 3), and their expected top layers, `[n, 32]` each."""
    rng = np.random.default_rng(0)
    lengths = [
        [1, 2, 30, 7, 12, 5, 18, 3, 9, 25],
        [11, 4, 8, 2, 21, 6, 14, 10, 33, 4],
        [27, 30, 15, 16, 9, 19, 24, 11, 16, 9],
    ]
    sentences = [[" ".join(rng.choice(WORDS, n)) for n in row] for row in lengths]
    in_batches = [sentences[k][b].split() for b in range(10) for k in range(3)]
    expected = files.reference.embed_batches(in_batches, batch_size=3)
    embeddings = [[expected[3 * b + k][2] for b in range(10)] for k in range(3)]
    return sentences, embeddings


def test_embeddings_are_as_expected(elmo_files):
    loaded_sentences, loaded_embeddings = load_sentences_embeddings(elmo_files)

    assert len(loaded_sentences) == len(loaded_embeddings)
    batch_size = len(loaded_sentences)

    # The sentences and embeddings are organized in an idiosyncratic way TensorFlow handles batching.
    # We are going to reorganize them linearly so they can be grouped into batches by AllenNLP.
    sentences = []
    expected_embeddings = []
    for batch_number in range(len(loaded_sentences[0])):
        for index in range(batch_size):
            sentences.append(loaded_sentences[index][batch_number].split())
            expected_embeddings.append(loaded_embeddings[index][batch_number])

    assert len(expected_embeddings) == len(sentences)

    embedder = ElmoEmbedder(options_file=elmo_files.options_file, weight_file=elmo_files.weight_file)
    embeddings = list(embedder.embed_sentences(sentences, batch_size))

    assert len(embeddings) == len(sentences)

    for tensor, expected in zip(embeddings, expected_embeddings):
        np.testing.assert_array_almost_equal(tensor[2], expected)


def test_embed_batch_is_empty_sentence(elmo_files):
    embedder = ElmoEmbedder(options_file=elmo_files.options_file, weight_file=elmo_files.weight_file)
    embeddings = embedder.embed_sentence([])

    assert embeddings.shape == (3, 0, 32)  # AllenNLP: (3, 0, 1024) whatever the model.


def test_embed_batch_contains_empty_sentence(elmo_files):
    embedder = ElmoEmbedder(options_file=elmo_files.options_file, weight_file=elmo_files.weight_file)
    embeddings = list(embedder.embed_sentences(["This is a test".split(), []]))

    assert len(embeddings) == 2


# ----------------------------------------------------------------------------- the rest of AllenNLP's API

SENTENCES = [s.split() for s in ("the King is in the play", "a", "", "the game of the school is on", "it was")]


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == np.float32, i
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6, err_msg=f"sentence {i}")


def test_constructor_takes_allennlps_arguments(elmo_files):
    """`ElmoEmbedder(options_file, weight_file, cuda_device)` positionally too; stateful batches of 64
    by default, as AllenNLP's `embed_sentences`."""
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file, -1)
    assert embedder.batch_size == 64 and embedder.stateful
    sentences = SENTENCES * 14  # 70: a batch of 64 and one of 6.
    assert_close(list(embedder.embed_sentences(sentences)), elmo_files.reference.embed_batches(sentences, 64))


def test_embed_sentence_is_row_0_of_a_batch(elmo_files):
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file)
    first = embedder.embed_sentence(SENTENCES[0])
    second = embedder.embed_sentence(SENTENCES[3])  # Row 0 carries on from the first sentence.
    assert first.shape == (3, 6, 32)
    assert_close([first, second], elmo_files.reference.embed_batches([SENTENCES[0], SENTENCES[3]], 1))


def test_batch_to_embeddings_pads_and_masks(elmo_files):
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file)
    activations, mask = embedder.batch_to_embeddings(SENTENCES)
    assert activations.shape == (5, 3, 7, 32) and activations.dtype == np.float32
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask.sum(axis=1), [6, 1, 0, 7, 2])
    np.testing.assert_array_equal(mask, np.arange(7) < mask.sum(axis=1, keepdims=True))
    assert not (activations * ~mask[:, None, :, None]).any()  # zeros after each sentence's end
    want = elmo_files.reference.embed_batches(SENTENCES, 5)
    assert_close([activations[i, :, : len(s)] for i, s in enumerate(SENTENCES)], want)
    empty_activations, empty_mask = embedder.batch_to_embeddings([[]])
    assert empty_activations.shape == (1, 3, 0, 32) and empty_mask.shape == (1, 0)


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
def test_embed_sentences_takes_a_batch_size(elmo_files, stateful):
    """Batches of `batch_size` consecutive sentences, whatever the embedder's default (rows are
    added as batches need them)."""
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file, batch_size=2, stateful=stateful)
    sentences = SENTENCES * 3
    got = list(embedder.embed_sentences(sentences, batch_size=4))
    assert_close(got, elmo_files.reference.embed_batches(sentences, 4, stateful))


def test_batches_of_any_size_carry_their_rows_states(elmo_files):
    """As AllenNLP's stateful LSTM: a larger batch starts its new rows from zeros, a smaller one (or
    an empty sentence) leaves the other rows' states as they were."""
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file, batch_size=1)
    s = SENTENCES
    got = embedder.embed_batch(s[:2]) + embedder.embed_batch([s[3], s[4], s[0], s[1]]) + embedder.embed_batch([s[4]])
    want = elmo_files.reference.embed_batches([s[0], s[1], [], [], s[3], s[4], s[0], s[1], s[4], [], [], []], 4)
    assert_close(got, want[:2] + want[4:9])


def test_from_pretrained_takes_a_bilm_in_memory(elmo_files):
    """(`ElmoEmbedder.from_workdir` is the CLI's `--workdir`, tested in test_embedder.py.)"""
    embedder = ElmoEmbedder.from_pretrained(bilm_from_files(elmo_files.options_file, elmo_files.weight_file),
                                            batch_size=3)
    assert_close(embedder.embed_batch(SENTENCES[:3]), elmo_files.reference.embed_batches(SENTENCES[:3], 3))


def test_cuda_device_needs_a_gpu(elmo_files):
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is here")
    with pytest.raises(ValueError, match=r"cuda_device=0, but JAX sees 0 GPU\(s\)"):
        ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file, cuda_device=0)


def test_embed_file_takes_an_open_file_as_allennlp(elmo_files, tmp_path):
    """`embed_file(input_file, output_file_path, output_format, batch_size, ...)`: AllenNLP passes an
    open file; a path works too, with the same output."""
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n")
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file)
    with open(path) as input_file:
        assert embedder.embed_file(input_file, str(tmp_path / "a.hdf5"), "top", 2) == len(SENTENCES)
    embedder = ElmoEmbedder(elmo_files.options_file, elmo_files.weight_file)
    embedder.embed_file(str(path), str(tmp_path / "b.hdf5"), output_format="top", batch_size=2)
    want = [layers[-1] for layers in elmo_files.reference.embed_batches(SENTENCES, 2)]
    with h5py.File(tmp_path / "a.hdf5", "r") as a, h5py.File(tmp_path / "b.hdf5", "r") as b:
        assert sorted(a) == sorted(b) == ["0", "1", "2", "3", "4", "sentence_to_index"]
        assert_close([a[str(i)][...] for i in range(5)], want)
        assert_close([b[str(i)][...] for i in range(5)], want)
    with pytest.raises(ValueError, match="output_format must be one of"):
        embedder.embed_file(str(path), str(tmp_path / "c.hdf5"), "middle")
