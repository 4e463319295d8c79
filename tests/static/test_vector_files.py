"""Word vector files: round trips of the text format with and without word2vec's header, word2vec's
binary format as word2vec writes it, and one `file:line` error for each malformed input."""

from __future__ import annotations

import os
import struct
import threading

import numpy as np
import pytest

from elmo_jax.static import vector_files
from elmo_jax.static.vector_files import read_binary, read_text, read_vectors, write_text
from tests.static.vector_file_helpers import binary_bytes

WORDS = ["the", "cat", "naïve", "<UNK>"]
VECTORS = np.array([[0.1, -2.5, 3e-8], [1.0, 0.0, -0.0], [1 / 3, 2 / 3, 1e30], [-1.0, 7.25, 123456.789]], np.float32)


@pytest.mark.parametrize("header", [True, False])
def test_text_round_trips_exactly(tmp_path, header: bool) -> None:
    path = tmp_path / "vectors.txt"
    write_text(str(path), WORDS, VECTORS, header=header)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert (lines[0] == "4 3") == header and len(lines) == 4 + header
    words, vectors = read_text(str(path))
    assert words == WORDS and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, VECTORS)
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.txt"]  # No temporary left.


def test_text_as_word2vec_and_glove_write_it(tmp_path) -> None:
    """word2vec: `%lf ` after every value; GloVe: ` %lf` before every value, no header."""
    word2vec, glove = tmp_path / "w2v.txt", tmp_path / "glove.txt"
    word2vec.write_text("2 2\nthe 0.500000 -1.250000 \ncat 2.000000 0.000000 \n", encoding="utf-8")
    glove.write_text("the 0.500000 -1.250000\r\ncat 2.000000 0.000000\n", encoding="utf-8")
    for path in (word2vec, glove):
        words, vectors = read_text(str(path))
        assert words == ["the", "cat"]
        np.testing.assert_array_equal(vectors, [[0.5, -1.25], [2.0, 0.0]])


@pytest.mark.parametrize("newline", [True, False])
def test_binary_reads_as_word2vec_writes_it(tmp_path, newline: bool) -> None:
    path = tmp_path / "vectors.bin"
    path.write_bytes(binary_bytes(WORDS, VECTORS, newline=newline))
    words, vectors = read_binary(str(path))
    assert words == WORDS
    np.testing.assert_array_equal(vectors, VECTORS)


TEXT_ERRORS = {
    "wrong count of values": (b"the 1 2 3\ncat 1 2\n", "2: 2 values, expected line 1's 3"),
    "header lies about the dimension": (b"2 3\nthe 1 2\ncat 1 2\n", "2: 2 values, expected the header's 3"),
    "header says more words": (b"3 2\nthe 1 2\ncat 1 2\n", "1: the header says 3 words, the file has 2"),
    "header says fewer words": (b"1 2\nthe 1 2\ncat 1 2\n", "3: more words than the header's 1"),
    "not a number": (b"the 1 2\ncat 1 two\n", "2: 'two' is not a number"),
    "nan": (b"the 1 nan\n", "1: 'nan' is not a finite float32"),
    "infinity": (b"the 1 2\ncat -inf 2\n", "2: '-inf' is not a finite float32"),
    "beyond float32": (b"the 1 1e39\n", "1: '1e39' is not a finite float32"),
    "invalid UTF-8": (b"the 1 2\nca\xfft 1 2\n", "2: not valid UTF-8 (invalid start byte)"),
    "duplicate word": (b"the 1 2\ncat 1 2\nthe 3 4\n", "3: duplicate word 'the' (line 1)"),
    "empty line": (b"the 1 2\n\ncat 1 2\n", "2: 0 values, expected line 1's 2"),
    "empty word": (b"the 1 2\n 1 2\n", "2: empty word"),
    "a word alone": (b"the\n", "1: expected `word v1 ... vdim`, got 'the'"),
    "empty file": (b"", "1: empty file"),
    "a header and no vectors": (b"0 8\n", " no word vectors in the file, only a header"),
    "a header of no dimensions": (b"2 0\nthe\ncat\n", "1: the header says the vectors have 0 dimensions"),
    "an underscore in a number": (b"the 1_0 2\n", "1: '1_0' is not a number"),
    "an Arabic-Indic digit": ("the 1 \u0661\n".encode(), "1: '\u0661' is not a number"),
    "a tab before a number": (b"the \t1 2\ncat 1 2\n", "1: '\\t1' is not a number"),
}


