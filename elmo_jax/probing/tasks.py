"""Probing tasks and the text the biLM reads (docs/probing.md).

A task maps a token's CoNLL-U columns to its label: `upos`, `xpos` or `deprel` (subtype included);
a label `_` is an error naming the file and line. Normalisation spells the words as the biLM's
training text: `none`, `lower`, or `ptb` (lower case, a token with a digit and no letter as `N`).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple, Sequence

from elmo_jax.data.conllu import Sentence, Token

TASKS: dict[str, Callable[[Token], str]] = {
    "upos": lambda token: token.upos,
    "xpos": lambda token: token.xpos,
    "deprel": lambda token: token.deprel,
}
NORMALIZATIONS = ("none", "lower", "ptb")
_LETTER = re.compile(r"[^\W\d_]")


def normalize_word(word: str, normalize: str) -> str:
    """`word` as the biLM's training text would spell it (`NORMALIZATIONS`)."""
    if normalize == "none":
        return word
    if normalize == "lower":
        return word.lower()
    if normalize == "ptb":
        return "N" if any(c.isdigit() for c in word) and not _LETTER.search(word) else word.lower()
    raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")


class LabelledTokens(NamedTuple):
    """One split of a task: the sentences' words as the biLM reads them, and each word's label and
    (file, line), flat in sentence order; `forms`: the sentences' words as written."""

    sentences: list[list[str]]
    labels: list[str]
    where: list[tuple[str, int]]
    forms: Sequence[Sequence[str]] = ()

    @property
    def words(self) -> list[str]:
        return [word for sentence in self.sentences for word in sentence]


def labelled_tokens(sentences: Sequence[Sentence], task: str, normalize: str) -> LabelledTokens:
    """The words and labels of `task` (a name of TASKS) in `sentences`; ValueError for a token without one."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    label_of = TASKS[task]
    normalize_word("", normalize)  # Checks the mode before any sentence.
    words, labels, where, forms = [], [], [], []
    for sentence in sentences:
        forms.append([token.form for token in sentence.tokens])
        words.append([normalize_word(form, normalize) for form in forms[-1]])
        for token in sentence.tokens:
            label = label_of(token)
            if label == "_":
                raise ValueError(f"{sentence.path}:{token.line}: no {task} label ('_') for {token.form!r}")
            labels.append(label)
            where.append((sentence.path, token.line))
    return LabelledTokens(words, labels, where, forms)
