"""CoNLL-U files, the Universal Dependencies format (https://universaldependencies.org/format.html).

A `Sentence` keeps its syntactic words only: multiword-token lines (`3-4`) and empty nodes (`5.1`)
are checked and skipped, so token-level tasks see each word once. Errors are ValueErrors naming
`file:line`.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

from elmo_jax.data.line_files import numbered_lines

SUFFIXES = (".conllu", ".conllu.gz")  # What makes a text source read a file as CoNLL-U.
COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
_MULTIWORD = re.compile(r"[1-9][0-9]*-[1-9][0-9]*")
_EMPTY_NODE = re.compile(r"(0|[1-9][0-9]*)\.[1-9][0-9]*")
_WORD = re.compile(r"[1-9][0-9]*")


# A syntactic word: its 10 columns (COLUMNS, as strings: token.form, token.upos, ...) and its 1-based
# line in the file.
Token = NamedTuple("Token", [*((column, str) for column in COLUMNS), ("line", int)])


class Sentence(NamedTuple):
    """The words of one sentence, and the file they were read from."""

    path: str
    tokens: list[Token]


def is_conllu_file(path: str) -> bool:
    """Whether a sentence source reads `path` as CoNLL-U (its name ends in one of SUFFIXES)."""
    return path.endswith(SUFFIXES)


def read_conllu(path: str) -> list[Sentence]:
    """The sentences of the CoNLL-U file at `path`; ValueError naming `path:line` for bad input."""
    sentences = parse_conllu((line for _, line in numbered_lines(path)), path)
    if not sentences:
        raise ValueError(f"{path}: no sentences (an empty file, or comments only)")
    return sentences


def parse_conllu(lines: Iterable[str], path: str, first_line: int = 1) -> list[Sentence]:
    """The sentences of CoNLL-U `lines` (numbered from `first_line`, named `path` in errors)."""
    sentences: list[Sentence] = []
    tokens: list[Token] = []
    ids_seen = False  # The sentence has token lines (words, multiword tokens or empty nodes).
    for number, line in enumerate(lines, first_line):
        line = line.rstrip("\r\n")
        if not line.strip():
            if ids_seen:
                sentences.append(_sentence(path, tokens, number))
            tokens, ids_seen = [], False
        elif not line.startswith("#"):
            token = _token_line(line, path, number, len(tokens))
            ids_seen = True
            if token is not None:
                tokens.append(token)
    if ids_seen:
        sentences.append(_sentence(path, tokens, None))
    return sentences


def _sentence(path: str, tokens: list[Token], end: int | None) -> Sentence:
    """The sentence ending before line `end` (None: at the end of the file); it needs a word."""
    if not tokens:
        where = f"line {end}" if end is not None else "the end of the file"
        raise ValueError(f"{path}: the sentence ending at {where} has no word lines (integer IDs)")
    return Sentence(path, tokens)


def _token_line(line: str, path: str, number: int, words_before: int) -> Token | None:
    """The word of a token line, or None for a multiword token or an empty node."""
    columns = line.split("\t")
    if len(columns) != len(COLUMNS):
        raise ValueError(f"{path}:{number}: expected {len(COLUMNS)} tab-separated columns, got {len(columns)}")
    for name, value in zip(COLUMNS, columns):
        if not value:
            raise ValueError(f"{path}:{number}: empty {name.upper()} column (CoNLL-U writes '_' for no value)")
    token_id = columns[0]
    if _MULTIWORD.fullmatch(token_id) or _EMPTY_NODE.fullmatch(token_id):
        return None
    if not _WORD.fullmatch(token_id):
        raise ValueError(f"{path}:{number}: ID {token_id!r} is not a word (N), a multiword token (N-M) or an "
                         "empty node (N.M)")
    if int(token_id) != words_before + 1:
        raise ValueError(f"{path}:{number}: word ID {token_id} out of order (expected {words_before + 1}; "
                         "a missing blank line between sentences?)")
    return Token(*columns, line=number)