@pytest.mark.parametrize("case", sorted(TEXT_ERRORS))
def test_each_malformed_text_file_is_one_error_naming_its_line(tmp_path, case: str) -> None:
    content, message = TEXT_ERRORS[case]
    path = tmp_path / "vectors.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        read_text(str(path))
    assert str(error.value) == f"{path}:{message}"


VALID = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
BINARY_ERRORS = {
    "no header": (b"the " + struct.pack("<2f", 1, 2), "1: expected a header `count dim`"),
    "header says more words": (binary_bytes(["the", "cat"], VALID, count=3), "1: the header says 3 words, the file has 2"),
    "header says fewer words": (binary_bytes(["the", "cat"], VALID, count=1), "3: more data than the header's 1 words"),
    "truncated vector": (binary_bytes(["the", "cat"], VALID)[:-4], "3: the vector of 'cat' ends after 1 of 2 values"),
    "nan": (binary_bytes(["the", "cat"], np.array([[1, 2], [np.nan, 4]], np.float32)), "3: the vector of 'cat' is not finite"),
    "invalid UTF-8": (binary_bytes([b"th\xffe", "cat"], VALID), "2: not valid UTF-8 (invalid start byte)"),
    "duplicate word": (binary_bytes(["cat", "cat"], VALID), "3: duplicate word 'cat' (line 2)"),
    "a word without its vector": (binary_bytes(["the"], VALID[:1], count=2) + b"cat", "3: a word without its vector"),
    "a header of no dimensions": (b"2 0\nthe \ncat \n", "1: the header says the vectors have 0 dimensions"),
    "a header that lies about the count": (
        binary_bytes(["the", "cat"], VALID, count=10**11),
        "1: the header says 100000000000 words, the file has 2",
    ),
}


@pytest.mark.parametrize("case", sorted(BINARY_ERRORS))
def test_each_malformed_binary_file_is_one_error_naming_its_line(tmp_path, case: str) -> None:
    content, message = BINARY_ERRORS[case]
    path = tmp_path / "vectors.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        read_binary(str(path))
    assert str(error.value) == f"{path}:{message}"


@pytest.mark.parametrize("words, vectors, message", [
    (["a b", "c"], VALID, "word 'a b' is empty or holds whitespace"),
    (["a", "a"], VALID, "the words are not distinct"),
    (["a"], VALID, r"1 words need vectors of shape \[1, dim\], not \[2, 2\]"),
    (["a", "b"], np.array([[1, np.inf], [0, 0]]), "the vectors are not all finite"),
])
def test_writing_what_would_not_read_back_is_refused(tmp_path, words, vectors, message) -> None:
    with pytest.raises(ValueError, match=message):
        write_text(str(tmp_path / "vectors.txt"), words, vectors)
    assert not list(tmp_path.iterdir())


# A float32 whose little-endian bytes read as a newline and two letters: b"\nAB?".
NEWLINE_FLOAT = struct.unpack("<f", b"\nAB?")[0]


@pytest.mark.parametrize("name, content, binary", [
    ("word2vec text", b"2 3\nthe 0.5 -1 2\ncat 1 2 3\n", False),
    ("GloVe text", b"the 0.5 -1 2\ncat 1 2 3\n", False),
    ("a short first line, then a word of several bytes", "2 8\nthe 0 0 0 0 0 0 0 0\nnaïve 1 1 1 1 1 1 1 1\n".encode(), False),
    ("binary", binary_bytes(WORDS, VECTORS), True),
    ("binary without newlines", binary_bytes(WORDS, VECTORS, newline=False), True),
    ("binary whose first bytes read as a newline", binary_bytes(["the"], np.array([[NEWLINE_FLOAT, 1, 2]], np.float32)),
     True),
])
def test_binary_and_text_files_are_told_apart_by_their_first_vector(tmp_path, name, content, binary) -> None:
    path = tmp_path / "vectors"
    path.write_bytes(content)
    words, vectors, read_as_binary = read_vectors(str(path))
    assert read_as_binary == binary, name
    want_words, want_vectors = (read_binary if binary else read_text)(str(path))
    assert words == want_words
    np.testing.assert_array_equal(vectors, want_vectors)


