"""WiC's layout (Word-in-Context, Pilehvar and Camacho-Collados 2019): pairs of sentences sharing a
target word, labelled by whether the word has the same sense in both.

A split is a data file `<split>.data.txt`, one pair a line: `word<TAB>PoS<TAB>i-j<TAB>sentence
1<TAB>sentence 2` (i, j: the target's 0-based token indices in ASCII digits; word: its lemma), and
a gold file `<split>.gold.txt`, `T` (same sense) or `F` line for line. A directory holds `train`,
`test` and optionally `dev`, as `DIR/train.data.txt` or `DIR/train/train.data.txt`. Errors are
ValueErrors naming `file:line`.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from elmo_jax.data.line_files import gold_lines, numbered_lines, token_index

SPLITS = ("train", "dev", "test")
REQUIRED = ("train", "test")
LABELS = {"T": True, "F": False}
_COLUMNS = "word<TAB>PoS<TAB>i-j<TAB>sentence 1<TAB>sentence 2"
_INDICES = re.compile(r"([0-9]+)-([0-9]+)")


class WicPair(NamedTuple):
    """One pair: the target word (a lemma) and its PoS, each sentence's tokens and the target's
    index in it, whether the senses are the same, and where it was read (data file, 1-based line)."""

    word: str
    pos: str
    tokens: tuple[list[str], list[str]]
    positions: tuple[int, int]
    same: bool
    where: tuple[str, int]


class WicData(NamedTuple):
    """The splits of a WiC directory; `dev` is None when the directory has none."""

    train: list[WicPair]
    dev: list[WicPair] | None
    test: list[WicPair]


def read_wic(directory: str) -> WicData:
    """The splits of `directory`; ValueError for bad input or a missing split."""
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: not a directory")
    splits = {split: split_files(directory, split) for split in SPLITS}
    missing = [split for split in REQUIRED if splits[split] is None]
    if missing:
        raise ValueError(
            f"{directory}: no {', '.join(f'{s}.data.txt' for s in missing)} (WiC's layout: "
            f"<split>.data.txt or <split>/<split>.data.txt, for train, test and optionally dev)"
        )
    pairs = {split: None if files is None else read_split(*files) for split, files in splits.items()}
    return WicData(**pairs)


def split_files(directory: str, split: str) -> tuple[str, str] | None:
    """(data file, gold file) of `split` in `directory`, beside the others or in `split/`; None if neither."""
    for folder in (directory, os.path.join(directory, split)):
        data = os.path.join(folder, f"{split}.data.txt")
        if os.path.isfile(data):
            return data, os.path.join(folder, f"{split}.gold.txt")
    return None


def read_split(data_path: str, gold_path: str) -> list[WicPair]:
    """The pairs of one split's data and gold files."""
    parsed = [parse_data_line(data_path, number, line) for number, line in numbered_lines(data_path)]
    if not parsed:
        raise ValueError(f"{data_path}: no pairs (an empty file)")
    pairs = []
    for number, label in gold_lines(gold_path, data_path, len(parsed)):
        if label not in LABELS:
            raise ValueError(f"{gold_path}:{number}: label {label!r} is not T or F")
        pairs.append(parsed[number - 1]._replace(same=LABELS[label]))
    return pairs


def parse_data_line(path: str, number: int, line: str) -> WicPair:
    """A data line as a pair (its `same` False until the gold file says); ValueError naming `path:number`."""
    columns = line.split("\t")
    if len(columns) != 5:
        raise ValueError(f"{path}:{number}: expected 5 tab-separated columns ({_COLUMNS}), got {len(columns)}")
    word, pos, indices, *sentences = columns
    match = _INDICES.fullmatch(indices)
    if not match:
        raise ValueError(f"{path}:{number}: the indices {indices!r} are not 'i-j' (i, j: ASCII digits)")
    tokens = (sentences[0].split(), sentences[1].split())
    positions = tuple(token_index(path, number, match[n], len(tokens[n - 1]), "index", f"sentence {n}") for n in (1, 2))
    return WicPair(word, pos, tokens, positions, False, (path, number))
