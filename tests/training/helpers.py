"""Shared helpers for training tests: tiny configs, random batches, text corpora."""

from __future__ import annotations

import os

import numpy as np

from configs.overrides import apply_overrides
from configs.tests import tiny

WORDS = "the cat sat on a mat while dogs ran past old red barns near quiet hills".split()


def tiny_config(**overrides):
    """configs/tests/tiny.py with dotted-key overrides, e.g. {'model.dropout': 0.0}."""
    config = tiny.get_config()
    apply_overrides(config, overrides)
    return config


def random_batch(rng: np.random.Generator, vocab_size: int, batch: int, steps: int, chars: int, mask_tail: int = 0):
    """A batch with random ids; the last `mask_tail` positions of row 0 are padding."""
    out = {}
    for direction in ("forward", "backward"):
        mask = np.ones((batch, steps), bool)
        if mask_tail:
            mask[0, -mask_tail:] = False
        out[direction] = {
            "token_ids": rng.integers(0, vocab_size, (batch, steps)).astype(np.int32),
            "targets": rng.integers(0, vocab_size, (batch, steps)).astype(np.int32),
            "char_ids": rng.integers(1, 262, (batch, steps, chars)).astype(np.int32),
            "mask": mask,
        }
    return out


def write_corpus(directory: str, n_sentences: int, seed: int, n_files: int = 2) -> str:
    """Random sentences over WORDS split into text files; returns a glob."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for f in range(n_files):
        with open(os.path.join(directory, f"part-{f}.txt"), "w") as out:
            for _ in range(n_sentences // n_files):
                out.write(" ".join(rng.choice(WORDS, rng.integers(2, 9))) + "\n")
    return os.path.join(directory, "part-*.txt")
