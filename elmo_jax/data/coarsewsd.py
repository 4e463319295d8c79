"""CoarseWSD-20's layout (Loureiro et al. 2021): word-sense examples of ambiguous nouns.

A word's directory holds `classes_map.txt` (JSON: sense id -> sense name), `<split>.data.txt`
(one example a line, at least one: the ambiguous word's 0-based position in ASCII digits, a tab,
the tokenized sentence) and `<split>.gold.txt` (a sense id a line, line for line), for train and
test. The dataset's root holds one such directory per word. Errors are ValueErrors naming `file:line`.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

from elmo_jax.data.line_files import gold_lines, numbered_lines, token_index

CLASSES = "classes_map.txt"
SPLITS = ("train", "test")


class SenseExample(NamedTuple):
    """One occurrence of an ambiguous word: its sentence's tokens, the word's index among them,
    its sense id, and where it was read (the data file and its 1-based line)."""

    tokens: list[str]
    position: int
    sense: str
    where: tuple[str, int]


class WsdWord(NamedTuple):
    """One ambiguous word (its directory's name): its senses (id -> name) and its examples."""

    word: str
    senses: dict[str, str]
    train: list[SenseExample]
    test: list[SenseExample]


def read_coarsewsd(directory: str) -> list[WsdWord]:
    """The words of `directory`: one word's directory (it has `classes_map.txt`), or a root of such
    directories (the words in sorted order; other entries ignored). ValueError for bad input."""
    if os.path.isfile(os.path.join(directory, CLASSES)):
        return [read_word(directory)]
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: not a directory")
    words = sorted(
        name for name in os.listdir(directory) if os.path.isfile(os.path.join(directory, name, CLASSES))
    )
    if not words:
        raise ValueError(f"{directory}: no {CLASSES}, nor directories with one (CoarseWSD-20's layout)")
    return [read_word(os.path.join(directory, name)) for name in words]


def read_word(directory: str) -> WsdWord:
    """One word's directory."""
    senses = _read_classes(os.path.join(directory, CLASSES))
    splits = [_read_split(directory, split, senses) for split in SPLITS]
    return WsdWord(os.path.basename(os.path.normpath(directory)), senses, *splits)


def _read_classes(path: str) -> dict[str, str]:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        senses = json.loads(raw.decode("utf-8-sig"))  # Read with or without a byte order mark, as the others.
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError both.
        raise ValueError(f"{path}: not a JSON object of sense id -> sense name ({e})") from e
    if not isinstance(senses, dict) or not senses or not all(isinstance(v, str) for v in senses.values()):
        raise ValueError(f"{path}: not a JSON object of sense id -> sense name")
    return senses


def _read_split(directory: str, split: str, senses: dict[str, str]) -> list[SenseExample]:
    data_path = os.path.join(directory, f"{split}.data.txt")
    gold_path = os.path.join(directory, f"{split}.gold.txt")
    sentences = [_parse_data_line(data_path, number, line) for number, line in numbered_lines(data_path)]
    if not sentences:  # Its probes would be trained, then scored on nothing.
        raise ValueError(f"{data_path}: no sentences (an empty file)")
    examples = []
    for number, sense in gold_lines(gold_path, data_path, len(sentences), "sense"):
        if sense not in senses:
            raise ValueError(f"{gold_path}:{number}: sense {sense!r} is not in {CLASSES} ({', '.join(senses)})")
        tokens, position = sentences[number - 1]
        examples.append(SenseExample(tokens, position, sense, (data_path, number)))
    return examples


def _parse_data_line(path: str, number: int, line: str) -> tuple[list[str], int]:
    """A data line's tokens and the target's position; ValueError naming `path:number`."""
    position, tab, sentence = line.partition("\t")
    if not tab:
        raise ValueError(f"{path}:{number}: expected '<position><TAB><sentence>', got {line[:40]!r}")
    tokens = sentence.split()
    if not tokens:
        raise ValueError(f"{path}:{number}: an empty sentence")
    return tokens, token_index(path, number, position, len(tokens), "position")