@pytest.mark.parametrize("content, message", [
    (TEXT_ERRORS["header lies about the dimension"][0], TEXT_ERRORS["header lies about the dimension"][1]),
    (TEXT_ERRORS["nan"][0], TEXT_ERRORS["nan"][1]),
    (BINARY_ERRORS["nan"][0], BINARY_ERRORS["nan"][1]),
])
def test_a_malformed_file_is_read_in_its_own_format_and_its_error_names_the_line(tmp_path, content, message) -> None:
    path = tmp_path / "vectors"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        read_vectors(str(path))
    assert str(error.value) == f"{path}:{message}"


def through_a_fifo(tmp_path, content: bytes, name: str = "pipe") -> tuple[str, threading.Thread]:
    """A FIFO that a thread writes `content` into once (as `<(zcat vectors.gz)` does), and the thread."""
    path = tmp_path / name
    os.mkfifo(path)
    writer = threading.Thread(target=path.write_bytes, args=(content,))
    writer.start()
    return str(path), writer


def glove_lines(first_word: str, n_words: int = 300, dim: int = 8) -> bytes:
    return b"".join(f"{first_word if i == 0 else f'w{i}'} {' '.join(['0.5'] * dim)}\n".encode() for i in range(n_words))


@pytest.mark.parametrize("header", [True, False])
def test_a_file_from_a_pipe_reads_as_the_file(tmp_path, header: bool) -> None:
    """The first bytes that tell the format are read once: the lines after them are not lost (the
    first words vanished when those bytes ended at a line's end) nor a valid file refused."""
    aligned = 0
    for shift in range(40):
        content = (b"300 8\n" if header else b"") + glove_lines("t" * (shift + 1))
        first_line = content.index(b"\n") + 1
        sniffed_end = first_line + vector_files._MAX_WORD_BYTES + 4 * 8
        aligned += content[sniffed_end - 1 : sniffed_end] == b"\n" if header else 0
        (tmp_path / "file").write_bytes(content)
        pipe, writer = through_a_fifo(tmp_path, content, f"pipe{shift}")
        got = read_vectors(pipe)
        writer.join()
        want = read_vectors(str(tmp_path / "file"))
        assert got.words == want.words and len(got.words) == 300 and not got.binary
        np.testing.assert_array_equal(got.vectors, want.vectors)
    assert aligned or not header  # The read of the header's file ended at a line's end at least once.


def test_a_binary_file_from_a_pipe_reads_as_the_file(tmp_path) -> None:
    pipe, writer = through_a_fifo(tmp_path, binary_bytes(WORDS, VECTORS))
    words, vectors, binary = read_vectors(pipe)
    writer.join()
    assert binary and words == WORDS
    np.testing.assert_array_equal(vectors, VECTORS)


@pytest.mark.parametrize("header", [True, False])
def test_a_byte_order_mark_before_the_first_line_is_dropped(tmp_path, header: bool) -> None:
    """A BOM stayed in GloVe's first word ('\\ufeffthe'), which no lookup then found."""
    path = tmp_path / "vectors.txt"
    path.write_bytes("\ufeff".encode() + (b"2 2\n" if header else b"") + b"the 1 2\ncat 3 4\n")
    words, vectors, _ = read_vectors(str(path))
    assert words == ["the", "cat"]
    np.testing.assert_array_equal(vectors, VALID)


def test_a_binary_files_header_after_a_byte_order_mark_reads(tmp_path) -> None:
    path = tmp_path / "vectors.bin"
    path.write_bytes("\ufeff".encode() + binary_bytes(WORDS, VECTORS))
    words, vectors, binary = read_vectors(str(path))
    assert binary and words == WORDS
    np.testing.assert_array_equal(vectors, VECTORS)
