"""A vector file's words looked up: the first spelling the file has, the unknown word's vector for
the others (zeros without one), text and binary files alike."""

from __future__ import annotations

import numpy as np
import pytest

from elmo_jax.static.lookup import NO_ROW, StaticVectors
from elmo_jax.static.vector_files import write_text
from tests.static.vector_file_helpers import binary_bytes

WORDS = ["the", "Apple", "apple", "N", "<UNK>"]
VECTORS = np.arange(10, dtype=np.float32).reshape(5, 2) + 1


@pytest.fixture(params=["text", "binary"])
def vectors(request, tmp_path) -> StaticVectors:
    path = tmp_path / f"vectors.{request.param}"
    if request.param == "text":
        write_text(str(path), WORDS, VECTORS, header=False)
    else:
        path.write_bytes(binary_bytes(WORDS, VECTORS))
    return StaticVectors.read(str(path))


def test_a_file_read_in_either_format(vectors):
    assert vectors.name in ("vectors.text", "vectors.binary") and vectors.binary == vectors.name.endswith("binary")
    assert vectors.words == WORDS and vectors.dim == 2 and vectors.unknown_word == "<UNK>"
    np.testing.assert_array_equal(vectors.vectors, VECTORS)


def test_the_first_spelling_the_file_has_gives_the_row(vectors):
    lookup = vectors.lookup([("apple", "Apple"), ("APPLE", "Apple"), ("3.5", "N"), ("pear", "Pear", "pear"), ()])
    assert lookup.rows.tolist() == [2, 1, 3, 4, 4]  # An OOV word: <UNK>'s row.
    assert lookup.found_by.tolist() == [0, 1, 1, -1, -1] and lookup.oov.tolist() == [False, False, False, True, True]
    np.testing.assert_array_equal(vectors.rows_vectors(lookup.rows), VECTORS[[2, 1, 3, 4, 4]])


@pytest.mark.parametrize("unknown, row", [("<unk>", 4), ("unk", NO_ROW), ("UNKNOWN", NO_ROW)])
def test_without_an_unknown_word_entry_an_oov_word_has_no_row_and_zeros(tmp_path, unknown, row):
    """`<unk>` is an unknown-word entry too; GloVe's `unk` is an ordinary word."""
    path = tmp_path / "glove.txt"
    write_text(str(path), [*WORDS[:4], unknown], VECTORS)
    vectors = StaticVectors.read(str(path), "named")
    assert vectors.name == "named" and vectors.unknown_word == (unknown if row == 4 else None)
    lookup = vectors.lookup([("pear",), ("the",)])
    assert lookup.rows.tolist() == [row, 0] and lookup.oov.tolist() == [True, False]
    want = np.stack([VECTORS[4] if row == 4 else np.zeros(2), VECTORS[0]])
    np.testing.assert_array_equal(vectors.rows_vectors(lookup.rows), want)
