"""Tiny directories in WiC's layout (elmo_jax/data/wic.py), of made-up pairs: the words and sense
contexts of tests/data/coarsewsd_helpers.py, two sentences of one word, of one sense (T) or of two
(F), half and half (so the contexts tell the label)."""

from __future__ import annotations

import os

import numpy as np

from tests.data.coarsewsd_helpers import CONTEXTS



def write_split(root: str, split: str, lines: list[str], gold: list[str], nested: bool = True) -> str:
    """`split`'s data and gold files under `root` (in `root/split/` when `nested`, WiC's layout);
    returns the data file's path."""
    directory = os.path.join(root, split) if nested else root
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{split}.data.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{line}\n" for line in lines)
    with open(os.path.join(directory, f"{split}.gold.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{label}\n" for label in gold)
    return os.path.join(directory, f"{split}.data.txt")


def _sentence(rng: np.random.Generator, word: str, context: list[str]) -> tuple[str, int]:
    tokens = list(rng.choice(context, int(rng.integers(2, 6))))
    position = int(rng.integers(len(tokens) + 1))
    tokens.insert(position, word)
    return " ".join(tokens), position


def made_up_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """`n` data lines and their gold labels: a word of CONTEXTS in two sentences, of one sense or
    of two senses drawn at random, half and half."""
    rng = np.random.default_rng(seed)
    lines, gold = [], []
    for _ in range(n):
        word = str(rng.choice(sorted(CONTEXTS)))
        contexts = list(CONTEXTS[word].values())
        first, other = (int(i) for i in rng.choice(len(contexts), 2, replace=False))
        second = first if rng.random() < 0.5 else other
        (one, i), (two, j) = _sentence(rng, word, contexts[first]), _sentence(rng, word, contexts[second])
        lines.append(f"{word}\tN\t{i}-{j}\t{one}\t{two}")
        gold.append("T" if first == second else "F")
    return lines, gold


def write_made_up_wic(root: str, train: int = 60, dev: int = 0, test: int = 30, nested: bool = True) -> str:
    """`root` with made-up train, test and (`dev` > 0) dev splits; returns `root`."""
    for i, (split, n) in enumerate((("train", train), ("dev", dev), ("test", test))):
        if n:
            write_split(root, split, *made_up_pairs(n, seed=i), nested=nested)
    return root
