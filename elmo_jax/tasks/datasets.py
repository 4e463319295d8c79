"""A task's labelled (or unlabelled) sentences, read from the files users have: a CoNLL-U column for
taggers (UPOS, XPOS), CoNLL-U trees for the parser, IOB2/IOB1 entity files for NER; and the nested
subsets of a training set that learning curves train on.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from elmo_jax.data.conllu_tasks import ConlluDocument, column_labels, document_trees, read_conllu_document
from elmo_jax.data.entities import EntityFile, read_entity_file, tag_vocabulary

KINDS = ("tag", "ner", "parse")  # task.kind: a CoNLL-U column, named entities, dependency trees.
COLUMNS = ("upos", "xpos")  # task.column of the taggers.


class Examples(NamedTuple):
    """Sentences of one file: `words` and `labels` (a tag, an IOB2 entity tag or a dependency relation
    per word), `heads` (the parser's, 0 = the root; None for taggers) and the file as read, which
    predictions are written back into."""

    words: list[list[str]]
    labels: list[list[str]]
    heads: list[list[int]] | None
    source: ConlluDocument | EntityFile

    def take(self, indices: Sequence[int]) -> Examples:
        """The sentences at `indices`, in that order (the source kept whole)."""
        heads = None if self.heads is None else [self.heads[i] for i in indices]
        return Examples([self.words[i] for i in indices], [self.labels[i] for i in indices], heads, self.source)


def read_examples(kind: str, path: str, column: str = "upos", scheme: str = "iob2",
                  unlabelled: bool = False) -> Examples:
    """The sentences of `path` for task `kind` (KINDS). `unlabelled`: a CoNLL-U file whose `column`
    (or HEAD and DEPREL) may be `_`, read for prediction (its labels are then meaningless); an entity
    file always has a tag column. ValueError naming `file:line` for bad input."""
    if kind == "ner":
        entities = read_entity_file(path, scheme=scheme)
        return Examples([s.words for s in entities.sentences], [s.tags for s in entities.sentences], None, entities)
    document = read_conllu_document(path)
    words = [[token.form for token in sentence.tokens] for sentence in document.sentences]
    if kind == "tag":
        return Examples(words, column_labels(document, column, unlabelled), None, document)
    if kind != "parse":
        raise ValueError(f"unknown task kind {kind!r} (expected one of {', '.join(KINDS)})")
    if unlabelled:
        return Examples(words, [["_"] * len(w) for w in words], [[0] * len(w) for w in words], document)
    trees = document_trees(document)
    return Examples(words, [t.relations for t in trees], [t.heads for t in trees], document)


def label_names(kind: str, train: Examples) -> list[str]:
    """The labels a model predicts, from its training sentences: their sorted tags or relations; for
    NER, O and B-/I- of every entity type seen (the CRF's constraints need both of each)."""
    if kind == "ner":
        return tag_vocabulary(sorted({tag[2:] for tags in train.labels for tag in tags if tag != "O"}))
    return sorted({label for labels in train.labels for label in labels})


def training_subset(count: int, fraction: float, seed: int) -> np.ndarray:
    """The indices of the first `fraction` (0 < fraction <= 1, at least one sentence) of a permutation of
    `count` training sentences drawn from `seed`: a smaller fraction's sentences are among every larger
    one's, so a learning curve's points differ only in how much data they add."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a training fraction must be in (0, 1], got {fraction}")
    order = np.random.default_rng(seed).permutation(count)
    return np.sort(order[: max(1, round(fraction * count))])
