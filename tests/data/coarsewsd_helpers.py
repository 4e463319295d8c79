"""Tiny directories in CoarseWSD-20's layout (elmo_jax/data/coarsewsd.py), of made-up sentences:
each sense of a word has context words of its own, so the word's context tells its sense."""

from __future__ import annotations

import json
import os

import numpy as np

Example = tuple[int, str, str]  # (position of the word, the sentence, its sense id)

CONTEXTS = {  # word -> sense name -> the words around it.
    "bank": {"river": ["river", "water", "mud", "fish", "shore"], "money": ["loan", "cash", "account", "money", "pay"]},
    "bass": {"fish": ["lake", "caught", "fish", "hook"], "music": ["guitar", "band", "played", "song"],
             "voice": ["sang", "choir", "low", "singer"]},
}


def write_word(root: str, word: str, senses: list[str], train: list[Example], test: list[Example]) -> str:
    """`root/word`, with `senses` as ids 0, 1, ... in classes_map.txt; returns its path."""
    directory = os.path.join(root, word)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "classes_map.txt"), "w", encoding="utf-8") as f:
        json.dump({str(i): f"{word}_{name}" for i, name in enumerate(senses)}, f)
    for split, examples in (("train", train), ("test", test)):
        with open(os.path.join(directory, f"{split}.data.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{position}\t{sentence}\n" for position, sentence, _ in examples)
        with open(os.path.join(directory, f"{split}.gold.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{sense}\r\n" for _, _, sense in examples)  # The dataset's gold files end lines so.
    return directory


def made_up_examples(word: str, n: int, seed: int) -> list[Example]:
    """`n` sentences of 3 to 8 tokens: `word` among context words of a sense drawn at random."""
    rng = np.random.default_rng(seed)
    contexts = list(CONTEXTS[word].values())
    examples = []
    for _ in range(n):
        sense = int(rng.integers(len(contexts)))
        tokens = list(rng.choice(contexts[sense], int(rng.integers(2, 7))))
        position = int(rng.integers(len(tokens) + 1))
        tokens.insert(position, word)
        examples.append((position, " ".join(tokens), str(sense)))
    return examples


def write_made_up_dataset(root: str, train: int = 30, test: int = 16) -> str:
    """`root` with a directory per word of CONTEXTS, `train` and `test` examples each; returns `root`."""
    for i, (word, senses) in enumerate(CONTEXTS.items()):
        write_word(root, word, list(senses), made_up_examples(word, train, 2 * i), made_up_examples(word, test, 2 * i + 1))
    return root
