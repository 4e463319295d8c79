"""Small vector files for the tests of what reads them: word2vec's binary format as word2vec writes
it (text files: `vector_files.write_text`)."""

from __future__ import annotations

import struct

import numpy as np


def binary_bytes(words, vectors: np.ndarray, count: int | None = None, dim: int | None = None,
                 newline: bool = True) -> bytes:
    """word2vec's binary file: `count dim\\n`, then per word `word `, the floats and a newline."""
    data = f"{len(words) if count is None else count} {vectors.shape[1] if dim is None else dim}\n".encode()
    for word, row in zip(words, vectors):
        data += (word.encode() if isinstance(word, str) else word) + b" " + struct.pack(f"<{len(row)}f", *row)
        data += b"\n" if newline else b""
    return data
