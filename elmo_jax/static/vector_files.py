"""Word vector files: the text format of word2vec and GloVe (one `word v1 ... vdim` line a word,
values separated by single spaces; word2vec's first line is a header `count dim`, GloVe's files
have none) and word2vec's binary format (the header line, then per word `word `, dim float32
little-endian and a newline).

Every malformed input is one ValueError naming `file:line`: a binary file's records count as
lines after its header (the newline ending each makes them so), whatever bytes the floats hold.
`read_vectors` tells the formats apart by the bytes of the first vector, reading the file once.
"""

from __future__ import annotations

import codecs
import io
import os
import re
from typing import BinaryIO, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from elmo_jax.data.line_files import utf8_line
from elmo_jax.runtime.atomic_write import write_atomic

_FLOAT32_MAX = float(np.finfo(np.float32).max)
BYTE_ORDER_MARK = "\ufeff"
# What no value of the format holds, though Python's float() reads it: '1_0' as 10.0, Arabic-Indic
# digits ('١' as 1.0), whitespace around a value.
_NOT_IN_A_VALUE = re.compile(r"[^0-9.eE+\-naifntyNAIFTY]")


def _header(line: str) -> tuple[int, int] | None:
    """(count, dim) when the line is two non-negative integers, word2vec's header; else None (a
    GloVe file's first word). A one-dimensional vector of an integer word reads as a header."""
    fields = line.split(" ")
    if len(fields) == 2 and all(f.isascii() and f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def _checked_values(fields: Sequence[str], where: str) -> np.ndarray:
    """`fields` as `[dim]` float32; ValueError at `where` for one that is not a finite float32."""
    try:
        values = np.array(fields, dtype=np.float64)
    except ValueError:
        values = None
    if values is None or _NOT_IN_A_VALUE.search("".join(fields)):
        bad = next(f for f in fields if not _is_number(f))
        raise ValueError(f"{where}: {bad!r} is not a number")
    if not np.all(np.isfinite(values) & (np.abs(values) <= _FLOAT32_MAX)):
        bad = fields[int(np.argmin(np.isfinite(values) & (np.abs(values) <= _FLOAT32_MAX)))]
        raise ValueError(f"{where}: {bad!r} is not a finite float32")
    return values.astype(np.float32)


def _is_number(field: str) -> bool:
    if _NOT_IN_A_VALUE.search(field):
        return False
    try:
        float(field)
    except ValueError:
        return False
    return True


def _checked_word(word: str, where: str, seen: dict[str, int], line_no: int) -> None:
    """ValueError at `where` for an empty or repeated word; records it in `seen`."""
    if not word:
        raise ValueError(f"{where}: empty word")
    if word in seen:
        raise ValueError(f"{where}: duplicate word {word!r} (line {seen[word]})")
    seen[word] = line_no


class VectorFile(NamedTuple):
    """A vector file's `words`, their `vectors` `[n_words, dim]` float32 and its format."""

    words: list[str]
    vectors: np.ndarray
    binary: bool


def _parse_text(lines: Iterable[bytes], path: str) -> tuple[list[str], np.ndarray]:
    """The words and `[n_words, dim]` vectors of a text file's `lines`, with or without the header
    (a header's count and dim are checked against the lines)."""
    words: list[str] = []
    vectors: list[np.ndarray] = []
    seen: dict[str, int] = {}
    header, dim, dim_from = None, None, ""
    for line_no, raw in enumerate(lines, start=1):
        where = f"{path}:{line_no}"
        line = utf8_line(raw, where).rstrip("\r\n").rstrip(" ")
        if line_no == 1:
            line = line.removeprefix(BYTE_ORDER_MARK)
            header = _checked_header(_header(line), path)
            if header is not None:
                dim, dim_from = header[1], "the header's"
                continue
        if header is not None and len(words) == header[0]:
            raise ValueError(f"{where}: more words than the header's {header[0]}")
        fields = line.split(" ")
        if dim is None:
            dim, dim_from = len(fields) - 1, f"line {line_no}'s"
            if dim < 1:
                raise ValueError(f"{where}: expected `word v1 ... vdim`, got {line!r}")
        if len(fields) - 1 != dim:
            raise ValueError(f"{where}: {len(fields) - 1} values, expected {dim_from} {dim}")
        _checked_word(fields[0], where, seen, line_no)
        words.append(fields[0])
        vectors.append(_checked_values(fields[1:], where))
    if header is None and dim is None:
        raise ValueError(f"{path}:1: empty file")
    if header is not None and len(words) != header[0]:
        raise ValueError(f"{path}:1: the header says {header[0]} words, the file has {len(words)}")
    return _checked_not_empty(words, np.stack(vectors) if vectors else np.zeros((0, dim), np.float32), path)


def _parse_binary(data: bytes, path: str) -> tuple[list[str], np.ndarray]:
    """The words and `[n_words, dim]` vectors of a word2vec binary file's bytes (a newline after
    each vector is optional, as in word2vec's readers). No more rows are allocated than the file's
    size can hold, whatever count its header says."""
    end = data.find(b"\n")
    header = _header(_header_text(data[:end] if end >= 0 else data))
    if end < 0 or header is None:
        raise ValueError(f"{path}:1: expected a header `count dim`")
    count, dim = _checked_header(header, path)
    most = (len(data) - end - 1) // (2 + 4 * dim)  # Records of a 1-byte word, a space and the floats.
    words: list[str] = []
    vectors = np.zeros((min(count, most), dim), np.float32)  # A header's count is not trusted with memory.
    seen: dict[str, int] = {}
    position = end + 1
    for index in range(count):
        line_no = index + 2
        where = f"{path}:{line_no}"
        if position >= len(data):
            raise ValueError(f"{path}:1: the header says {count} words, the file has {index}")
        space = data.find(b" ", position)
        if space < 0:
            raise ValueError(f"{where}: a word without its vector")
        word = utf8_line(data[position:space], where).lstrip("\n")
        available = (len(data) - space - 1) // 4
        if available < dim:
            raise ValueError(f"{where}: the vector of {word!r} ends after {available} of {dim} values")
        values = np.frombuffer(data, "<f4", dim, space + 1)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{where}: the vector of {word!r} is not finite")
        _checked_word(word, where, seen, line_no)
        words.append(word)
        vectors[index] = values
        position = space + 1 + 4 * dim
        if data[position:position + 1] == b"\n":
            position += 1
    if position < len(data):
        raise ValueError(f"{path}:{count + 2}: more data than the header's {count} words")
    return _checked_not_empty(words, vectors, path)


def _header_text(first_line: bytes) -> str:
    return first_line.decode("utf-8", "replace").removeprefix(BYTE_ORDER_MARK).rstrip("\r\n ")


def _checked_header(header: tuple[int, int] | None, path: str) -> tuple[int, int] | None:
    if header is not None and header[1] == 0:
        raise ValueError(f"{path}:1: the header says the vectors have 0 dimensions")
    return header


def _checked_not_empty(words: list[str], vectors: np.ndarray, path: str) -> tuple[list[str], np.ndarray]:
    if not words:
        raise ValueError(f"{path}: no word vectors in the file, only a header")
    return words, vectors


# The bytes of the first record the format is told by: word2vec's readers stop a word at 100
# bytes; the first 4,096 values of a vector tell float32 bytes from text well enough.
_MAX_WORD_BYTES = 1000
_SNIFFED_VALUES = 4096


def _is_binary_record(header: tuple[int, int] | None, record: bytes) -> bool:
    """Whether the bytes after a first line that is a header `count dim` (`header`, None for
    another line) are a binary record: the dim bytes after its first word are not printable UTF-8
    text (a text file's values and lines are; float32 bytes are not, but for 4 dim bytes that all
    happen to be)."""
    if header is None:
        return False
    space = record.find(b" ")
    values = record[space + 1 : space + 1 + 4 * min(header[1], _SNIFFED_VALUES)] if space >= 0 else b""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(values)  # A character cut at the end: left out.
    except UnicodeDecodeError:
        return True
    return not all(c.isprintable() or c in "\t\r\n" for c in text)


def _lines(head: bytes, rest: BinaryIO) -> Iterator[bytes]:
    """The lines of a stream whose first bytes `head` were read already, then of the rest of it."""
    lines = list(io.BytesIO(head))  # Split at b"\n" only, as iterating over a file is.
    last = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
    yield from lines
    last += rest.readline()
    if last:
        yield last
    yield from rest


def read_vectors(path: str) -> VectorFile:
    """A text or word2vec binary file (told apart by `_is_binary_record`), read once from its start
    to its end: a pipe (`<(zcat vectors.gz)`) reads as the file would."""
    with open(path, "rb") as f:
        first = f.readline()
        header = _header(_header_text(first))
        record = f.read(_MAX_WORD_BYTES + 4 * min(header[1], _SNIFFED_VALUES)) if header is not None else b""
        if _is_binary_record(header, record):
            return VectorFile(*_parse_binary(first + record + f.read(), path), binary=True)
        return VectorFile(*_parse_text(_lines(first + record, f), path), binary=False)


def read_text(path: str) -> tuple[list[str], np.ndarray]:
    """The words and their `[n_words, dim]` float32 vectors of a text file, with or without the header."""
    with open(path, "rb") as f:
        return _parse_text(f, path)


def read_binary(path: str) -> tuple[list[str], np.ndarray]:
    """The words and their `[n_words, dim]` float32 vectors of a word2vec binary file."""
    with open(path, "rb") as f:
        return _parse_binary(f.read(), path)


def write_text(path: str, words: Sequence[str], vectors: np.ndarray, header: bool = True) -> None:
    """`vectors` (`[n_words, dim]`) of `words` as a text file, word2vec's header first unless not
    `header` (GloVe's files), atomically; each value is float32's shortest exact decimal."""
    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"{len(words)} words need vectors of shape [{len(words)}, dim], not {list(vectors.shape)}")
    if len(set(words)) != len(words):
        raise ValueError("the words are not distinct")
    bad = [w for w in words if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"word {bad[0]!r} is empty or holds whitespace: its line would not read back")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("the vectors are not all finite")

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            if header:
                f.write(f"{len(words)} {vectors.shape[1]}\n")
            for word, row in zip(words, vectors):
                f.write(f"{word} {' '.join(map(str, row))}\n")

    write_atomic(os.fspath(path), write)
